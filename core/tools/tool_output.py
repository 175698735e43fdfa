"""The `read_tool_output` tool: the rest of a tool result the model was shown cut.

A result longer than `MAX_TOOL_OUTPUT` (core/tool_calls.py) reaches the model cut, with a note
naming this tool; its whole (scrubbed) text is kept in the store per session and call
(`ToolOutputs`). The model reads on a piece at a time, only within its own conversation.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from core.errors import ToolError
from core.store.tool_outputs import ToolOutputs
from core.tools.base import SafetyTier, Tool, ToolContext

__all__ = ["READ_CHUNK", "READ_TOOL_OUTPUT", "ReadToolOutputArgs", "read_tool_output_tool"]

READ_TOOL_OUTPUT = "read_tool_output"
# Characters one read returns: with its note, under the cut (16,000), so a piece is never cut.
READ_CHUNK = 12_000


class ReadToolOutputArgs(BaseModel):
    """Arguments of the `read_tool_output` tool."""

    call_id: str = Field(
        min_length=1, max_length=200, description="The id of the cut tool call, from its note."
    )
    offset: int = Field(
        default=0, ge=0, description="The first character to read (the note says where)."
    )


def read_tool_output_tool(outputs: ToolOutputs) -> Tool[ReadToolOutputArgs]:
    """A `read_tool_output` tool reading the outputs kept in `outputs`."""

    async def run(args: ReadToolOutputArgs, context: ToolContext) -> str:
        text = await outputs.tool_output(context.session_id, args.call_id)
        if text is None:
            raise ToolError(
                f"No cut output of a call {args.call_id!r} is kept in this conversation."
            )
        if args.offset >= len(text):
            raise ToolError(f"Offset {args.offset} is past the end ({len(text)} characters).")
        end = min(args.offset + READ_CHUNK, len(text))
        if end < len(text):
            after = f'read_tool_output(call_id="{args.call_id}", offset={end}) reads on'
        else:
            after = "the end"
        return (
            f"{text[args.offset : end]}\n[characters {args.offset}-{end} of {len(text)}; {after}]"
        )

    return Tool(
        name=READ_TOOL_OUTPUT,
        description=(
            "Read more of a tool result that was cut: its note names the call id and the "
            "offset to read from."
        ),
        args=ReadToolOutputArgs,
        tier=SafetyTier.READ_ONLY,
        run=run,
    )
