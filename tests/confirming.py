"""A privileged tool and a model script that calls it once, for the confirmation gate's tests."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from core.messages import ToolCall
from core.providers.scripted import ScriptStep, text_reply, tool_reply
from core.tools import SafetyTier, Tool, ToolContext

__all__ = ["PathArgs", "script", "wipe_tool"]


class PathArgs(BaseModel):
    """The `wipe` tool's argument."""

    path: str


def wipe_tool(ran: list[str]) -> Tool[Any]:
    """A privileged tool that notes in `ran` each path it was allowed to wipe."""

    async def run(args: PathArgs, _ctx: ToolContext) -> str:
        ran.append(args.path)
        return f"wiped {args.path}"

    return Tool(
        name="wipe", description="Wipe a path.", args=PathArgs, tier=SafetyTier.PRIVILEGED, run=run
    )


def script() -> list[ScriptStep]:
    """The model asks for `wipe("/tmp/x")`, then ends with "Finished."."""
    return [
        tool_reply(ToolCall(id="c1", name="wipe", arguments={"path": "/tmp/x"})),
        text_reply("Finished."),
    ]
