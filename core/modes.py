"""Capability modes: which tools a turn may use and which prompt rules it gets.

A mode is enforced at dispatch: the runtime refuses a call to a tool outside the mode even if
the model names it without having seen its schema.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from core.errors import ConfigError
from core.skills import READ_SKILL
from core.tools.base import SafetyTier, Tool, ToolRegistry

__all__ = [
    "BUILTIN_MODES",
    "DISCORD",
    "FULL",
    "NO_TOOLS",
    "SAFE_CHAT",
    "SAFE_CHAT_TOOLS",
    "CapabilityMode",
    "ModeCatalog",
]

# Tools whose effects stay within the asking user's own data: schedules made by a tool always
# deliver to the chat they were asked in; `read_skill` reads the profile's own instructions;
# memory tools read and write only the asking person's facts with this bot; `read_tool_output`
# reads only the cut results of this conversation's own tool calls.
SAFE_CHAT_TOOLS: frozenset[str] = frozenset(
    {
        "current_time",
        "calculator",
        READ_SKILL,
        "read_tool_output",
        "schedule_create",
        "schedule_list",
        "schedule_cancel",
        "schedule_runs",
        "schedule_run_output",
        "remember",
        "recall",
        "forget",
        # Reads public web pages only: refuses private addresses, cannot change anything.
        "web_fetch",
        # Asks the operator's search API; the results are fenced like fetched pages.
        "web_search",
        # Makes an image for the asking chat only, charged to the ledger like a model call.
        "generate_image",
        # Asks the person of the turn a question in their own chat and waits for the answer.
        "ask_user",
    }
)


class CapabilityMode(BaseModel):
    """A named policy: the tools a turn may call and the rules added to its system prompt.

    `tools` is `None` for "every registered tool". `admitted` names tools offered on top of
    `tools` by the operator's choice (an MCP server's `modes` setting names this mode); the
    tier rule still applies to them: only a mode offering every tool runs privileged ones.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    tools: frozenset[str] | None
    prompt_rules: str
    admitted: frozenset[str] = frozenset()
    # Privileged tools need a confirmation from the user before they run.
    confirm_privileged: bool = True
    # Tiers the person of this turn may not use, each with the reason the model reads; set per
    # turn by the access rules (`core/access.py`), never by a profile.
    withheld: dict[SafetyTier, str] = Field(default_factory=dict)

    def allows(self, tool: Tool[Any]) -> bool:
        """Whether a call to `tool` may run under this mode."""
        if tool.tier in self.withheld:
            return False
        if self.tools is None:
            return True
        offered = tool.name in self.tools or tool.name in self.admitted
        return offered and tool.tier is not SafetyTier.PRIVILEGED

    def admitting(self, names: Iterable[str]) -> CapabilityMode:
        """This mode, also offering the tools called `names`."""
        return self.model_copy(update={"admitted": self.admitted | frozenset(names)})

    def withholding(self, tiers: Iterable[SafetyTier], reason: str) -> CapabilityMode:
        """This mode without the tools of `tiers`; `reason` joins its prompt rules and is what
        a refused call of such a tool answers."""
        added = {tier: reason for tier in tiers if tier not in self.withheld}
        if not added:
            return self
        return self.model_copy(
            update={
                "withheld": {**self.withheld, **added},
                "prompt_rules": f"{self.prompt_rules}\n{reason}",
            }
        )

    def refusal(self, tool: Tool[Any]) -> str:
        """What the model reads when it calls `tool` and this mode does not allow it."""
        if tool.tier in self.withheld:
            return f"Tool {tool.name!r} was not run: {self.withheld[tool.tier]}"
        return f"Tool {tool.name!r} is not available in this chat (capability mode {self.name!r})."

    def allowed_tools(self, registry: ToolRegistry) -> list[Tool[Any]]:
        """The registered tools this mode offers, in name order."""
        return sorted((t for t in registry if self.allows(t)), key=lambda t: t.name)

    def within(self, other: CapabilityMode) -> bool:
        """Whether this mode is no wider than `other` (a sub-agent's never is than its
        parent's): `other` offers every tool (confirming privileged ones if this mode does not
        ask), or this mode's named tools are all among `other`'s. So `no-tools` < `safe-chat`
        = `discord` < `full`, and a profile's modes by the tools they name."""
        if other.confirm_privileged and not self.confirm_privileged:
            return False
        if other.tools is None:
            return True
        if self.tools is None:
            return False
        return self.tools | self.admitted <= other.tools | other.admitted

    def narrowed_to(self, parent: CapabilityMode) -> CapabilityMode:
        """This mode if it is within `parent`, else `parent`; either way keeping the tiers
        `parent` withholds from its person (they apply to whatever runs on their behalf)."""
        chosen = self if self.within(parent) else parent
        for tier, reason in parent.withheld.items():
            chosen = chosen.withholding([tier], reason)
        return chosen


FULL = CapabilityMode(
    name="full",
    tools=None,
    prompt_rules=(
        "You are talking to a trusted operator. Every tool is available; tools that change "
        "things outside this conversation ask for confirmation first."
    ),
)

SAFE_CHAT = CapabilityMode(
    name="safe-chat",
    tools=SAFE_CHAT_TOOLS,
    prompt_rules=(
        "You are in a shared chat with people you do not know. Use only the tools offered. "
        "Never claim access to files, a shell, a desktop or other people's data."
    ),
)

DISCORD = CapabilityMode(
    name="discord",
    tools=SAFE_CHAT_TOOLS,
    prompt_rules=(
        "You are a bot in a Discord server. Use only the tools offered. Do not talk about a "
        "desktop, files or a file system; answer in Discord markdown and keep replies short "
        "enough for a chat channel."
    ),
)

NO_TOOLS = CapabilityMode(
    name="no-tools",
    tools=frozenset(),
    prompt_rules="Answer from your own knowledge; no tools are available in this chat.",
)

BUILTIN_MODES: Mapping[str, CapabilityMode] = {
    m.name: m for m in (FULL, SAFE_CHAT, DISCORD, NO_TOOLS)
}


class ModeCatalog:
    """The modes a deployment knows: the built-in four plus any a profile defines.

    `admit` maps a mode name to tool names it offers on top of its own list (the MCP tools
    whose server names that mode); naming an unknown mode is a `ConfigError`.
    """

    def __init__(
        self,
        extra: Iterable[CapabilityMode] = (),
        *,
        admit: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        self._modes = dict(BUILTIN_MODES)
        for mode in extra:
            self._modes[mode.name] = mode
        for name, tools in (admit or {}).items():
            self.admit(name, tools)

    def admit(self, name: str, tools: Iterable[str]) -> None:
        """Let the mode called `name` also offer the tools called `tools` (an MCP server added
        them); `ConfigError` for an unknown mode."""
        self._modes[name] = self.get(name).admitting(tools)

    def get(self, name: str) -> CapabilityMode:
        """The mode called `name`; `ConfigError` naming the known modes otherwise."""
        try:
            return self._modes[name]
        except KeyError:
            known = ", ".join(sorted(self._modes))
            raise ConfigError(f"unknown capability mode {name!r} (known: {known})") from None

    def names(self) -> list[str]:
        """Every mode name, sorted."""
        return sorted(self._modes)
