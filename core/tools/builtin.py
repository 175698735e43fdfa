"""The tools every bot may offer, built fresh for each registry."""

from __future__ import annotations

from typing import Any

from core.tools.base import Tool
from core.tools.calculator import calculator_tool
from core.tools.clock import current_time_tool

__all__ = ["builtin_tools"]


def builtin_tools() -> list[Tool[Any]]:
    """New instances of the built-in tools: `calculator` and `current_time`."""
    return [calculator_tool(), current_time_tool()]
