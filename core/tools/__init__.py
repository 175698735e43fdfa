"""Tools the model may call: the `Tool` type, its registry and the built-in tools."""

from core.tools.base import (
    Clock,
    SafetyTier,
    Tool,
    ToolContext,
    ToolRegistry,
    ToolResult,
    describe_validation_error,
    utc_now,
)
from core.tools.browser import BROWSER, BrowserSettings, Browsing, browser_tool
from core.tools.builtin import builtin_tools
from core.tools.calculator import calculator_tool
from core.tools.clock import current_time_tool
from core.tools.generate_image import GENERATE_IMAGE, generate_image_tool
from core.tools.outgoing import FileDrop
from core.tools.send_file import SEND_FILE, send_file_tool
from core.tools.skills import read_skill_tool
from core.tools.web_fetch import WEB_FETCH, WebFetchSettings, web_fetch_tool
from core.tools.web_search import WEB_SEARCH, WebSearchSettings, web_search_tool
from core.tools.workspace import WorkspaceSettings, files_tool, shell_tool, workspace_tools

__all__ = [
    "BROWSER",
    "GENERATE_IMAGE",
    "SEND_FILE",
    "WEB_FETCH",
    "WEB_SEARCH",
    "BrowserSettings",
    "Browsing",
    "Clock",
    "FileDrop",
    "SafetyTier",
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "ToolResult",
    "WebFetchSettings",
    "WebSearchSettings",
    "WorkspaceSettings",
    "browser_tool",
    "builtin_tools",
    "calculator_tool",
    "current_time_tool",
    "describe_validation_error",
    "files_tool",
    "generate_image_tool",
    "read_skill_tool",
    "send_file_tool",
    "shell_tool",
    "utc_now",
    "web_fetch_tool",
    "web_search_tool",
    "workspace_tools",
]
