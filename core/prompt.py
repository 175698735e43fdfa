"""System prompt assembly.

The prompt is built from the profile's parts in a fixed order:

1. identity: `SYSTEM.md` when the profile has one, else `SOUL.md`, else `DEFAULT_IDENTITY`;
2. `## Capabilities`: the capability mode's rules;
3. `## Formatting`: the platform's hint;
4. `## Memory`: `MEMORY.md`;
5. `## About the user`: `USER.md`;
6. `## Knowledge`: the files of the profile's knowledge folder, within a budget
   (`core/knowledge.py`);
7. `## Skills`: one line per skill (only when the mode offers the `read_skill` tool);
8. `## Scheduled run`: what a schedule's run is and when its answer is delivered (only for
   scheduled runs, `core/scheduling/brief.py`);
9. a footer with the date (UTC) and the session id.

Sections without content are left out. Nothing in it depends on dict order, the locale or the
time of day, so it is byte-identical across the turns of a session on the same day and provider
prompt caches keep hitting.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict

from core.clock import english_date
from core.knowledge import KnowledgeFile, knowledge_text
from core.modes import CapabilityMode
from core.skills import READ_SKILL, Skill

__all__ = ["DEFAULT_IDENTITY", "SystemPrompt"]

DEFAULT_IDENTITY = (
    "You are Switchboard, a helpful assistant that talks with people in chat apps. "
    "Be concise and accurate, and say so when you do not know."
)

# Fixed English names: strftime's %A and %B follow the process locale.


class SystemPrompt(BaseModel):
    """Builds the system prompt of a turn from a profile's texts and the turn's channel."""

    model_config = ConfigDict(frozen=True)

    identity: str = DEFAULT_IDENTITY
    # SYSTEM.md: replaces the identity when set.
    system: str | None = None
    memory: str = ""
    user: str = ""
    skills: tuple[Skill, ...] = ()
    # The knowledge folder's files, and the characters of their texts the prompt carries.
    knowledge: tuple[KnowledgeFile, ...] = ()
    knowledge_max_chars: int = 20_000

    def build(
        self,
        *,
        mode: CapabilityMode,
        platform_hint: str,
        session_id: str,
        now: datetime,
        scheduled: str = "",
    ) -> str:
        """The assembled prompt; only the date (not the time) varies, to keep caches warm.

        `scheduled` is the section of a schedule's run (empty for a person's turn).
        """
        parts = [
            self._identity(),
            _section("Capabilities", mode.prompt_rules),
            _section("Formatting", platform_hint),
            _section("Memory", self.memory),
            _section("About the user", self.user),
            _section("Knowledge", knowledge_text(self.knowledge, self.knowledge_max_chars)),
        ]
        if mode.tools is None or READ_SKILL in mode.tools:
            parts.append(_section("Skills", self._skills_index()))
        parts.append(_section("Scheduled run", scheduled))
        parts.append(f"Today is {_date(now)} (UTC). Session: {session_id}.")
        return "\n\n".join(part for part in parts if part)

    def _identity(self) -> str:
        system = (self.system or "").strip()
        return system or self.identity.strip() or DEFAULT_IDENTITY

    def _skills_index(self) -> str:
        if not self.skills:
            return ""
        lines = [
            "Instructions for particular tasks. When a request matches a skill, read its "
            f"instructions with the {READ_SKILL} tool before you answer.",
            *(f"- {s.name} — {s.description}" for s in sorted(self.skills, key=_by_name)),
        ]
        return "\n".join(lines)


def _by_name(skill: Skill) -> str:
    return skill.name


def _section(title: str, text: str) -> str:
    text = text.strip()
    return f"## {title}\n{text}" if text else ""


def _date(now: datetime) -> str:
    """'Sunday 22 November 2026': the UTC date of the aware datetime `now`."""
    if now.tzinfo is None:
        raise ValueError("the clock returned a naive datetime; clocks must be timezone-aware")
    day = now.astimezone(UTC)
    return english_date(day, pad_day=True)
