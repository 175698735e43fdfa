"""`HistoryCache`: recent sessions' histories kept between turns.

Without it every turn reads and validates a session's whole history from the store, a cost
that grows with the conversation. The store stays the truth: a session's messages form an
append-only log numbered 1, 2, 3... (`seq`), so a cached run of messages is reused only while
it is exactly the log's beginning (after the summary marker) and of the session's revision
(raised when its messages are rewritten in place, as erasing a person does), and each turn
still reads what was stored after it (`known`: opening the turn reads after that seq), by this
process or any other.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from core.context import Sanitizer
from core.messages import Message
from core.stored_images import without_bytes

__all__ = ["HistoryCache"]

DEFAULT_MAX_MESSAGES = 2_000


@dataclass(frozen=True)
class _Entry:
    after_seq: int
    messages: tuple[Message, ...]
    revision: int
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

    def known(self, session_id: str) -> int:
        """The seq of the newest message held for the session (0: none held): a turn reads
        only what was stored after it."""
        entry = self._entries.get(session_id)
        if entry is None:
            return 0
        return entry.messages[-1].seq if entry.messages else entry.after_seq

    def join(
        self,
        session_id: str,
        marker: int,
        newer: list[Message],
        *,
        read_after: int,
        revision: int = 0,
    ) -> tuple[list[Message], Sanitizer | None] | None:
        """The session's messages after the summary `marker`, oldest first (a new list): those
        held, then `newer` (what the store had after `read_after`), with the sanitizer kept
        with them, if any. None when what was read does not follow what is held (another
        session's entry, a summary older than the held messages' marker, or messages rewritten
        since: another `revision`): the caller reads the messages after `marker` again. What
        was held is taken out either way.
        """
        entry = self._take(session_id)
        if entry is None:
            return (list(newer), None) if read_after == marker else None
        last = entry.messages[-1].seq if entry.messages else entry.after_seq
        if entry.revision != revision:
            return None
        if marker < entry.after_seq or read_after != max(last, marker):
            return None
        if marker == entry.after_seq:
            return [*entry.messages, *newer], entry.ready
        # A newer summary marker only cuts the front of what was held.
        return [m for m in entry.messages if m.seq > marker] + list(newer), None

    def keep(
        self,
        session_id: str,
        messages: list[Message],
        *,
        after_seq: int,
        ready: Sanitizer | None = None,
        revision: int = 0,
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
        if any(image.ref and image.data for m in ordered for image in m.images):
            # Only the turn that received an image sends its bytes; the store keeps them.
            ordered = [without_bytes(m) for m in ordered]
            ready = None
        self._entries[session_id] = _Entry(after_seq, tuple(ordered), revision, ready)
        self._held += len(ordered)
        while self._held > self._max:
            _, evicted = self._entries.popitem(last=False)
            self._held -= len(evicted.messages)

    def _take(self, session_id: str) -> _Entry | None:
        entry = self._entries.pop(session_id, None)
        if entry is not None:
            self._held -= len(entry.messages)
        return entry
