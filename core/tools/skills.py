"""The `read_skill` tool: the instructions of one of the profile's skills, by name.

The system prompt lists each skill's name and description only; the model reads a skill's
body with this tool when a request calls for it, so long instructions cost nothing until used.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, Field

from core.errors import ToolError
from core.skills import READ_SKILL, Skill
from core.tools.base import SafetyTier, Tool, ToolContext

__all__ = ["ReadSkillArgs", "read_skill_tool"]


class ReadSkillArgs(BaseModel):
    """Arguments of the `read_skill` tool."""

    name: str = Field(
        min_length=1,
        max_length=100,
        description="The skill's name, as listed under 'Skills' in the system prompt.",
    )


def read_skill_tool(skills: Iterable[Skill]) -> Tool[ReadSkillArgs]:
    """A `read_skill` tool over these skills (with none, every call says there are none)."""
    by_name = {skill.name: skill for skill in skills}

    async def run(args: ReadSkillArgs, context: ToolContext) -> str:
        name = args.name.strip()
        skill = by_name.get(name) or _by_casefold(by_name, name)
        if skill is None:
            known = ", ".join(sorted(by_name)) or "none (this bot has no skills)"
            raise ToolError(f"Unknown skill {name!r}. Available skills: {known}.")
        return skill.body

    return Tool(
        name=READ_SKILL,
        description=(
            "Read the full instructions of one of the skills listed in the system prompt, "
            "by its name."
        ),
        args=ReadSkillArgs,
        tier=SafetyTier.READ_ONLY,
        run=run,
    )


def _by_casefold(by_name: dict[str, Skill], name: str) -> Skill | None:
    """A forgiving second look: 'Summarize' finds 'summarize' when only one skill matches."""
    matches = [s for key, s in by_name.items() if key.casefold() == name.casefold()]
    return matches[0] if len(matches) == 1 else None
