"""`Steering`: the `Arrivals` of a person's turn, read from its session's mailbox.

With `busy = "steer"` the plain messages (`core.mailbox.base.is_plain`) the same person sends
to the same chat while their turn runs join it before each model call; with `"collect"` the
turn's first model call waits until `busy_window` seconds after its first message arrived,
and what came by then joins it. A message joins only as its own turn would have been run: the
same person's, addressed to the bot, not too long; the first one that is not stops the run of
joins (it keeps its place, and so do those behind it). A message found marked processed
already joined before a crash, and a platform's redelivery of one the turn has: each is only
taken out of the mailbox.

The same place holds the answer an `ask_user` question waits for (`answer`, with every `busy`):
the asker's first typed message behind the head, whatever it says and whether or not it
mentions the bot; the others' messages keep their place (core/turn_answers.py).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta

from core.arrivals import Arrival, BusyMode
from core.clock import Clock, utc_now
from core.envelopes import Inbound, new_id
from core.errors import BusError
from core.mailbox.base import Claim, is_plain
from core.messages import Message
from core.outages import Patience
from core.policy import ChannelPolicy
from core.store.processed import ProcessedMarks

__all__ = ["Pause", "Steering"]

log = logging.getLogger(__name__)

# Waits the given seconds (`asyncio.sleep`; tests give one that does not wait).
Pause = Callable[[float], Awaitable[None]]


class Steering:
    """Joins the messages waiting behind `head` in its claim's mailbox to `head`'s turn."""

    def __init__(
        self,
        *,
        claim: Claim,
        head: Inbound,
        marks: ProcessedMarks,
        policy: ChannelPolicy,
        mode: BusyMode,
        window: float,
        patience: Patience,
        clock: Clock = utc_now,
        pause: Pause = asyncio.sleep,
    ) -> None:
        """`mode`: "steer" or "collect" (`window`: its seconds from the head's arrival)."""
        self.claim = claim
        self.head = head
        self.marks = marks
        self.policy = policy
        self.mode = mode
        self.window = window
        self.patience = patience
        self._clock = clock
        self._pause = pause

    async def joining(self, step: int) -> list[Arrival]:
        """The messages waiting behind the head that join its turn now, oldest first."""
        if self.mode == "queue" or (self.mode == "collect" and step > 1):
            return []
        if self.mode == "collect":
            until = self.head.received_at + timedelta(seconds=self.window)
            left = (until - self._clock()).total_seconds()
            if left > 0:
                await self._pause(left)
        found: list[Arrival] = []
        # A platform's redelivery of a message already here (the head's, or one joining now)
        # is only taken out: the turn has it once.
        here = {self.head.dedupe_key}
        for inbound in await self._behind():
            if not self._joins(inbound):
                break
            key = inbound.dedupe_key
            asked = functools.partial(self.marks.is_processed, key)
            if key in here or await self.patience(asked, read=True):
                await self._take_out(inbound)  # or joined before a crash: a copy left over
                continue
            here.add(key)
            found.append(self._arrival(inbound))
        return found

    async def answer(self, user_id: str) -> Arrival | None:
        """The first message `user_id` typed behind the head (others' keep their place)."""
        for inbound in await self._behind(accept=_typed):
            if inbound.user_id != user_id:
                continue
            key = inbound.dedupe_key
            asked = functools.partial(self.marks.is_processed, key)
            if key == self.head.dedupe_key or await self.patience(asked, read=True):
                await self._take_out(inbound)  # a redelivery, or taken before a crash
                continue
            return self._arrival(inbound)
        return None

    def _arrival(self, inbound: Inbound) -> Arrival:
        message = Message.user(
            inbound.model_text,
            inbound.images,
            source=self.head.dedupe_key,
            author=inbound.author,
        )
        return Arrival(inbound, message.model_copy(update={"id": new_id()}))

    async def joined(self, arrival: Arrival) -> None:
        """Take the joined message out of the mailbox."""
        log.info("message %s joined the running turn of %s", arrival.inbound.id, self.head.id)
        await self._take_out(arrival.inbound)

    def _joins(self, inbound: Inbound) -> bool:
        """Whether `inbound` may join: what its own turn would be, run the same way."""
        return (
            inbound.user_id == self.head.user_id
            and self.policy.addressed(inbound)
            and len(inbound.text) <= self.policy.max_input_chars
        )

    async def _behind(self, accept: Callable[[Inbound], bool] = is_plain) -> list[Inbound]:
        try:
            return await self.claim.behind(accept=accept)
        except BusError as exc:
            log.warning("could not look for messages joining %s: %s", self.head.id, exc)
            return []

    async def _take_out(self, inbound: Inbound) -> None:
        try:
            await self.claim.done(inbound)
        except BusError as exc:
            # Marked processed already: the copy left in the mailbox is skipped when reached.
            log.warning("could not take joined message %s out of its mailbox: %s", inbound.id, exc)


def _typed(inbound: Inbound) -> bool:
    """A person's own message, whatever it says (not a command, a press, a schedule's run)."""
    return inbound.origin == "user" and inbound.kind == "message"
