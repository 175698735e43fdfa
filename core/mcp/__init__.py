"""MCP servers as tools: settings, the per-process `McpServers` and the `McpTool` type.

`McpServers` lives in `core.mcp.servers` and is imported from there: it loads the MCP SDK,
which a process without MCP servers should not pay for at start.
"""

from core.mcp.settings import McpServerName, McpServerSettings, McpSettings, McpToolSettings

__all__ = [
    "McpServerName",
    "McpServerSettings",
    "McpSettings",
    "McpToolSettings",
]
