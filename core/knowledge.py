"""The profile's knowledge folder: reference texts the system prompt carries on every turn.

`knowledge/` in the profile folder (or the `knowledge_dir` setting) holds text and Markdown
files; each goes into the prompt's `## Knowledge` section under its name, in name order, within
`knowledge_max_chars` characters. What does not fit is cut with a note naming the files left
out, so the model knows it does not see everything. Core only lays the texts out; reading the
files happens in `bots/`.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

__all__ = ["KNOWLEDGE_SUFFIXES", "KnowledgeFile", "knowledge_text"]

# The files of the folder that are read; others (images, PDFs) are left alone.
KNOWLEDGE_SUFFIXES = (".md", ".markdown", ".txt")

_INTRO = "Reference material from this bot's knowledge folder, one file per heading."


class KnowledgeFile(BaseModel):
    """One file of the knowledge folder: its name within the folder and its text."""

    model_config = ConfigDict(frozen=True)

    name: str
    text: str


def knowledge_text(files: Sequence[KnowledgeFile], max_chars: int) -> str:
    """The body of the `## Knowledge` section: each file under a `### <name>` heading, in name
    order, the texts cut where they pass `max_chars` (headings not counted) with a note naming
    what was left out. Empty when there are no files or the budget is 0."""
    ordered = sorted((f for f in files if f.text.strip()), key=lambda f: f.name)
    if not ordered or max_chars <= 0:
        return ""
    parts = [_INTRO]
    left = max_chars
    for index, file in enumerate(ordered):
        text = file.text.strip()
        if len(text) <= left:
            parts.append(f"### {file.name}\n{text}")
            left -= len(text)
            continue
        kept = text[:left].rstrip()
        if kept:
            parts.append(f"### {file.name}\n{kept}")
        omitted = [f.name for f in ordered[index + 1 :]]
        parts.append(_cut_note(file.name, omitted, max_chars, partly=bool(kept)))
        break
    return "\n\n".join(parts)


def _cut_note(name: str, omitted: list[str], max_chars: int, *, partly: bool) -> str:
    where = f"{name} is cut here" if partly else f"{name} is left out"
    rest = f"; also left out: {', '.join(omitted)}" if omitted else ""
    return (
        f"[The knowledge folder is longer than its budget of {max_chars} characters: "
        f"{where}{rest}.]"
    )
