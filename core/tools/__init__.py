"""Tools the model may call: the `Tool` type, its registry and the built-in tools."""

from core.tools.base import (
    Clock,
    SafetyTier,
    Tool,
    ToolContext,
    ToolRegistry,
    describe_validation_error,
    utc_now,
)
from core.tools.builtin import builtin_tools
from core.tools.calculator import calculator_tool
from core.tools.clock import current_time_tool
from core.tools.skills import read_skill_tool

__all__ = [
    "Clock",
    "SafetyTier",
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "builtin_tools",
    "calculator_tool",
    "current_time_tool",
    "describe_validation_error",
    "read_skill_tool",
    "utc_now",
]
