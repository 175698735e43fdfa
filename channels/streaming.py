"""Streaming a reply by editing messages, for platforms that can edit what the bot sent.

`EditedReply` shows a growing answer: the first text is sent as a message, later text edits it
at most once per `interval`, and text past the platform's length limit continues in further
messages. `finish` shows the final text whole, however the stream went.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from core.envelopes import Outbound
from core.errors import ChannelError

__all__ = ["EditedReply", "ReplyStreams"]

log = logging.getLogger(__name__)

Send = Callable[[str], Awaitable[str]]
Edit = Callable[[str, str], Awaitable[None]]
Render = Callable[[str], list[str]]


class EditedReply:
    """One streamed answer: `add` pieces as they come, then `finish` with the whole text.

    `send(chunk) -> message id` and `edit(message id, chunk)` talk to the platform;
    `render(markdown) -> chunks` formats and splits at the platform's limit.
    """

    def __init__(
        self,
        *,
        send: Send,
        edit: Edit,
        render: Render,
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send = send
        self._edit = edit
        self._render = render
        self._interval = interval
        self._clock = clock
        self._text = ""
        self._shown: list[tuple[str, str]] = []  # (message id, chunk on screen)
        self._last_flush = -interval
        self._pending: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self.finished = False

    @property
    def message_ids(self) -> list[str]:
        """The platform ids of the messages this reply uses so far."""
        return [message_id for message_id, _ in self._shown]

    async def add(self, piece: str) -> None:
        """More text: shown now if the last update is `interval` old, else a little later."""
        self._text += piece
        wait = self._last_flush + self._interval - self._clock()
        if wait <= 0:
            await self._flush(self._text)
        elif self._pending is None or self._pending.done():
            self._pending = asyncio.create_task(self._flush_later(wait))

    async def finish(self, text: str) -> None:
        """Show `text` as the whole answer, in as many messages as it needs."""
        if self._pending is not None:
            self._pending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pending
        self._text = text
        await self._flush(text)
        self.finished = True

    async def close(self) -> None:
        """Drop a pending update (the reply was abandoned)."""
        if self._pending is not None:
            self._pending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pending

    async def _flush_later(self, wait: float) -> None:
        await asyncio.sleep(wait)
        shown: str | None = None
        while shown != self._text:
            shown = self._text
            try:
                await self._flush(shown)
            except Exception as exc:
                # An intermediate update is expendable: the next one or `finish` shows the text.
                log.info("could not update a streamed reply: %s", exc)
                return
            # Text added while that update was on its way (`add` saw this task still running)
            # goes out one interval later.
            await asyncio.sleep(max(0.0, self._last_flush + self._interval - self._clock()))

    async def _flush(self, text: str) -> None:
        async with self._lock:
            self._last_flush = self._clock()
            chunks = self._render(text) if text.strip() else []
            for index, chunk in enumerate(chunks):
                if index < len(self._shown):
                    message_id, on_screen = self._shown[index]
                    if on_screen != chunk:
                        await self._edit(message_id, chunk)
                        self._shown[index] = (message_id, chunk)
                else:
                    self._shown.append((await self._send(chunk), chunk))


class ReplyStreams:
    """An adapter's streamed replies in progress, keyed by the inbound message they answer.

    `add` shows a `delta`, `finish` the final text; a final delivery that fails for a reason
    that may pass keeps its reply, so the retry continues in the same messages.
    """

    def __init__(self) -> None:
        self._replies: dict[str, EditedReply] = {}

    async def add(self, outbound: Outbound, make: Callable[[Outbound], EditedReply]) -> None:
        """More streamed text for the reply to `outbound.reply_to`."""
        key = outbound.reply_to or outbound.id
        reply = self._replies.get(key)
        if reply is None:
            reply = self._replies[key] = make(outbound)
        await reply.add(outbound.text)

    async def finish(self, outbound: Outbound, make: Callable[[Outbound], EditedReply]) -> None:
        """Show the whole final text (in the streamed messages, if there were any)."""
        key = outbound.reply_to or outbound.id
        reply = self._replies.pop(key, None) or make(outbound)
        try:
            await reply.finish(outbound.text)
        except ChannelError as exc:
            if not exc.permanent:
                self._replies[key] = reply  # a retry continues where this stopped
            raise

    async def close(self) -> None:
        """Drop pending updates (the adapter is stopping); final texts may still follow."""
        for reply in self._replies.values():
            await reply.close()
