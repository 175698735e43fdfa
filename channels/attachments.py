"""Images and documents that came with a message, and notes for the model about those that
could not be read.

A photo whose download fails, or one too large to send, must not turn a message into silence:
the turn still runs, and the model is told an image was there so it can say so. Documents
become text (`core/documents.py`) fenced as untrusted; a file that is not read (another kind,
too large, damaged, encrypted) becomes a note asking the model to tell the person why.
Voice notes and audio files are transcribed (`core/voice.py`) and given to the model as the
person's words, marked "(voice note)"; one that is not (transcription not set up, too long,
the endpoint failed) becomes such a note too.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from core.documents import (
    READABLE,
    DocumentRefused,
    DocumentSettings,
    document_kind,
    read_document,
)
from core.envelopes import Transcription
from core.messages import ImagePart
from core.redact import Redactor
from core.safety import fence_untrusted
from core.voice import Transcriber, TranscriptionFailed, VoiceSettings

__all__ = [
    "VOICE_NOTE",
    "DocumentReader",
    "Download",
    "ReceivedDocuments",
    "ReceivedImages",
    "VoiceNotes",
]

log = logging.getLogger(__name__)


@dataclass
class ReceivedImages:
    """The images of one incoming message: those read, and how many could not be."""

    images: list[ImagePart] = field(default_factory=list)
    unreadable: int = 0

    def add(self, image: ImagePart | None) -> None:
        """An image that was read, or None for one that could not be."""
        if image is None:
            self.unreadable += 1
        else:
            self.images.append(image)

    def text_with_note(self, text: str) -> str:
        """`text`, with a note for the model when an image could not be read."""
        if not self.unreadable:
            return text
        count = "An image" if self.unreadable == 1 else f"{self.unreadable} images"
        note = (
            f"[{count} came with this message but could not be read (too large, or the "
            "download failed); tell the person if it matters.]"
        )
        return f"{text}\n\n{note}" if text.strip() else note


# Suffixes and media types of sound: voice notes and audio files, transcribed (`VoiceNotes`).
_AUDIO_SUFFIXES = (".mp3", ".m4a", ".ogg", ".oga", ".opus", ".wav", ".flac", ".aac", ".weba")
# What a transcript starts with, so the model knows the person spoke rather than typed.
VOICE_NOTE = "(voice note) "
# A transcript longer than this is cut (a server that answers with a book is not believed).
_MAX_TRANSCRIPT_CHARS = 20_000
# What a file name may bring into the note above the fence (it is outside it): no brackets
# or fence marks, one line, short.
_NAME_UNSAFE = re.compile(r"[\[\]<>`\x00-\x1f\x7f]+")
_NAME_LENGTH = 80

# Gets a file's bytes; None when the download failed (the adapter logs why).
Download = Callable[[], Awaitable[bytes | None]]


def _safe_name(name: str) -> str:
    cleaned = " ".join(_NAME_UNSAFE.sub(" ", name).split()) or "file"
    return cleaned if len(cleaned) <= _NAME_LENGTH else cleaned[: _NAME_LENGTH - 1] + "…"


def _is_audio(name: str, media_type: str) -> bool:
    return media_type.startswith("audio/") or name.lower().endswith(_AUDIO_SUFFIXES)


class VoiceNotes:
    """Turns a voice note or audio file into the person's words for the model, or into a note
    asking the model to tell the person, in one sentence, why it was not heard."""

    def __init__(
        self, settings: VoiceSettings | None = None, transcriber: Transcriber | None = None
    ) -> None:
        """No `transcriber` (or `[voice] enabled = false`): voice notes are not set up."""
        self.settings = settings or VoiceSettings()
        self.transcriber = transcriber if self.settings.enabled else None

    async def read(
        self,
        name: str,
        media_type: str,
        size: int | None,
        download: Download,
        *,
        duration: float | None = None,
        platform_limit: int | None = None,
    ) -> str:
        """The transcript of one recording of `size` bytes and `duration` seconds (None: not
        announced), marked as a voice note; or the note saying why there is none."""
        text, _ = await self.listen(
            name, media_type, size, download, duration=duration, platform_limit=platform_limit
        )
        return text

    async def listen(
        self,
        name: str,
        media_type: str,
        size: int | None,
        download: Download,
        *,
        duration: float | None = None,
        platform_limit: int | None = None,
    ) -> tuple[str, Transcription | None]:
        """As `read`, with what the transcription is charged (None: the endpoint was not
        asked, or failed)."""
        name = _safe_name(name)
        limits = self.settings
        limit = min(limits.max_bytes, platform_limit or limits.max_bytes)
        if self.transcriber is None:
            return _unheard(
                "Voice notes are not set up for this bot, so I cannot listen to them; "
                "please type your message."
            ), None
        if duration is not None and duration > limits.max_seconds:
            return _unheard(
                f"{name} is too long for me to listen to (the limit is "
                f"{_minutes(limits.max_seconds)})."
            ), None
        data = await _fetch(name, size, limit, download, "listen to")
        if isinstance(data, str):
            return _unheard(data), None
        try:
            words = await self.transcriber.transcribe(name, media_type, data)
        except TranscriptionFailed as exc:
            log.warning("could not transcribe a voice note: %s", exc)
            return _unheard(
                f"I could not transcribe {name} just now; please try again or type your message."
            ), None
        heard = limits.transcribed(duration)  # the endpoint answered: it is charged
        words = " ".join(words.split())
        if not words:
            return _unheard(f"I could not make out any words in {name}."), heard
        if len(words) > _MAX_TRANSCRIPT_CHARS:
            words = words[: _MAX_TRANSCRIPT_CHARS - 1] + "…"
        return VOICE_NOTE + words, heard


def _minutes(seconds: int) -> str:
    if seconds % 60:
        return f"{seconds} seconds"
    return "1 minute" if seconds == 60 else f"{seconds // 60} minutes"


def _unheard(sentence: str) -> str:
    return (
        "[A voice note or audio file came with this message but was not transcribed. Tell the "
        f'person, in one sentence: "{sentence}"]'
    )


class DocumentReader:
    """Turns the files of a message into what the model reads: each document's text, scrubbed
    of secrets and fenced as untrusted, each recording's transcript (`VoiceNotes`), or a note
    asking the model to tell the person, in one sentence, why a file was not read. Shared by
    the adapters; built in `bots/`."""

    def __init__(
        self,
        settings: DocumentSettings | None = None,
        redactor: Redactor | None = None,
        voice: VoiceNotes | None = None,
    ) -> None:
        """`redactor` scrubs the text (by default: credentials by their shape only); `voice`
        transcribes recordings (by default: none, the person is told voice notes are not set
        up)."""
        self.settings = settings or DocumentSettings()
        self._redact = redactor or Redactor()
        self.voice = voice or VoiceNotes()

    @property
    def max_download_bytes(self) -> int:
        """The most an adapter needs to download of one file, a document or a recording."""
        return max(self.settings.max_bytes, self.voice.settings.max_bytes)

    def received(self) -> ReceivedDocuments:
        """A fresh collection for the files of one message."""
        return ReceivedDocuments(self)

    async def read(
        self,
        name: str,
        media_type: str,
        size: int | None,
        download: Download,
        *,
        platform_limit: int | None = None,
        duration: float | None = None,
    ) -> str:
        """The block for the model of one file of `size` bytes (None: not announced), read
        when it is within the profile's limit and `platform_limit` (what the platform lets a
        bot download); a recording (of `duration` seconds, if known) is transcribed."""
        if _is_audio(name, media_type):
            return await self.voice.read(
                name,
                media_type,
                size,
                download,
                duration=duration,
                platform_limit=platform_limit,
            )
        name = _safe_name(name)
        limit = min(self.settings.max_bytes, platform_limit or self.settings.max_bytes)
        if document_kind(name, media_type) is None:
            return _refused(f"I cannot read {name}: I read {READABLE}.")
        data = await _fetch(name, size, limit, download, "read")
        if isinstance(data, str):
            return _refused(data)
        try:
            read = await asyncio.to_thread(
                read_document, name, media_type, data, max_chars=self.settings.max_chars
            )
        except DocumentRefused as refused:
            return _refused(str(refused))
        block = fence_untrusted(
            self._redact(read.text), source=f"The file {name}, which the person sent"
        )
        if read.left_out:
            block += (
                f"\n[Only the first {self.settings.max_chars:,} characters of {name} are "
                f"included: {read.left_out}.]"
            )
        return block


async def _fetch(
    name: str, size: int | None, limit: int, download: Download, verb: str
) -> bytes | str:
    """The file's bytes when it is within `limit` (checked on the size announced, if any,
    before downloading, and on what came); else the sentence saying why not."""
    if size is not None and size > limit:
        return _too_large(name, limit, verb)
    data = await download()
    if data is None:
        return f"I could not download {name}; please try sending it again."
    if len(data) > limit:
        return _too_large(name, limit, verb)
    return data


def _too_large(name: str, limit: int, verb: str) -> str:
    size = f"{limit / 2**20:.3g} MB" if limit >= 2**20 else f"{limit / 1024:.3g} KB"
    return f"{name} is too large for me to {verb} (the limit is {size})."


def _refused(sentence: str) -> str:
    return (
        "[A file came with this message but was not read. Tell the person, in one sentence: "
        f'"{sentence}"]'
    )


@dataclass
class ReceivedDocuments:
    """The files of one incoming message, as the model reads them (`Inbound.documents`)."""

    reader: DocumentReader
    documents: list[str] = field(default_factory=list)
    # The recordings transcribed (`Inbound.transcriptions`), to be charged.
    transcriptions: list[Transcription] = field(default_factory=list)

    async def add(
        self,
        name: str,
        media_type: str,
        size: int | None,
        download: Download,
        *,
        platform_limit: int | None = None,
        duration: float | None = None,
    ) -> None:
        """Read one file (downloaded only when it is a document or a recording within the
        limits); `duration` is a recording's length in seconds, where the platform says."""
        most = self.reader.settings.max_per_message
        if len(self.documents) >= most:
            self.documents.append(
                _refused(f"I read at most {most} files of a message; {_safe_name(name)} was not.")
            )
            return
        if _is_audio(name, media_type):
            text, heard = await self.reader.voice.listen(
                name,
                media_type,
                size,
                download,
                duration=duration,
                platform_limit=platform_limit,
            )
            self.documents.append(text)
            self.transcriptions.extend([heard] if heard is not None else [])
            return
        self.documents.append(
            await self.reader.read(
                name,
                media_type,
                size,
                download,
                platform_limit=platform_limit,
                duration=duration,
            )
        )
