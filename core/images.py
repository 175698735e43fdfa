"""Images the bot makes: the `[images]` settings of a profile and the client of an
OpenAI-compatible `/v1/images/generations` endpoint.

Platform-neutral: a prompt in; PNG (or whatever the endpoint made) bytes out, or an
`ImageFailed` whose message is fit for the model and a log line (never a key, never the
response body). `bots/` decides which endpoint, with which key, from the environment and this
table, as for `[voice]` (`core/voice.py`).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pydantic import Field, SecretStr

from core.endpoints import EndpointSettings, endpoint_failure
from core.errors import SwitchboardError

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = [
    "OPENAI_IMAGES_URL",
    "GeneratedImage",
    "ImageFailed",
    "ImageGenerator",
    "ImageSettings",
    "OpenAIImages",
]

OPENAI_IMAGES_URL = "https://api.openai.com/v1"
# The media types an answer's image may have, by the first bytes of the file.
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png", ".png"),
    (b"\xff\xd8\xff", "image/jpeg", ".jpg"),
    (b"RIFF", "image/webp", ".webp"),
    (b"GIF8", "image/gif", ".gif"),
)


class ImageSettings(EndpointSettings):
    """`[images]` of a profile: which endpoint `generate_image` asks, and what an image costs.

    Without `base_url` the OpenAI key and base URL the bot already has are used
    (`OPENAI_API_KEY`, `OPENAI_BASE_URL`); with neither, or with `enabled = false`, there is no
    `generate_image`.
    """

    # The image model the endpoint knows.
    model: str = Field(default="gpt-image-1", min_length=1)
    size: str = Field(default="1024x1024", pattern=r"^(auto|\d{2,5}x\d{2,5})$")
    # What one image costs in USD, written to the cost ledger per image (the list price of
    # a medium-quality 1024x1024 gpt-image-1 image); 0 for a local server.
    price_per_image: float = Field(default=0.042, ge=0)
    # How long one request may take (image models are slow; a failed one is tried once more).
    timeout_seconds: float = Field(default=120.0, gt=0, le=600)


class ImageFailed(SwitchboardError):
    """The endpoint made no image; the message says why, in one sentence."""


@dataclass(frozen=True)
class GeneratedImage:
    """An image the endpoint made: its bytes, media type and a file suffix for it."""

    data: bytes
    media_type: str
    suffix: str


class ImageGenerator(Protocol):
    """Turns a prompt into an image."""

    @property
    def model(self) -> str:
        """The image model asked."""
        ...

    async def generate(self, prompt: str) -> GeneratedImage:
        """One image for `prompt`; raises `ImageFailed`."""
        ...


def _typed(data: bytes) -> GeneratedImage:
    for magic, media_type, suffix in _MAGIC:
        if data.startswith(magic):
            return GeneratedImage(data, media_type, suffix)
    raise ImageFailed("the image endpoint answered with something that is not an image")


class OpenAIImages:
    """`POST {base_url}/images/generations` through the official `openai` SDK, the image
    asked for as base64 in the answer."""

    def __init__(
        self,
        *,
        api_key: SecretStr | None,
        base_url: str,
        model: str,
        size: str,
        timeout: float,
        max_retries: int = 1,
    ) -> None:
        """No `api_key`: a local server that takes none (the SDK still sends a placeholder)."""
        self.base_url = base_url
        self._model = model
        self._size = size
        self._api_key = api_key
        self._timeout = timeout
        self._max_retries = max_retries

    @property
    def model(self) -> str:
        return self._model

    def _client(self) -> AsyncOpenAI:
        # Imported here: the SDK is slow to import and most turns make no image.
        from openai import AsyncOpenAI

        key = self._api_key.get_secret_value() if self._api_key else "no-key"
        return AsyncOpenAI(
            api_key=key,
            base_url=self.base_url,
            timeout=self._timeout,
            max_retries=self._max_retries,
        )

    async def generate(self, prompt: str) -> GeneratedImage:
        """One image; `ImageFailed` naming the status or the kind of failure."""
        import openai

        # The gpt-image models always answer in base64 and refuse `response_format`; the
        # others (DALL-E, most compatible servers) answer with a URL unless asked for base64.
        base64_only = self._model.startswith("gpt-image")
        try:
            async with self._client() as client:
                answer = await client.images.generate(
                    model=self._model,
                    prompt=prompt,
                    n=1,
                    size=self._size,
                    response_format=openai.omit if base64_only else "b64_json",
                )
        except openai.APIError as exc:
            raise ImageFailed(endpoint_failure(exc, "image")) from None
        encoded = answer.data[0].b64_json if answer.data else None
        if not encoded:
            raise ImageFailed("the image endpoint answered without an image")
        try:
            return _typed(base64.b64decode(encoded, validate=True))
        except binascii.Error:
            raise ImageFailed("the image endpoint answered with an undecodable image") from None
