"""Taking a chat over: an operator answers in the bot's place, then hands it back.

`Takeovers` is what every way in calls (`switchboard takeover` / `handback`, `/takeover` and
`/handback` in an admin's DM, the web page's buttons, `switchboard notify` for the operator's
words), over the store's `TakeoverRecords` (`core/store/takeovers.py`); the worker's intake
asks the store itself, in the read it makes anyway (`TurnStanding.takeover`).

The history stays well-formed for the model: a person's messages meanwhile are `user`
messages as always; the operator's words are `assistant` messages with `speaker="operator"`;
the handback (by hand or at expiry) appends one more `assistant` message, written by
Switchboard (`speaker="switchboard"`), saying who answered when
(docs/decisions/0014-human-takeover.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from core.bus.base import Bus
from core.bus.names import outbound_queue
from core.clock import utc_now
from core.envelopes import Address, NotificationSource, Outbound, new_id
from core.messages import Message, TextPart
from core.scheduling.cadence import parse_duration
from core.store.base import Store
from core.store.log import new_session_id
from core.store.takeovers import Takeover, chat_of

__all__ = [
    "DEFAULT_DURATION",
    "Takeovers",
    "handback_note",
    "operator_message",
    "parse_takeover_duration",
]

log = logging.getLogger(__name__)

DEFAULT_DURATION = timedelta(hours=4)


def parse_takeover_duration(text: str) -> timedelta:
    """`4h`, `30m`, `1h30m`, `2 hours`...; `ValueError` with a one-line reason otherwise."""
    return timedelta(seconds=parse_duration(text))


def operator_message(text: str, *, ident: str | None = None) -> Message:
    """What the operator wrote, as the conversation keeps it (`ident`: its id, so a request
    made again is kept once)."""
    return Message(
        role="assistant",
        content=[TextPart(text=text)],
        speaker="operator",
        id=ident or f"operator:{new_id()}",
    )


def handback_note(takeover: Takeover) -> Message:
    """The note a handback leaves in the history, so the model knows a person answered."""
    ended = takeover.ended_at or takeover.until
    text = (
        f"(Note: from {_when(takeover.since)} to {_when(ended)} a person from the team "
        "answered in this chat in my place; the replies in that time were theirs, not mine. "
        "I answer again from now on.)"
    )
    return Message(
        role="assistant",
        content=[TextPart(text=text)],
        speaker="switchboard",
        # One note per handback, however often its write is tried.
        id=f"handback:{takeover.chat}:{ended.isoformat()}",
    )


class Takeovers:
    """Starts, lists and ends takeovers; keeps the operator's words and the handback note."""

    def __init__(
        self,
        store: Store,
        *,
        bus: Bus | None = None,
        admin_dms: Sequence[Address] = (),
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        """`bus` and `admin_dms`: where expiry notices go (none without a bus)."""
        self.store = store
        self.bus = bus
        self.admin_dms = tuple(admin_dms)
        self._clock = clock

    async def take_over(
        self, address: Address, *, by: str, duration: timedelta = DEFAULT_DURATION
    ) -> Takeover:
        """Take `address`'s chat over from now for `duration` (a running one is extended)."""
        now = self._clock()
        takeover = Takeover(chat=chat_of(address), by=by, since=now, until=now + duration)
        kept = await self.store.take_over(takeover)
        log.info("%s took over %s until %s", by, kept.chat, _when(kept.until))
        return kept

    async def running(self) -> list[Takeover]:
        """The takeovers running now."""
        return await self.store.running_takeovers(self._clock())

    async def running_in(self, address: Address) -> Takeover | None:
        """`address`'s chat's takeover, if one runs now."""
        found = await self.store.takeover_of(chat_of(address))
        return found if found is not None and found.active(self._clock()) else None

    async def hand_back(self, address: Address, *, quiet: bool = False) -> Takeover | None:
        """End the chat's takeover; unless `quiet`, leave the note in its history. None when
        no takeover ran."""
        ended = await self.store.hand_back(chat_of(address), self._clock())
        if ended is None:
            return None
        log.info("%s handed back", ended.chat)
        if not quiet:
            await self._note(address, ended)
        return ended

    async def operator_said(
        self, address: Address, text: str, *, ident: str | None = None
    ) -> Message | None:
        """Keep what the operator sent to a chat they took over; None (nothing kept) when the
        chat is not taken over. `ident`: the request's id (kept once per id)."""
        if await self.running_in(address) is None:
            return None
        message = operator_message(text, ident=None if ident is None else f"operator:{ident}")
        return await self.store.keep_operator_message(address, message, session_id=new_session_id())

    async def expire(self) -> list[Takeover]:
        """End the takeovers past their time: each one's note in its history and a notice to
        the admins, once (the store ends each for one caller)."""
        ended = await self.store.end_expired(self._clock())
        for takeover in ended:
            log.info("the takeover of %s ran out", takeover.chat)
            try:
                address = Address.parse(takeover.chat)
            except ValueError:
                log.warning("no note for the takeover of %r: not a chat address", takeover.chat)
            else:
                await self._note(address, takeover)
            await self._tell_admins(takeover)
        return ended

    async def _note(self, address: Address, ended: Takeover) -> None:
        # A chat nobody wrote in meanwhile has no conversation to note it in.
        await self.store.keep_operator_message(address, handback_note(ended), session_id=None)

    async def _tell_admins(self, takeover: Takeover) -> None:
        if self.bus is None:
            return
        text = (
            f"The takeover of {takeover.chat} (by {takeover.by} since "
            f"{_when(takeover.since)}) ran out at {_when(takeover.until)}: the bot answers "
            "there again."
        )
        for address in self.admin_dms:
            await self.bus.enqueue(
                outbound_queue(address.platform),
                Outbound(
                    kind="notification",
                    address=address,
                    text=text,
                    source=NotificationSource(kind="alert", name="takeover"),
                ),
                dedupe_id=f"takeover-expired:{takeover.chat}:{_when(takeover.until)}:{address}",
            )


def _when(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC"
