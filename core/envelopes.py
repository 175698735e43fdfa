"""What travels on the bus: `Inbound` work, `Outbound` deliveries and lifecycle `EventEnvelope`s.

Every envelope is a pydantic model with a `type` tag; `encode`/`decode` turn them into msgpack
bytes with a format version, so the in-memory and Redis buses carry exactly the same payloads.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

import msgpack
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from core.clock import utc_now
from core.errors import BusError
from core.messages import ImagePart

__all__ = [
    "ENVELOPE_VERSION",
    "MAX_ATTACHMENT_BYTES",
    "Address",
    "Attachment",
    "Envelope",
    "EventEnvelope",
    "Inbound",
    "InboundKind",
    "NotificationEvent",
    "NotificationFailed",
    "NotificationSent",
    "NotificationSource",
    "Outbound",
    "OutboundKind",
    "Receipt",
    "ReceiptStatus",
    "Transcription",
    "decode",
    "encode",
    "new_id",
]

ENVELOPE_VERSION = 1


def new_id() -> str:
    """A fresh random identifier (32 hex characters)."""
    return uuid.uuid4().hex


class Address(BaseModel):
    """Where a conversation lives: platform, bot, chat and optional thread."""

    model_config = ConfigDict(frozen=True)

    platform: str = Field(min_length=1)
    bot: str = "default"
    chat: str = Field(min_length=1)
    thread: str | None = None

    @classmethod
    def parse(cls, text: str) -> Address:
        """The generic form `<platform>:<chat>[:<thread>]`; `ValueError` otherwise.

        Platforms' own grammars (which ids they accept, a bare platform name) live with the
        channels; `core.addresses.AddressBook` applies them.
        """
        platform, _, rest = text.strip().partition(":")
        chat, _, thread = rest.partition(":")
        if not platform or not chat or ":" in thread:
            raise ValueError(f"{text!r} is not an address; use <platform>:<chat>[:<thread>]")
        return cls(platform=platform.lower(), chat=chat, thread=thread or None)

    def __str__(self) -> str:
        text = f"{self.platform}:{self.chat}"
        return f"{text}:{self.thread}" if self.thread else text

    @property
    def session_key(self) -> str:
        """`<platform>:<bot>:<chat>[:<thread>]`: one session per DM, group or thread."""
        key = f"{self.platform}:{self.bot}:{self.chat}"
        return f"{key}:{self.thread}" if self.thread else key


InboundKind = Literal["message", "command", "cancel", "answer"]


class Transcription(BaseModel):
    """One recording of a message that the gateway had transcribed (`[voice]`): the worker
    charges it to the ledger when the message's turn opens (`core/voice.py`)."""

    model_config = ConfigDict(frozen=True)

    model: str
    # The recording's length as the platform announced it; None: not announced.
    seconds: float | None = None
    # USD at `[voice] price_per_minute`; None: unknown (no length announced).
    cost_usd: float | None = None


class Inbound(BaseModel):
    """A unit of work for a worker: a user message, a bot command or a cancel request."""

    model_config = ConfigDict(frozen=True)

    type: Literal["inbound"] = "inbound"
    id: str = Field(default_factory=new_id)
    kind: InboundKind = "message"
    address: Address
    user_id: str = ""
    user_name: str = ""
    text: str = ""
    images: list[ImagePart] = Field(default_factory=list)
    # Documents that came with it, as the model reads them: each one's text fenced as untrusted
    # (`channels/attachments.py`), a voice note's transcript marked "(voice note)", or a note
    # saying why a file was not read. Kept apart from `text`, whose length limit is for what
    # the person wrote.
    documents: list[str] = Field(default_factory=list)
    # The recordings among them that were transcribed, to be charged to the ledger.
    transcriptions: list[Transcription] = Field(default_factory=list)
    is_direct: bool = False
    mentions_bot: bool = False
    # The workspace or server (a group of chats on one platform) the chat belongs to, if any.
    team: str | None = None
    # The platform's own id for the message; the key for dedupe of redelivered updates.
    platform_message_id: str | None = None
    # For kind == "command": the command word without the slash (`new`, `cost`, `help`).
    command: str | None = None
    # "user": a person wrote it (`user_id` is their id on the platform). "scheduled": a run
    # of a schedule; `address` is the chat its answer goes to, `owner` who made the schedule.
    # "external": an agent turn asked for from outside (`switchboard notify --prompt`, the
    # hooks listener), run in the session `notify:<external_session>`, answered in `address`.
    origin: Literal["user", "scheduled", "external"] = "user"
    # For origin == "scheduled": the schedule and run, who made it and when it is delivered.
    schedule_id: str | None = None
    run_id: str | None = None
    # "<platform>:<user id>" of the person who made the schedule, or "cli" for the operator.
    owner: str | None = None
    notify: Literal["always", "conditional", "never"] = "always"
    received_at: datetime = Field(default_factory=utc_now)
    # For kind == "answer": the id of the confirmation question a button press answers
    # (`text` is "yes" or "no"); it never waits in a mailbox (`core/confirm.py`).
    question: str | None = None
    # For origin == "external": the session's name (`ci` runs in `notify:ci`).
    external_session: str | None = None
    # The W3C trace context of its hand-over to a mailbox, so the worker's spans continue the
    # producer's trace (`core/tracing.py`); None while tracing is off.
    traceparent: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _scheduled_before_owner(cls, data: Any) -> Any:
        """Read a scheduled run written before `owner` (checkpoints, mailboxes): it had a
        made-up `scheduled` address, its target in `deliver_to` and its owner in `user_id`."""
        if (
            isinstance(data, dict)
            and data.get("origin") == "scheduled"
            and data.get("deliver_to") is not None
            and "owner" not in data
        ):
            data = {**data, "address": data["deliver_to"], "owner": data.get("user_id") or None}
            data["user_id"] = ""
            data.pop("deliver_to")
        return data

    @property
    def model_text(self) -> str:
        """What the model reads of it: the text, then the documents that came with it."""
        return "\n\n".join(part for part in (self.text, *self.documents) if part.strip())

    @property
    def author(self) -> str | None:
        """Who wrote it, `<platform>:<user id>`, for a person's message (`Message.author`)."""
        if self.origin != "user" or not self.user_id:
            return None
        return f"{self.address.platform}:{self.user_id}"

    @property
    def session_key(self) -> str:
        """The conversation this belongs to; a schedule's runs share `scheduled:<id>`."""
        if self.origin == "scheduled" and self.schedule_id:
            return f"scheduled:{self.schedule_id}"
        if self.origin == "external":
            return f"notify:{self.external_session or 'default'}"
        return self.address.session_key

    @property
    def dedupe_key(self) -> str:
        """The identity of this message across redeliveries (of a scheduled run: its run)."""
        if self.origin == "scheduled" and self.run_id:
            return f"scheduled:{self.schedule_id}:{self.run_id}"
        if self.origin == "external":
            return f"notify:{self.id}"
        ident = self.platform_message_id or self.id
        return f"{self.address.platform}:{self.address.bot}:{self.address.chat}:{ident}"


class NotificationSource(BaseModel):
    """Where a proactive delivery came from, so its receipt can find its way back.

    `kind`: `schedule` (a run's answer), `alert` (a schedule's failure alert; a budget
    reached, named `budget:<name>`), `hook` (the HTTP hooks listener) or `cli` (`switchboard
    notify`). `name`: the schedule id or the hook's name; `run_id`: the schedule run whose
    record the receipt updates.
    """

    model_config = ConfigDict(frozen=True)

    kind: Literal["schedule", "alert", "hook", "cli"]
    name: str
    run_id: str | None = None


OutboundKind = Literal[
    "typing",
    "progress",
    "delta",
    "reply",
    "notice",
    "notification",
    "question",
    "decision",
    "file",
]

# The most bytes of attachments one `Outbound` carries. They travel inline, in the envelope,
# so the outbound queue's lease covers them like any text (docs/decisions/0008); the
# platforms' own limits (each `ChannelSpec`) are at or below this.
MAX_ATTACHMENT_BYTES = 20 * 1024 * 1024


class Attachment(BaseModel):
    """A file for a chat: its name, media type and bytes; `image` asks the platform to show it
    as a picture (a Telegram photo) rather than as a document."""

    # In JSON (`switchboard deadletters show`, an event's dump) the bytes are base64: a
    # picture is not UTF-8.
    model_config = ConfigDict(frozen=True, ser_json_bytes="base64", val_json_bytes="base64")

    name: str = Field(min_length=1, max_length=255)
    media_type: str = "application/octet-stream"
    data: bytes = Field(repr=False)
    image: bool = False

    @property
    def size(self) -> int:
        """Its size in bytes."""
        return len(self.data)


class Outbound(BaseModel):
    """Something for a channel adapter to show in a chat.

    * `typing`: the bot is working (adapters renew a typing indicator).
    * `progress`: a short note about tool activity.
    * `delta`: a streamed reply so far: `text` is the whole answer up to now and `seq` orders
      the pieces of one reply, so whichever gateway takes a piece shows it or skips it as
      older than what is shown (`core/store/replies.py`).
    * `reply`: the whole final answer of a turn (`failed` when it is an apology).
    * `notice`: a short system answer (a command's confirmation, a cancelled turn).
    * `notification`: a proactive message nobody asked for just now (schedules).
    * `question`: the bot waits for the person's answer (a yes/no confirmation) mid-turn;
      `question` is its id, for native buttons.
    * `decision`: the answer to `question` is in: `text` is the question with the decision,
      shown in place of the question's message (its buttons taken away).
    * `file`: `attachments` uploaded the platform's way (`text`, if any, is their caption); one
      the platform refuses or that is over its limit becomes a one-line note in the chat.
    """

    model_config = ConfigDict(frozen=True)

    type: Literal["outbound"] = "outbound"
    id: str = Field(default_factory=new_id)
    kind: OutboundKind
    address: Address
    text: str = ""
    # The `Inbound.id` this answers, so a channel can thread it and correlate stream pieces.
    reply_to: str | None = None
    reply_to_platform_id: str | None = None
    # The reply this is (part of): the answered `Inbound.dedupe_key`; its pieces and final text
    # share it, and it keys the reply's record. None: the delivery stands alone (its `id`).
    reply_key: str | None = None
    # Orders the pieces of one reply (`delta`s, then the final text): higher is newer.
    seq: int = 0
    failed: bool = False
    created_at: datetime = Field(default_factory=utc_now)
    # For kinds "question" and "decision": the confirmation question's id.
    question: str | None = None
    # Set on proactive deliveries: the gateway reports a `Receipt` for them.
    source: NotificationSource | None = None
    # For kind "file": the files, together at most MAX_ATTACHMENT_BYTES.
    attachments: list[Attachment] = Field(default_factory=list)
    # The W3C trace context of its enqueueing, so the gateway's delivery joins the trace of
    # the message it answers (`core/tracing.py`); None while tracing is off.
    traceparent: str | None = None

    @model_validator(mode="after")
    def _attachments_fit(self) -> Outbound:
        total = sum(attachment.size for attachment in self.attachments)
        if total > MAX_ATTACHMENT_BYTES:
            raise ValueError(
                f"attachments of {total} bytes are over the {MAX_ATTACHMENT_BYTES} bytes one "
                "delivery carries"
            )
        return self

    @property
    def record_key(self) -> str:
        """The key of the reply record this delivery is shown under."""
        return self.reply_key or self.id

    @property
    def ends_turn(self) -> bool:
        """Whether this is the last thing sent in answer to `reply_to`."""
        return self.kind in ("reply", "notice")


class EventEnvelope(BaseModel):
    """A lifecycle event fanned out on the `events` topic (`agent.run.start`, ...)."""

    model_config = ConfigDict(frozen=True)

    type: Literal["event"] = "event"
    name: str
    session_id: str
    run_id: str
    session_key: str = ""
    data: dict[str, Any] = Field(default_factory=dict)
    at: datetime = Field(default_factory=utc_now)


ReceiptStatus = Literal["delivered", "failed", "dead_lettered"]


class Receipt(BaseModel):
    """What became of a proactive `Outbound`, reported by the gateway on the `receipts` queue.

    `delivered`: the platform confirmed it (`platform_message_id` when the adapter recorded
    one). `failed`: the platform refused for good (`reason`). `dead_lettered`: every attempt
    failed and the entry went to the queue's dead letters (`switchboard deadletters`).
    """

    model_config = ConfigDict(frozen=True)

    type: Literal["receipt"] = "receipt"
    id: str = Field(default_factory=new_id)
    outbound: Outbound
    status: ReceiptStatus
    platform_message_id: str | None = None
    reason: str = ""
    attempt: int = 1
    at: datetime = Field(default_factory=utc_now)


class _NotificationEvent(BaseModel):
    """A proactive delivery whose receipt is known, fanned out on the `notifications` topic.

    `text` is scrubbed of secrets; `status`, `platform_message_id` and `reason` are the
    receipt's.
    """

    model_config = ConfigDict(frozen=True)

    id: str = Field(default_factory=new_id)
    address: Address
    source: NotificationSource
    text: str
    status: ReceiptStatus
    platform_message_id: str | None = None
    reason: str = ""
    attempt: int = 1
    at: datetime = Field(default_factory=utc_now)

    @property
    def name(self) -> str:
        """The event's name (its `type`): `notification.sent` or `notification.failed`."""
        return str(getattr(self, "type", ""))


class NotificationSent(_NotificationEvent):
    """The platform confirmed a proactive delivery."""

    type: Literal["notification.sent"] = "notification.sent"


class NotificationFailed(_NotificationEvent):
    """A proactive delivery was refused or dead-lettered."""

    type: Literal["notification.failed"] = "notification.failed"


NotificationEvent = Annotated[NotificationSent | NotificationFailed, Field(discriminator="type")]

Envelope = Annotated[
    Inbound | Outbound | EventEnvelope | Receipt | NotificationSent | NotificationFailed,
    Field(discriminator="type"),
]
_ENVELOPE: TypeAdapter[Envelope] = TypeAdapter(Envelope)

_Payload = Inbound | Outbound | EventEnvelope | Receipt | NotificationSent | NotificationFailed


def encode(envelope: _Payload) -> bytes:
    """msgpack bytes of `{v, body}`; bytes fields (images) stay binary."""
    body = envelope.model_dump(mode="python")
    packed = msgpack.packb({"v": ENVELOPE_VERSION, "body": body}, default=_default)
    assert isinstance(packed, bytes)
    return packed


def decode(data: bytes) -> _Payload:
    """The envelope inside `data`; `BusError` if it is not one this version understands."""
    try:
        raw = msgpack.unpackb(data, raw=False, timestamp=3)
    except (ValueError, msgpack.UnpackException) as exc:
        raise BusError(f"undecodable bus payload: {exc}") from exc
    if not isinstance(raw, dict) or raw.get("v") != ENVELOPE_VERSION:
        version = raw.get("v") if isinstance(raw, dict) else None
        raise BusError(f"unsupported bus envelope version {version!r}")
    try:
        return _ENVELOPE.validate_python(raw["body"])
    except (KeyError, ValidationError) as exc:
        raise BusError(f"malformed bus envelope: {exc}") from exc


def _default(value: object) -> object:
    if isinstance(value, datetime):
        return msgpack.Timestamp.from_datetime(value)
    raise TypeError(f"cannot encode {type(value).__name__} on the bus")
