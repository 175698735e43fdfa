"""Documents people send (PDF, DOCX, plain text, Markdown, CSV, JSON) as text for the model.

Pure and provider-neutral: bytes, a file name and a media type in; the text, cut to a budget
with a note of what was left out, or a `DocumentRefused` whose message is the one sentence
the person reads. The channels download the files and fence, scrub and deliver the text
(`channels/attachments.py`).

PDFs are read with pypdf (pure Python, maintained, no system libraries), page by page until
the budget is spent, so a long PDF costs no more than its first pages. DOCX with python-docx
(paragraphs and tables, in the document's order). Text types are decoded as UTF-8 (a BOM
honoured), else as Windows-1252, which every byte decodes in.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from core.errors import SwitchboardError

if TYPE_CHECKING:
    from docx.document import Document as WordDocument

__all__ = [
    "READABLE",
    "DocumentKind",
    "DocumentRefused",
    "DocumentSettings",
    "DocumentText",
    "document_kind",
    "read_document",
]

log = logging.getLogger(__name__)

DocumentKind = Literal["pdf", "docx", "text"]

_BY_SUFFIX: dict[str, DocumentKind] = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".txt": "text",
    ".text": "text",
    ".md": "text",
    ".markdown": "text",
    ".csv": "text",
    ".json": "text",
}
_BY_TYPE: dict[str, DocumentKind] = {
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "text/plain": "text",
    "text/markdown": "text",
    "text/x-markdown": "text",
    "text/csv": "text",
    "application/json": "text",
}
# What the person is told the bot reads, when it cannot read what they sent.
READABLE = "PDF, Word (.docx), plain text, Markdown, CSV and JSON files"


class DocumentSettings(BaseModel):
    """`[documents]` of a profile: how much of a document the model gets."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Characters of one document's text given to the model; the rest is left out, with a
    # note saying what was.
    max_chars: int = Field(default=20_000, ge=500, le=500_000)
    # Files larger than this are not downloaded (Telegram's bots download at most 20 MB).
    max_bytes: int = Field(default=20 * 1024 * 1024, ge=1024, le=100 * 1024 * 1024)
    # Documents read from one message; more are named but not read.
    max_per_message: int = Field(default=5, ge=1, le=20)


class DocumentRefused(SwitchboardError):
    """A document that cannot be read; the message is one sentence for the person."""


@dataclass(frozen=True)
class DocumentText:
    """A document's text, at most the budget, and what was left out (None: nothing)."""

    text: str
    left_out: str | None = None


def document_kind(name: str, media_type: str) -> DocumentKind | None:
    """What kind of readable document `name` (of `media_type`) is; None for other files.

    The file name's suffix decides first: platforms often send `application/octet-stream`.
    """
    kind = _BY_SUFFIX.get(PurePosixPath(name.lower()).suffix)
    if kind is None:
        kind = _BY_TYPE.get(media_type.split(";")[0].strip().lower())
    return kind


def read_document(name: str, media_type: str, data: bytes, *, max_chars: int) -> DocumentText:
    """The text of the document `name`, cut to `max_chars`. CPU work: run it in a thread.

    Raises `DocumentRefused` for a file of another kind, a corrupt or encrypted one, or one
    without text.
    """
    kind = document_kind(name, media_type)
    if kind == "pdf":
        read = _pdf(name, data, max_chars)
    elif kind == "docx":
        read = _docx(name, data, max_chars)
    elif kind == "text":
        read = _cut(_decode(name, data), max_chars)
    else:
        raise DocumentRefused(f"I cannot read {name}: I read {READABLE}.")
    if not read.text.strip():
        raise DocumentRefused(f"{name} has no text I can read (a scan or an empty file?).")
    return read


def _cut(text: str, max_chars: int) -> DocumentText:
    if len(text) <= max_chars:
        return DocumentText(text)
    left = len(text) - max_chars
    return DocumentText(text[:max_chars], f"the last {left:,} characters were left out")


def _decode(name: str, data: bytes) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace")
    if b"\x00" in data[:4096]:
        raise DocumentRefused(f"{name} does not look like a text file.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


def _pdf(name: str, data: bytes, max_chars: int) -> DocumentText:
    from pypdf import PdfReader  # only when a PDF comes: kept off every process's start-up

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise DocumentRefused(f"{name} is protected by a password, so I cannot read it.")
        pages = len(reader.pages)
        parts: list[str] = []
        used = 0
        for number, page in enumerate(reader.pages, start=1):
            text = page.extract_text() or ""
            if used + len(text) > max_chars:
                parts.append(text[: max_chars - used])
                return DocumentText("\n\n".join(parts), _pages_left_out(number, pages))
            parts.append(text)
            used += len(text) + 2
    except DocumentRefused:
        raise
    except Exception as exc:  # pypdf raises many kinds on a damaged file
        log.info("could not read the PDF %s: %s: %s", name, type(exc).__name__, exc)
        raise DocumentRefused(f"{name} is damaged or not a PDF I can read.") from exc
    return DocumentText("\n\n".join(parts))


def _pages_left_out(stopped_in: int, pages: int) -> str:
    note = f"the text stops partway through page {stopped_in} of {pages}"
    if stopped_in == pages:
        return note
    rest = f"page {pages}" if stopped_in + 1 == pages else f"pages {stopped_in + 1} to {pages}"
    return f"{note}; {rest} not included"


def _docx(name: str, data: bytes, max_chars: int) -> DocumentText:
    import docx  # only when a DOCX comes

    try:
        document = docx.Document(io.BytesIO(data))
        text = "\n".join(_docx_blocks(document))
    except Exception as exc:  # python-docx raises many kinds on a damaged file
        log.info("could not read the DOCX %s: %s: %s", name, type(exc).__name__, exc)
        raise DocumentRefused(f"{name} is damaged or not a Word document I can read.") from exc
    return _cut(text, max_chars)


def _docx_blocks(document: WordDocument) -> Iterator[str]:
    """Paragraphs and tables (a row a line, cells split by `|`), in the document's order."""
    from docx.table import Table

    for block in document.iter_inner_content():
        if isinstance(block, Table):
            for row in block.rows:
                yield " | ".join(cell.text.strip() for cell in row.cells)
        else:
            yield block.text
