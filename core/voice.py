"""Voice notes and audio files people send, as text: the `[voice]` settings of a profile and
the client of an OpenAI-compatible `/v1/audio/transcriptions` endpoint.

Platform-neutral: bytes, a file name and a media type in; the transcript out, or a
`TranscriptionFailed` whose message is fit for a log line (never a key). The channels download
the recordings, check the limits and tell the model (`channels/attachments.py`); `bots/`
decides which endpoint, with which key, from the environment and this table.

Each transcription is charged: the gateway notes it on the message (`Transcription`, priced at
`[voice] price_per_minute` from the length the platform announced, unknown without one) and
the worker writes it to the ledger when the message's turn opens (`transcription_costs`),
under the turn's session, person and chat, with provider `voice`.
"""

from __future__ import annotations

import logging
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Protocol

from pydantic import Field, SecretStr

from core.endpoints import EndpointSettings, endpoint_failure
from core.envelopes import Inbound, Transcription
from core.errors import SwitchboardError
from core.messages import Usage
from core.store.ledger import CostEntry

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = [
    "OPENAI_TRANSCRIPTION_URL",
    "OpenAITranscriber",
    "Transcriber",
    "TranscriptionFailed",
    "VoiceSettings",
    "transcription_costs",
    "upload_name",
]

log = logging.getLogger(__name__)

OPENAI_TRANSCRIPTION_URL = "https://api.openai.com/v1"
# The suffix the endpoint reads the format from, for a recording whose name has none it knows
# (OpenAI's accepts flac, m4a, mp3, mp4, mpeg, mpga, oga, ogg, wav and webm).
_SUFFIX_BY_TYPE = {
    "audio/ogg": ".ogg",
    "audio/opus": ".ogg",
    "audio/mpeg": ".mp3",
    "audio/mp3": ".mp3",
    "audio/mp4": ".m4a",
    "audio/x-m4a": ".m4a",
    "audio/aac": ".m4a",
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/wave": ".wav",
    "audio/flac": ".flac",
    "audio/x-flac": ".flac",
    "audio/webm": ".webm",
}
_KNOWN_SUFFIXES = frozenset(
    {".flac", ".m4a", ".mp3", ".mp4", ".mpeg", ".mpga", ".oga", ".ogg", ".wav", ".webm"}
)


class VoiceSettings(EndpointSettings):
    """`[voice]` of a profile: which endpoint transcribes voice notes, and the limits.

    Without `base_url` the OpenAI key and base URL the bot already has are used
    (`OPENAI_API_KEY`, `OPENAI_BASE_URL`). `enabled = false`: voice notes are answered with the
    sentence saying they are not set up.
    """

    # The transcription model the endpoint knows.
    model: str = Field(default="whisper-1", min_length=1)
    # Recordings larger than this are not downloaded (OpenAI takes 25 MB at most).
    max_bytes: int = Field(default=20 * 1024 * 1024, ge=1024, le=100 * 1024 * 1024)
    # Recordings longer than this (where the platform says how long) are not transcribed.
    max_seconds: int = Field(default=300, ge=1, le=4 * 3600)
    # How long one request to the endpoint may take (a failed one is tried once more).
    timeout_seconds: float = Field(default=60.0, gt=0, le=600)
    # USD per minute of recording, written to the cost ledger (OpenAI's list price of
    # whisper-1); 0 for a local server. A recording whose length is not known is unpriced.
    price_per_minute: float = Field(default=0.006, ge=0)

    def transcribed(self, seconds: float | None) -> Transcription:
        """What one transcription of a recording `seconds` long (None: unknown) is charged."""
        cost = None if seconds is None else seconds / 60 * self.price_per_minute
        return Transcription(model=self.model, seconds=seconds, cost_usd=cost)


class TranscriptionFailed(SwitchboardError):
    """The endpoint did not transcribe a recording; the message says why, for a log line."""


class Transcriber(Protocol):
    """Turns a recording into its words."""

    async def transcribe(self, name: str, media_type: str, data: bytes) -> str:
        """The words spoken in the recording `name` (of `media_type`); raises
        `TranscriptionFailed` when the endpoint fails or takes too long."""
        ...


def upload_name(name: str, media_type: str) -> str:
    """`name` with a suffix the endpoint reads the format from (Telegram's voice notes come
    without a name, as `.oga`, which some servers refuse)."""
    path = PurePosixPath(PurePosixPath(name).name or "voice-note")
    suffix = path.suffix.lower()
    wanted = _SUFFIX_BY_TYPE.get(media_type.split(";")[0].strip().lower())
    if suffix in (".oga", ".opus"):
        return path.with_suffix(".ogg").name
    if suffix in _KNOWN_SUFFIXES or wanted is None:
        return path.name
    return path.name + wanted


class OpenAITranscriber:
    """`POST {base_url}/audio/transcriptions` through the official `openai` SDK."""

    def __init__(
        self,
        *,
        api_key: SecretStr | None,
        base_url: str,
        model: str,
        timeout: float,
        max_retries: int = 1,
    ) -> None:
        """No `api_key`: a local server that takes none (the SDK still sends a placeholder)."""
        self.base_url = base_url
        self.model = model
        self._api_key = api_key
        self._timeout = timeout
        self._max_retries = max_retries

    def _client(self) -> AsyncOpenAI:
        # Imported here: the SDK is slow to import, and a process that gets no voice note never
        # pays for it. A client per recording: voice notes are few, and nothing is left open.
        from openai import AsyncOpenAI

        key = self._api_key.get_secret_value() if self._api_key else "no-key"
        return AsyncOpenAI(
            api_key=key,
            base_url=self.base_url,
            timeout=self._timeout,
            max_retries=self._max_retries,
        )

    async def transcribe(self, name: str, media_type: str, data: bytes) -> str:
        """The transcript of one recording; `TranscriptionFailed` naming the status or the
        kind of failure (never the key, never the response body)."""
        import openai

        try:
            async with self._client() as client:
                transcription = await client.audio.transcriptions.create(
                    model=self.model, file=(upload_name(name, media_type), data, media_type)
                )
        except openai.APIError as exc:
            raise TranscriptionFailed(endpoint_failure(exc, "transcription")) from None
        return transcription.text


# The ledger's provider name for transcriptions (a model call's entries name the chat provider).
_PROVIDER = "voice"


def transcription_costs(
    inbound: Inbound,
    *,
    session_id: str,
    run_id: str,
    user: str | None,
    chat: str | None,
) -> list[CostEntry]:
    """The ledger entries of `inbound`'s transcriptions, dated when it arrived; their ids come
    from the message's, so a turn opened again (redelivered, resumed) charges them once."""
    return [
        CostEntry(
            session_id=session_id,
            run_id=run_id,
            provider=_PROVIDER,
            model=heard.model,
            usage=Usage(),
            cost_usd=heard.cost_usd,
            at=inbound.received_at,
            user=user,
            chat=chat,
            id=f"voice:{inbound.dedupe_key}:{number}",
        )
        for number, heard in enumerate(inbound.transcriptions)
    ]
