"""Catch-up after downtime, the part every platform shares: where each conversation's history
is read from, how far back, and the note on a late answer.

While a gateway runs, it notes per conversation the newest message it handed over (`SeenLog`,
written to the store's `SeenMarks` in the background and at stop). When it starts again, the
adapter reads each noted conversation's history after that message (bounded by `CatchUp`) and
hands over what it would have answered live; the worker's processed marks make a message that
is handed over twice (seen live during catch-up, or noted just before a crash) answered once.

A platform that sends what was missed by itself (Telegram keeps a bot's updates for a day)
reads no history: `LateMessages` applies the same limits to what arrives late. Every platform
puts the same note before a late message (`with_late_note`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from core.envelopes import Inbound
from core.errors import StoreError
from core.store.seen import LastSeen, SeenMarks

__all__ = ["LATE_AFTER", "CatchUp", "LateMessages", "SeenLog", "late_note", "with_late_note"]

log = logging.getLogger(__name__)

# An answer later than this gets a note saying when the question was sent.
LATE_AFTER = timedelta(minutes=5)
_FLUSH_SECONDS = 2.0


@dataclass(frozen=True)
class CatchUp:
    """How far back a start reads: `hours` of history and at most `messages` per
    conversation; either at 0 turns catch-up off."""

    hours: float = 24.0
    messages: int = 100

    @property
    def enabled(self) -> bool:
        """Whether a start reads history at all."""
        return self.hours > 0 and self.messages > 0

    def since(self, now: datetime) -> datetime:
        """The oldest moment a start reads back to."""
        return now - timedelta(hours=self.hours)


def late_note(sent_at: datetime, now: datetime) -> str | None:
    """`(sent 2 h ago, while I was offline)` for a message older than `LATE_AFTER`, else None.

    It goes before the message's text, so the model knows the answer is late and says so.
    """
    age = now - sent_at
    if age < LATE_AFTER:
        return None
    minutes = int(age.total_seconds() // 60)
    if minutes < 60:
        ago = f"{minutes} min"
    elif minutes < 48 * 60:
        ago = f"{minutes // 60} h"
    else:
        ago = f"{minutes // (24 * 60)} days"
    return f"(sent {ago} ago, while I was offline)"


def with_late_note(inbound: Inbound, sent_at: datetime, now: datetime) -> Inbound:
    """`inbound` with the late note before its text if it is late (a command stays as it is)."""
    note = late_note(sent_at, now)
    if note is None or inbound.kind != "message":
        return inbound
    return inbound.model_copy(update={"text": f"{note}\n{inbound.text}"})


class LateMessages:
    """The catch-up limits for a platform that delivers missed messages by itself.

    A message older than `LATE_AFTER` when it arrives was missed while the bot was away: it is
    answered (with the late note) if it is within `catch_up.hours` and among the first
    `catch_up.messages` late ones of its conversation since that conversation's last message
    on time; otherwise it is read, not answered. Catch-up turned off answers no late message.
    """

    def __init__(self, catch_up: CatchUp) -> None:
        self._catch_up = catch_up
        self._late: dict[str, int] = {}  # per conversation: late messages answered in a row

    def admits(self, conversation: str, sent_at: datetime, now: datetime) -> bool:
        """Whether a message of `conversation` sent at `sent_at` is to be answered."""
        if now - sent_at < LATE_AFTER:
            self._late.pop(conversation, None)  # on time: any backlog is over
            return True
        if not self._catch_up.enabled or sent_at < self._catch_up.since(now):
            return False
        answered = self._late.get(conversation, 0)
        if answered >= self._catch_up.messages:
            return False
        self._late[conversation] = answered + 1
        return True


class SeenLog:
    """The newest message handed over per conversation, noted in memory and written to the
    store's `SeenMarks` every couple of seconds and at stop.

    A mark written late costs nothing but a longer re-read at the next start (the worker
    answers a message once); a store that fails keeps its marks pending for the next try.
    While a catch-up runs, marks are held back: a live message must not move a conversation's
    mark past missed messages not read yet, or a stop in the middle would lose them.
    """

    def __init__(self, marks: SeenMarks | None, platform: str) -> None:
        self._marks = marks
        self._platform = platform
        self._pending: dict[tuple[str, str], LastSeen] = {}
        self._flushing: asyncio.Task[None] | None = None
        self._held: dict[tuple[str, str], LastSeen] | None = None  # pending before a catch-up

    @property
    def durable(self) -> bool:
        """Whether marks are kept anywhere (no store: no catch-up)."""
        return self._marks is not None

    def hold(self) -> None:
        """Hold marks back until `end_catch_up`: from before the platform may send anything
        (a start, a lost connection) until what was missed has been read."""
        if self._held is None:
            self._held = dict(self._pending)

    async def begin_catch_up(self, bot: str) -> list[LastSeen]:
        """Where each of `bot`'s conversations starts (stored marks and those not written yet
        when the hold began), none when the store fails; holds marks back if not yet."""
        self.hold()
        assert self._held is not None
        if self._marks is None:
            return []
        try:
            stored = await self._marks.last_seen(self._platform, bot)
        except StoreError as exc:
            log.warning("cannot read where %s catch-up starts: %s", self._platform, exc)
            return []
        newest = {mark.chat: mark for mark in stored}
        for (owner, chat), mark in self._held.items():
            if owner == bot and (chat not in newest or newest[chat].position < mark.position):
                newest[chat] = mark
        return sorted(newest.values(), key=lambda mark: mark.at, reverse=True)

    def end_catch_up(self, *, complete: bool) -> None:
        """Let marks be written again; after an incomplete catch-up, drop those noted during
        it (the next start reads those conversations again)."""
        if self._held is None:
            return
        if not complete:
            self._pending = self._held
        self._held = None
        if self._pending:
            self._schedule()

    def note(self, bot: str, chat: str, message_id: str, position: int, at: datetime) -> None:
        """`message_id` of `chat` was handed over (kept if it is the newest)."""
        if self._marks is None:
            return
        key = (bot, chat)
        known = self._pending.get(key)
        if known is None or position > known.position:
            self._pending[key] = LastSeen(
                platform=self._platform,
                bot=bot,
                chat=chat,
                message_id=message_id,
                position=position,
                at=at,
            )
        self._schedule()

    def _schedule(self) -> None:
        if self._held is None and (self._flushing is None or self._flushing.done()):
            self._flushing = asyncio.create_task(self._flush_soon())

    async def flush(self) -> None:
        """Write every pending mark now (at stop)."""
        if self._flushing is not None and not self._flushing.done():
            self._flushing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flushing
        await self._write()

    async def _flush_soon(self) -> None:
        await asyncio.sleep(_FLUSH_SECONDS)
        await self._write()

    async def _write(self) -> None:
        if self._marks is None or self._held is not None:
            return
        pending, self._pending = self._pending, {}
        for key, mark in pending.items():
            try:
                await self._marks.mark_seen(mark)
            except StoreError as exc:
                log.warning("cannot note where %s catch-up starts: %s", self._platform, exc)
                newer = self._pending.get(key)
                if newer is None or newer.position < mark.position:
                    self._pending[key] = mark
