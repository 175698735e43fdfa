"""`Skill`: instructions for one kind of task, indexed in the system prompt, read on demand.

A `SKILL.md` starts with a small front matter block naming the skill::

    ---
    name: summarize
    description: How to summarize a long text well.
    ---
    The instructions the model reads with the `read_skill` tool.

Only one-line `key: value` pairs are read (no YAML library): `name` and `description` are
required, other keys (such as `license`) are accepted and ignored. Core only parses text;
reading the files happens in `bots/`.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from core.errors import ConfigError

__all__ = ["MAX_DESCRIPTION_CHARS", "READ_SKILL", "Skill"]

# The name of the tool that reads a skill's instructions (core/tools/skills.py).
READ_SKILL = "read_skill"

# A name the model can type back: letters, digits, '-', '_' and '.', like a folder name.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
_KEY = re.compile(r"([A-Za-z][A-Za-z0-9_\-]*)\s*:(.*)")
_FENCE = "---"
# The description goes into every system prompt; keep it an index line, not the instructions.
MAX_DESCRIPTION_CHARS = 1024


class Skill(BaseModel):
    """One skill: its name and one-line description (in the prompt), and its instructions."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    body: str

    @classmethod
    def parse(cls, text: str, *, source: str) -> Skill:
        """Parse a `SKILL.md`; `ConfigError` naming `source` (and the key) when it is invalid."""
        lines = text.removeprefix("\ufeff").replace("\r\n", "\n").split("\n")
        if not lines or lines[0].strip() != _FENCE:
            raise ConfigError(
                f"{source}: no front matter: the file must start with a '---' line, then "
                "'name: ...' and 'description: ...', then a closing '---' line"
            )
        try:
            end = next(i for i, line in enumerate(lines[1:], 1) if line.strip() == _FENCE)
        except StopIteration:
            raise ConfigError(f"{source}: the front matter has no closing '---' line") from None
        fields = _front_matter(lines[1:end], source)
        for key in ("name", "description"):
            if not fields.get(key):
                raise ConfigError(f"{source}: {key}: missing from the front matter")
        name, description = fields["name"], fields["description"]
        if not _NAME.fullmatch(name):
            raise ConfigError(
                f"{source}: name: {name!r} is not a skill name (letters, digits, '-', '_', "
                "'.'; at most 64 characters)"
            )
        if len(description) > MAX_DESCRIPTION_CHARS:
            raise ConfigError(
                f"{source}: description: longer than {MAX_DESCRIPTION_CHARS} characters; "
                "put the details in the body"
            )
        body = "\n".join(lines[end + 1 :]).strip()
        if not body:
            raise ConfigError(f"{source}: no instructions after the front matter")
        return cls(name=name, description=description, body=body)


def _front_matter(lines: list[str], source: str) -> dict[str, str]:
    """The top-level one-line `key: value` pairs; nested values of other keys are skipped."""
    fields: dict[str, str] = {}
    key = ""
    for number, line in enumerate(lines, 2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0] in " \t":
            # A continuation or nested value: fine for keys we ignore, not for ours.
            if key in ("name", "description"):
                raise ConfigError(f"{source}: {key}: must be on one line")
            continue
        match = _KEY.fullmatch(line.rstrip())
        if match is None:
            raise ConfigError(f"{source}: line {number}: expected 'key: value', got {line!r}")
        key, value = match.group(1), _unquote(match.group(2).strip())
        if key in fields:
            raise ConfigError(f"{source}: {key}: given twice")
        fields[key] = value
    return fields


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1].strip()
    return value
