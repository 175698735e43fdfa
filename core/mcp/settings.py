"""Settings of the MCP servers a profile declares under `[mcp.<name>]` in `profile.toml`."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from core.tools.base import SafetyTier

__all__ = ["McpServerName", "McpServerSettings", "McpSettings", "McpToolSettings"]

# Server names become the prefix of tool names (`<server>__<tool>`), which providers limit
# to `^[a-zA-Z0-9_-]{1,64}$`; a short name leaves room for the tool's own.
McpServerName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,32}$")]


class McpToolSettings(BaseModel):
    """Per-tool overrides: `[mcp.<server>.tools.<tool>]`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tier: SafetyTier | None = None


class McpServerSettings(BaseModel):
    """One MCP server: started with `command` (stdio) or reached at `url` (streamable HTTP).

    Tools default to the `privileged` tier: a server's tools can do anything its process can,
    so every call is confirmed until the operator says otherwise (`tier = "read_only"`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    # stdio: the program and its arguments, e.g. ["npx", "-y", "@modelcontextprotocol/..."].
    command: list[str] | None = Field(default=None, min_length=1)
    # Extra environment for the stdio server; it does not inherit the bot's environment
    # (the SDK passes only HOME, PATH, USER and the like), so no bot secret reaches it.
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    # Streamable HTTP: the endpoint and headers sent with every request (e.g. Authorization).
    url: str | None = Field(default=None, pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    tier: SafetyTier = SafetyTier.PRIVILEGED
    tools: dict[str, McpToolSettings] = Field(default_factory=dict)
    # The server's tool names (as the server spells them) to offer; empty: all of them.
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    # The capability modes that offer this server's tools; enforced at dispatch too.
    modes: list[str] = Field(default_factory=lambda: ["full"])
    # Seconds one tool call may take before the model is told the server is too slow; keep
    # it under the profile's `tool_timeout` (30 s), which cuts every tool call short.
    timeout: float = Field(default=20.0, gt=0)
    # Seconds to start the server, shake hands and list its tools.
    startup_timeout: float = Field(default=30.0, gt=0)

    @model_validator(mode="after")
    def _one_transport(self) -> Self:
        if (self.command is None) == (self.url is None):
            raise ValueError("set exactly one of `command` (stdio) or `url` (streamable HTTP)")
        if self.command is None and (self.env or self.cwd):
            raise ValueError("`env` and `cwd` apply to a `command` server only")
        if self.url is None and self.headers:
            raise ValueError("`headers` apply to a `url` server only")
        return self

    def tier_for(self, tool: str) -> SafetyTier:
        """The tier of the server's tool `tool`: its override, else the server's."""
        override = self.tools.get(tool)
        return override.tier if override is not None and override.tier is not None else self.tier

    def offers(self, tool: str) -> bool:
        """Whether the server's tool `tool` passes `include` and `exclude`."""
        if self.include and tool not in self.include:
            return False
        return tool not in self.exclude


# The whole `[mcp]` table: server name to its settings.
McpSettings = dict[McpServerName, McpServerSettings]
