"""`HistoryCache`: recent sessions' histories kept between turns.

Without it every turn reads and validates a session's whole history from the store, a cost
that grows with the conversation. The store stays the truth: a session's messages form an
append-only log numbered 1, 2, 3... (`seq`), so a cached run of messages is reused only while
it is exactly the log's beginning (after the summary marker), and each turn still reads what
was stored after it, by this process or any other.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass

from core.context import Sanitizer
from core.messages import Message
from core.store.log import CompactionSummary, ConversationLog

__all__ = ["HistoryCache"]

DEFAULT_MAX_MESSAGES = 2_000


@dataclass(frozen=True)
class _Entry:
    after_seq: int
    messages: tuple[Message, ...]
    # The previous turn's well-formed view of these messages, to go on from.
    ready: Sanitizer | None


class HistoryCache:
    """Histories of the sessions used last, at most `max_messages` messages in all."""

    def __init__(self, max_messages: int = DEFAULT_MAX_MESSAGES) -> None:
        self._max = max_messages
        self._held = 0
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    @property
    def held(self) -> int:
        """How many messages are held now."""
        return self._held

    async def load(
        self, store: ConversationLog, session_id: str, *, after_seq: int
    ) -> tuple[list[Message], Sanitizer | None]:
        """The session's messages with `seq > after_seq`, oldest first (a new list), and the
        sanitizer kept with them, if any.

        Reads only what was stored after the cached messages; everything when nothing usable
        is cached (another summary marker, or nothing kept).
        """
        entry = self._take(session_id)
        if entry is None or after_seq < entry.after_seq:
            return await store.list_messages(session_id, after_seq=after_seq), None
        if after_seq == entry.after_seq:
            cached, ready = list(entry.messages), entry.ready
        else:
            # A newer summary marker only cuts the front of what is cached.
            cached, ready = [m for m in entry.messages if m.seq > after_seq], None
        last = cached[-1].seq if cached else after_seq
        return cached + await store.list_messages(session_id, after_seq=last), ready

    async def load_latest(
        self, store: ConversationLog, session_id: str
    ) -> tuple[CompactionSummary | None, list[Message], Sanitizer | None]:
        """The session's latest summary and the messages after its marker (all of them
        without one), as `load` gives them.

        With nothing cached, both come from one read (`summary_and_tail`); with something
        cached, the summary and the messages stored after the cached ones are asked for at
        once; only a summary older than the cached messages'
        marker (the cache is then of no use) costs another read.
        """
        entry = self._entries.get(session_id)
        if entry is None:
            summary, messages = await store.summary_and_tail(session_id)
            return summary, messages, None
        self._take(session_id)
        last = entry.messages[-1].seq if entry.messages else entry.after_seq
        summary, newer = await asyncio.gather(
            store.latest_summary(session_id), store.list_messages(session_id, after_seq=last)
        )
        after = summary.up_to_seq if summary else 0
        if after < entry.after_seq:
            return summary, await store.list_messages(session_id, after_seq=after), None
        if after == entry.after_seq:
            return summary, [*entry.messages, *newer], entry.ready
        # A newer summary marker only cuts the front of what was cached.
        return summary, [m for m in (*entry.messages, *newer) if m.seq > after], None

    def keep(
        self,
        session_id: str,
        messages: list[Message],
        *,
        after_seq: int,
        ready: Sanitizer | None = None,
    ) -> None:
        """Remember a session's messages after `after_seq`, as a turn ended with them.

        They are kept only if they are the log's unbroken beginning after `after_seq` (in seq
        order, no gaps: a turn cut off mid-write may lack some); otherwise the next turn reads
        the store again.
        """
        self._take(session_id)
        if len(messages) > self._max:
            return
        ordered = messages
        if any(m.seq != after_seq + i for i, m in enumerate(ordered, start=1)):
            ordered = sorted(messages, key=lambda m: m.seq)
            if any(m.seq != after_seq + i for i, m in enumerate(ordered, start=1)):
                return
            ready = None  # made from another order
        self._entries[session_id] = _Entry(after_seq, tuple(ordered), ready)
        self._held += len(ordered)
        while self._held > self._max:
            _, evicted = self._entries.popitem(last=False)
            self._held -= len(evicted.messages)

    def _take(self, session_id: str) -> _Entry | None:
        entry = self._entries.pop(session_id, None)
        if entry is not None:
            self._held -= len(entry.messages)
        return entry
