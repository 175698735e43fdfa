"""Conversation messages: the provider-neutral shape every part of Switchboard speaks.

A `Message` is one entry of a session's history. Providers translate it to and from their wire
formats; the store persists it as soon as it exists, with a per-session `seq`.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Annotated, Any, Literal, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ContentPart",
    "Derives",
    "ImagePart",
    "Message",
    "Role",
    "TextPart",
    "ToolCall",
    "Usage",
]

Role = Literal["system", "user", "assistant", "tool"]

_T = TypeVar("_T")
# Where a message keeps what was derived from it; not a field, so it is neither compared,
# serialized nor validated.
_DERIVED = "_derived"


class TextPart(BaseModel):
    """A run of text inside a message."""

    model_config = ConfigDict(frozen=True)

    type: Literal["text"] = "text"
    text: str


class ImagePart(BaseModel):
    """An image inside a user message: its bytes (base64 in JSON), or, as the store keeps it,
    `ref` (the digest it is kept under in the session's images, `core/stored_images.py`) with
    its size and no bytes. A message stored before images were kept apart has the bytes."""

    model_config = ConfigDict(frozen=True, ser_json_bytes="base64", val_json_bytes="base64")

    type: Literal["image"] = "image"
    media_type: str = Field(pattern=r"^image/[a-z0-9.+-]+$")
    data: bytes = b""
    ref: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    width: int | None = Field(default=None, ge=1)
    height: int | None = Field(default=None, ge=1)

    def base64(self) -> str:
        """The image bytes as base64 text, as both vendor APIs want them."""
        return base64.b64encode(self.data).decode("ascii")


ContentPart = Annotated[TextPart | ImagePart, Field(discriminator="type")]


class ToolCall(BaseModel):
    """A request by the model to run one tool; also a streamed model event."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    # Set when the model sent arguments that are not a JSON object; the runtime reports it back.
    raw_arguments: str | None = None


class Usage(BaseModel):
    """Token counts reported by a provider for one or more calls."""

    model_config = ConfigDict(frozen=True)

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )

    @property
    def total_tokens(self) -> int:
        """Every token counted, cached or not."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )


class Derives:
    """`derived`, for frozen models: what is worked out from one once, kept with it."""

    def derived(self, key: str, compute: Callable[[Self], _T]) -> _T:
        """`compute(self)`, worked out once per object: it never changes, and a long
        conversation would otherwise be measured and translated again on every step.

        `key` names what is derived (a token estimate, one provider's wire form); callers
        must not change the value they get back.
        """
        memo: dict[str, Any] | None = self.__dict__.get(_DERIVED)
        if memo is None:
            memo = self.__dict__[_DERIVED] = {}
        if key in memo:
            return memo[key]  # type: ignore[no-any-return]
        value = memo[key] = compute(self)
        return value


class Message(Derives, BaseModel):
    """One entry of a conversation.

    `seq` and `created_at` are assigned by the store when the message is appended; a message
    that has not been stored yet has `seq == 0`.
    """

    model_config = ConfigDict(frozen=True)

    role: Role
    content: list[ContentPart] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    # For a tool result: the tool's name and whether it is an error the model should correct.
    name: str | None = None
    is_error: bool = False
    seq: int = 0
    created_at: datetime | None = None
    usage: Usage | None = None
    # For a user message: the inbound message whose turn stored it (its dedupe key; a message
    # that joined a running turn carries that turn's, docs/decisions/0012), so a turn cut off
    # by a crash is resumed, not started over with the user message stored twice.
    source: str | None = None
    # The message's own id, given by its writer before it is first stored: a write tried again
    # (its first try's answer lost with the connection) finds the stored message by it instead
    # of storing it twice. None for a message whose writer gave none.
    id: str | None = None
    # For a person's message: who wrote it, `<platform>:<user id>`, so what one person wrote in
    # a group can be found again (`switchboard people`). None for the others and older ones.
    author: str | None = None
    # Who spoke for the bot in an assistant message the model did not write: "operator" for a
    # person answering in a chat they took over (`core/takeover.py`), "switchboard" for its note
    # at the handback. Providers send it as any assistant message; the web page shows it.
    speaker: Literal["operator", "switchboard"] | None = None

    @classmethod
    def user(
        cls,
        text: str,
        images: list[ImagePart] | None = None,
        *,
        source: str | None = None,
        author: str | None = None,
    ) -> Message:
        """A user message with text and optional images."""
        parts: list[TextPart | ImagePart] = [TextPart(text=text)] if text else []
        parts.extend(images or [])
        return cls(role="user", content=parts, source=source, author=author)

    @classmethod
    def assistant(
        cls, text: str, tool_calls: list[ToolCall] | None = None, usage: Usage | None = None
    ) -> Message:
        """An assistant message with optional tool calls."""
        return cls(
            role="assistant",
            content=[TextPart(text=text)] if text else [],
            tool_calls=tool_calls or [],
            usage=usage,
        )

    @classmethod
    def tool_result(cls, call: ToolCall, text: str, *, is_error: bool = False) -> Message:
        """The result of one tool call, addressed to it by id."""
        return cls(
            role="tool",
            content=[TextPart(text=text)],
            tool_call_id=call.id,
            name=call.name,
            is_error=is_error,
        )

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy, without what was derived from the original (the copy may differ)."""
        copied = super().model_copy(update=update, deep=deep)
        copied.__dict__.pop(_DERIVED, None)
        return copied

    @property
    def text(self) -> str:
        """The text parts joined together (images are left out)."""
        return "".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def images(self) -> list[ImagePart]:
        """The image parts of this message."""
        return [p for p in self.content if isinstance(p, ImagePart)]
