"""`EditedReply`: a streamed answer shown by sending a message and editing it."""

from __future__ import annotations

import asyncio

from channels.streaming import EditedReply


class _Chat:
    """Records sends and edits; the first edit waits until `release` is set."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.edits: list[str] = []
        self.editing = asyncio.Event()
        self.release = asyncio.Event()
        self.changed = asyncio.Event()

    async def send(self, chunk: str) -> str:
        self.sent.append(chunk)
        return f"m{len(self.sent)}"

    async def edit(self, message_id: str, chunk: str) -> None:
        self.editing.set()
        await self.release.wait()
        self.edits.append(chunk)
        self.changed.set()

    async def until_edits(self, count: int) -> None:
        async with asyncio.timeout(5):
            while len(self.edits) < count:
                self.changed.clear()
                await self.changed.wait()


async def test_text_added_while_a_delayed_update_is_on_its_way_follows_it() -> None:
    chat = _Chat()
    reply = EditedReply(send=chat.send, edit=chat.edit, render=lambda t: [t], interval=0.05)
    await reply.add("one")  # sent at once
    await reply.add(" two")  # within the interval: a delayed update
    await chat.editing.wait()  # that update is on its way…
    await reply.add(" three")  # …when more text comes
    chat.release.set()
    await chat.until_edits(2)  # shown without waiting for `finish`

    assert chat.sent == ["one"]
    assert chat.edits == ["one two", "one two three"]
    await reply.finish("one two three")
    assert chat.edits == ["one two", "one two three"]  # nothing left to change
