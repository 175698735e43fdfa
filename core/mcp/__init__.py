"""MCP servers as tools: settings, the per-process `McpServers` and the `McpTool` type."""

from core.mcp.servers import McpServers
from core.mcp.settings import McpServerName, McpServerSettings, McpSettings, McpToolSettings
from core.mcp.tools import McpTool, render_result, tool_name

__all__ = [
    "McpServerName",
    "McpServerSettings",
    "McpServers",
    "McpSettings",
    "McpTool",
    "McpToolSettings",
    "render_result",
    "tool_name",
]
