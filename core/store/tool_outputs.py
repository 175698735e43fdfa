"""Tool results longer than the model is shown, kept whole so it can read on (see
`core/tool_calls.py` and the `read_tool_output` tool)."""

from __future__ import annotations

from typing import Protocol

__all__ = ["ToolOutputs"]


class ToolOutputs(Protocol):
    """The whole output of each tool call that was cut, per session."""

    async def keep_tool_output(self, session_id: str, call_id: str, text: str) -> None:
        """Keep `text`, the whole (scrubbed) output of call `call_id` in `session_id`.

        Keeping the same call's output again changes nothing (a retried write is harmless).
        """
        ...

    async def tool_output(self, session_id: str, call_id: str) -> str | None:
        """The kept output of call `call_id` in `session_id`; None if none was kept."""
        ...
