"""`FileDrop`: how a tool hands a file to the person it is talking to.

The file goes into a `file` `Outbound` on the chat's `outbound.<platform>` queue, its bytes
inline (docs/decisions/0008-attachments-inline-on-the-bus.md); the platform's gateway uploads
it the platform's way, or says in the chat why it could not.
"""

from __future__ import annotations

import hashlib

from core.bus.base import Bus
from core.bus.names import outbound_queue
from core.envelopes import MAX_ATTACHMENT_BYTES, Attachment, Outbound
from core.errors import BusError, ToolError
from core.tools.base import ToolContext

__all__ = ["FileDrop", "size_text"]


def size_text(size: int) -> str:
    """A size for people: `512 bytes`, `12.3 KB`, `4.5 MB`."""
    if size < 1024:
        return "1 byte" if size == 1 else f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / 2**20:.1f} MB"


class FileDrop:
    """Sends files to the chat of a tool's turn, through the bus like every delivery."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    async def send(
        self, context: ToolContext, attachment: Attachment, *, caption: str = ""
    ) -> None:
        """Queue `attachment` for the turn's chat; `ToolError` (a sentence for the model) when
        the turn has no chat, the file is too large to carry, or the bus refuses."""
        if context.address is None:
            raise ToolError("This conversation has no chat to send a file to.")
        if attachment.size > MAX_ATTACHMENT_BYTES:
            raise ToolError(
                f"{attachment.name} is {size_text(attachment.size)}; files of at most "
                f"{size_text(MAX_ATTACHMENT_BYTES)} can be sent."
            )
        outbound = Outbound(
            kind="file", address=context.address, text=caption, attachments=[attachment]
        )
        # The same file sent twice in one run (a turn resumed after a crash) is queued once.
        digest = hashlib.sha256(attachment.data).hexdigest()[:16]
        dedupe = f"file:{context.run_id}:{attachment.name}:{digest}" if context.run_id else None
        try:
            await self.bus.enqueue(
                outbound_queue(context.address.platform), outbound, dedupe_id=dedupe
            )
        except BusError as exc:
            raise ToolError(f"{attachment.name} could not be queued for the chat: {exc}") from exc
