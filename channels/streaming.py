"""Showing a reply by sending messages and editing them, from whichever gateway takes a piece.

The worker paces a streamed answer (`core/turns/stream.py`); each piece it sends is the whole
text so far with a sequence number. `ReplyStreams.show` applies a piece at once: under the
reply's hold it reads the reply record (`core/store/replies.py`), skips a piece older than what is
shown, renders the text into the platform's messages, edits those that changed, sends the new
ones, and records their ids. Any gateway of the platform may show any piece.

A message the platform took whose id could not be recorded (the gateway died between the two,
or the platform's answer was lost) is sent again by the next show, unless the platform can look
it up: a target with `find` has the record note each send before it is made (`sending`), and the
next show asks `find` for that message before sending it again.

Rendering is incremental (`IncrementalRender`): the answer is cut at paragraph breaks outside
code blocks into parts of about one message each; a part followed by enough text is sealed and
its rendering remembered, so only the open tail is rendered again as the answer grows. The cut
depends on the text alone, so every gateway renders the same messages.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from core.envelopes import Outbound
from core.errors import ChannelError
from core.store.replies import ReplyRecord, ReplyRecords, ShownMessage, digest

__all__ = ["IncrementalRender", "ReplyStreams", "ReplyTarget", "sealed_parts"]

Send = Callable[[int, str], Awaitable[str]]
"""`send(index, chunk) -> message id`: post message `index` (0 first) of a reply."""
Edit = Callable[[str, str], Awaitable[None]]
"""`edit(message id, chunk)`: change what a message of the reply shows."""
Render = Callable[[str], list[str]]
"""`render(markdown) -> chunks`: the platform's markup, split at its length limit."""
Find = Callable[[int], Awaitable[str | None]]
"""`find(index) -> message id`: message `index` of the reply, if an earlier send of it reached
the chat (None: it did not)."""

_PARAGRAPH_BREAK = re.compile(r"\n(?:[ \t]*\n)+")
_FENCE = re.compile(r"^ {0,3}(```|~~~)", re.MULTILINE)


@dataclass(frozen=True)
class ReplyTarget:
    """How one reply reaches its chat."""

    send: Send
    edit: Edit
    render: Render
    # Markdown characters per sealed part: about what one message holds.
    part_size: int
    # How to look up a message whose send may have reached the chat (None: the platform
    # cannot say; such a message is sent again).
    find: Find | None = None
    # What `send` and `edit` put on each message besides its text (a Stop button while the
    # reply streams; "" for nothing): part of a message's fingerprint, so a message shown
    # with other controls is edited even when its text stays the same.
    controls: str = ""


def sealed_parts(text: str, size: int) -> tuple[list[str], str]:
    """`text` cut into sealed parts and the open tail (they concatenate to `text`).

    A part ends at the last paragraph break outside a code block within `size` characters of
    its start (or the first one after, for a longer block), and is sealed only once more than
    `size` characters follow its start, so later text cannot move the cut.
    """
    breaks = _breaks(text)
    parts: list[str] = []
    start = 0
    while len(text) - start > size:
        inside = [end for end in breaks if start < end <= start + size]
        if inside:
            end = inside[-1]
        else:
            end = next((end for end in breaks if end > start + size), len(text))
        if end >= len(text):
            break
        parts.append(text[start:end])
        start = end
    return parts, text[start:]


def _breaks(text: str) -> list[int]:
    """Where paragraph breaks outside code blocks end."""
    fences = [match.start() for match in _FENCE.finditer(text)]
    breaks: list[int] = []
    for match in _PARAGRAPH_BREAK.finditer(text):
        opened = sum(1 for at in fences if at < match.start())
        if opened % 2 == 0:
            breaks.append(match.end())
    return breaks


class IncrementalRender:
    """Renders growing answers, remembering the rendering of sealed parts (newest `capacity`)."""

    def __init__(self, capacity: int = 512) -> None:
        self._done: OrderedDict[tuple[Render, str], list[str]] = OrderedDict()
        self._capacity = capacity

    def __call__(self, text: str, target: ReplyTarget) -> list[str]:
        """The messages showing `text` (none for blank text)."""
        parts, tail = sealed_parts(text, target.part_size)
        chunks: list[str] = []
        for part in parts:
            chunks.extend(self._sealed(part, target.render))
        if tail.strip():
            chunks.extend(target.render(tail))
        return chunks

    def _sealed(self, part: str, render: Render) -> list[str]:
        key = (render, part)
        found = self._done.get(key)
        if found is None:
            found = self._done[key] = render(part) if part.strip() else []
            while len(self._done) > self._capacity:
                self._done.popitem(last=False)
        else:
            self._done.move_to_end(key)
        return found


class ReplyStreams:
    """Shows replies and their streamed pieces idempotently, sharing state through records."""

    def __init__(self, records: ReplyRecords, render: IncrementalRender) -> None:
        self._records = records
        self._render = render

    async def show(self, outbound: Outbound, target: Callable[[Outbound], ReplyTarget]) -> bool:
        """Show `outbound` (a `delta` or a final text); False when it was skipped as shown.

        A `delta` older than what is shown is skipped; a final text is shown unless the final
        text of the reply was shown already (a redelivery). Raises the platform's
        `ChannelError`; the messages sent before it are recorded, so a retry continues in them.
        """
        key = outbound.record_key
        final = outbound.kind != "delta"
        async with self._records.hold(key):
            record = await self._records.get(key) or ReplyRecord(key=key)
            if record.finished or (not final and outbound.seq <= record.seq):
                return False
            into = target(outbound)
            chunks = self._render(outbound.text, into)
            shown = list(record.messages)
            try:
                record = await self._apply(record, chunks, shown, into)
            except Exception:
                # A send that failed may still have reached the chat: the next show looks.
                sending = len(shown) if into.find is not None else None
                update = {"messages": tuple(shown), "sending": sending}
                await self._records.save(record.model_copy(update=update))
                raise
            await self._records.save(
                record.model_copy(
                    update={
                        "messages": tuple(shown),
                        "seq": max(record.seq, outbound.seq),
                        "finished": final,
                        "sending": None,
                    }
                )
            )
        return True

    async def _apply(
        self, record: ReplyRecord, chunks: list[str], shown: list[ShownMessage], into: ReplyTarget
    ) -> ReplyRecord:
        """Edit the messages whose text changed and send the missing ones; `shown` keeps up.

        Returns the record as last saved (a send noted before it is made, see `find`).
        """
        for index, chunk in enumerate(chunks):
            fingerprint = digest(f"{into.controls}\n{chunk}" if into.controls else chunk)
            if index < len(shown):
                if shown[index].digest != fingerprint:
                    await into.edit(shown[index].message_id, chunk)
                    shown[index] = ShownMessage(
                        message_id=shown[index].message_id, digest=fingerprint
                    )
                continue
            if into.find is not None:
                if record.sending == index and (found := await into.find(index)) is not None:
                    # Sent before, its id lost: show this text in it rather than send it again.
                    await into.edit(found, chunk)
                    shown.append(ShownMessage(message_id=found, digest=fingerprint))
                    continue
                record = record.model_copy(update={"messages": tuple(shown), "sending": index})
                await self._records.save(record)
            message_id = await into.send(index, chunk)
            shown.append(ShownMessage(message_id=message_id, digest=fingerprint))
        return record

    async def messages(self, key: str) -> tuple[str, ...]:
        """The platform ids of the messages reply `key` is shown in, oldest first (none if
        it was never shown): a confirmation's decision edits its question's message."""
        record = await self._records.get(key)
        return tuple(shown.message_id for shown in record.messages) if record else ()

    async def finished(self, key: str) -> bool:
        """Whether the final text of reply `key` is shown (by any gateway); False if unknown.

        Typing indicators ask this, so one started here stops when another gateway answers.
        """
        try:
            record = await self._records.get(key)
        except ChannelError:
            return False
        return record is not None and record.finished
