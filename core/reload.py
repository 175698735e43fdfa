"""`ProfileReloader`: a running process takes its profile's changed files without a restart.

What a reload applies, from the next turn on: the prompt files (`SOUL.md`, `SYSTEM.md`,
`MEMORY.md`, `USER.md`), the skills, the knowledge folder and its budget. A turn in flight
keeps the prompt it was built with. Other `profile.toml` keys are read, compared and named
in the result as needing a restart (ports, providers, access rules and limits are wired into
parts built at start). A profile that no longer loads is refused as a whole: the process keeps
the one it has and logs one line saying why (decision 0025).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from pydantic import BaseModel, ConfigDict, Field

from core.commands import ChatCommand, CommandContext, CommandInfo
from core.profile import Profile, ProfileSettings
from core.redact import Redactor
from core.runtime import AgentRuntime
from core.skills import READ_SKILL
from core.tools.skills import read_skill_tool

__all__ = ["LIVE_SETTINGS", "ProfileReloader", "ReloadResult", "reload_command"]

log = logging.getLogger(__name__)

# The keys of profile.toml a reload applies; any other changed key waits for a restart.
LIVE_SETTINGS = frozenset({"knowledge_dir", "knowledge_max_chars"})

# The profile's texts a reload applies, by the name an operator knows them by.
_TEXTS: tuple[tuple[str, Callable[[Profile], object]], ...] = (
    ("SOUL.md", lambda p: p.identity),
    ("SYSTEM.md", lambda p: p.system),
    ("MEMORY.md", lambda p: p.memory),
    ("USER.md", lambda p: p.user),
    ("skills", lambda p: p.skills),
    ("knowledge", lambda p: (p.knowledge, p.settings.knowledge_max_chars)),
)


class ReloadResult(BaseModel):
    """What one reload did: `ok` false (and `error`) when the profile was refused."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    # What the next turn uses anew ("SOUL.md", "skills", "knowledge", ...).
    applied: list[str] = Field(default_factory=list)
    # profile.toml keys that differ from the running process's and need a restart.
    restart_needed: list[str] = Field(default_factory=list)
    error: str = ""


class ProfileReloader:
    """Reads the profile again with `read` (a blocking file read, run in a thread) and puts
    what changed into `runtime`; one reload at a time."""

    def __init__(
        self,
        profile: Profile,
        read: Callable[[], Profile],
        runtime: AgentRuntime,
        redactor: Redactor | None = None,
    ) -> None:
        """`profile`: the one the process started with."""
        self.profile = profile
        self._started = profile.settings
        self._read = read
        self._runtime = runtime
        self._redactor = redactor
        self._lock = asyncio.Lock()

    async def reload(self) -> ReloadResult:
        """Read the profile again and apply what changed; never raises for a bad profile."""
        async with self._lock:
            try:
                fresh = await asyncio.to_thread(self._read)
            except Exception as exc:  # a bad file of any kind must not stop the process
                error = str(exc) or type(exc).__name__
                log.warning("profile reload refused, keeping the running profile: %s", error)
                return ReloadResult(ok=False, error=error)
            applied = [name for name, part in _TEXTS if part(fresh) != part(self.profile)]
            self._runtime.prompt = fresh.system_prompt(self._redactor)
            if "skills" in applied and READ_SKILL in self._runtime.tools:
                self._runtime.tools.remove(READ_SKILL)
                self._runtime.tools.add(read_skill_tool(fresh.skills))
            self.profile = fresh
            restart = _restart_needed(self._started, fresh.settings)
            log.info(
                "profile %s reloaded: %s%s",
                fresh.name,
                ", ".join(applied) or "nothing changed",
                f"; changed but applied only by a restart: {', '.join(restart)}" if restart else "",
            )
            return ReloadResult(ok=True, applied=applied, restart_needed=restart)


def _restart_needed(started: ProfileSettings, fresh: ProfileSettings) -> list[str]:
    """The top-level keys, other than the live ones, whose values differ."""
    return sorted(
        key
        for key in ProfileSettings.model_fields
        if key not in LIVE_SETTINGS and getattr(started, key) != getattr(fresh, key)
    )


def reload_command(reload: Callable[[], Awaitable[ReloadResult]] | None) -> ChatCommand:
    """`/reload` (admins only): this process reads its profile again and says what it did.
    Without `reload` (a gateway lists the command but never runs it) it says it cannot."""

    async def handle(_context: CommandContext) -> str:
        if reload is None:
            return "This process cannot reload its profile; use `switchboard reload`."
        return describe(await reload())

    info = CommandInfo(
        name="reload", description="Read the bot's profile files again", admin_only=True
    )
    return ChatCommand(info, handle)


def describe(result: ReloadResult) -> str:
    """What a reload did, in a sentence or two for a chat or a terminal."""
    if not result.ok:
        return f"The profile was not reloaded; the running one stays. {result.error}"
    text = (
        f"Profile reloaded: {', '.join(result.applied)} (from the next turn on)."
        if result.applied
        else "Profile reloaded: nothing changed."
    )
    if result.restart_needed:
        text += f" Changed but applied only by a restart: {', '.join(result.restart_needed)}."
    return text
