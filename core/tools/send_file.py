"""`send_file`: hand a file of the admin workspace to the person, as a document in the chat.

Privileged, like `shell` and `files` (`core/tools/workspace.py`): only a mode offering every
tool (`full`) offers it, every call waits for the admin's confirmation, and the tool refuses
anyone who is not an admin. Paths are held to the workspace the way `files` holds them.
"""

from __future__ import annotations

import asyncio
import mimetypes
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from core.envelopes import MAX_ATTACHMENT_BYTES, Attachment
from core.errors import ToolError
from core.tools.base import SafetyTier, Tool, ToolContext
from core.tools.outgoing import FileDrop, size_text
from core.tools.workspace import WorkspaceSettings, resolve_inside

__all__ = ["SEND_FILE", "SendFileArgs", "send_file_tool"]

SEND_FILE = "send_file"


class SendFileArgs(BaseModel):
    path: str = Field(
        description="The file to send, relative to the workspace folder, e.g. out/report.pdf.",
        min_length=1,
        max_length=1000,
    )
    caption: str = Field(
        default="", description="A short line shown with the file (optional).", max_length=900
    )


def send_file_tool(settings: WorkspaceSettings, drop: FileDrop) -> Tool[Any]:
    """The `send_file` tool: one workspace file to the chat of the turn, confirmed first."""

    async def run(args: SendFileArgs, context: ToolContext) -> str:
        if not context.is_admin:
            raise ToolError(f"Only an admin of this bot may use {SEND_FILE}.")
        attachment = await asyncio.to_thread(_read, settings.root, args.path)
        await drop.send(context, attachment, caption=args.caption.strip())
        return (
            f"Sent {attachment.name} ({size_text(attachment.size)}, {attachment.media_type}) "
            "to this chat as a file. If the platform refuses it, the chat gets a one-line "
            "note instead."
        )

    return Tool(
        name=SEND_FILE,
        description=(
            "Send a file from the bot's workspace folder to this chat as a document (at most "
            f"{size_text(MAX_ATTACHMENT_BYTES)}). The user confirms every call."
        ),
        args=SendFileArgs,
        tier=SafetyTier.PRIVILEGED,
        run=run,
    )


def _read(root: Path, relative: str) -> Attachment:
    target = resolve_inside(root, relative)
    if not target.is_file():
        raise ToolError(f"No file {relative!r} in the workspace.")
    size = target.stat().st_size
    if size > MAX_ATTACHMENT_BYTES:
        raise ToolError(
            f"{relative!r} is {size_text(size)}; files of at most "
            f"{size_text(MAX_ATTACHMENT_BYTES)} can be sent."
        )
    if size == 0:
        raise ToolError(f"{relative!r} is empty; there is nothing to send.")
    media_type = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
    return Attachment(name=target.name, media_type=media_type, data=target.read_bytes())
