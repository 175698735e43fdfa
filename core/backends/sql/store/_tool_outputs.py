"""The `ToolOutputs` of `SqlStore`: a row per cut tool result, its whole text."""

from __future__ import annotations

from sqlalchemy import select

from core.backends.sql.store._base import SqlBase
from core.backends.sql.store._dialect import insert_ignoring
from core.backends.sql.store._tables import tool_outputs
from core.store._shared import utc_text

__all__ = ["SqlToolOutputs"]


class SqlToolOutputs(SqlBase):
    """The `ToolOutputs` of `SqlStore`."""

    async def keep_tool_output(self, session_id: str, call_id: str, text: str) -> None:
        """Keep the whole output of call `call_id`; kept once."""
        values = {
            "session_id": session_id,
            "call_id": call_id,
            "text": text,
            "created_at": utc_text(self._now()),
        }
        async with self._begin(f"keep the output of tool call {call_id!r}") as db:
            await db.execute(insert_ignoring(self._dialect, tool_outputs), values)

    async def tool_output(self, session_id: str, call_id: str) -> str | None:
        """The kept output of call `call_id` in `session_id`, or None."""
        query = select(tool_outputs.c.text).where(
            tool_outputs.c.session_id == session_id, tool_outputs.c.call_id == call_id
        )
        async with self._read(f"read the output of tool call {call_id!r}") as db:
            found = (await db.execute(query)).first()
        return None if found is None else str(found[0])
