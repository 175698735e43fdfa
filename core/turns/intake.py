"""`InboundHandler`: what a worker does with one `Inbound` once it is that session's turn.

The intake rules, in order: an answered message is skipped (dedupe); a scheduled run goes to
`ScheduledRuns`; the access `Gate` (`core/access.py`) decides the rest: a group message for
someone else is read, not answered; a stranger's DM under the pairing policy gets their
pairing code (the same one each time, within the rate limits), and nothing else; someone the
policy does not admit gets one polite refusal per chat; a command is answered from the
registry (`core/commands.py`) once it is within the rate limits; a message too long is
refused; a message over a rate limit (`core/ratelimit.py`) gets one notice per window, then
silence; anything else is a turn (`core/turns/turn.py`) under a mode fitted to its person,
checkpointed so a crash mid-turn can be recovered. In a chat an operator took over
(`core/store/takeovers.py`) a person's message is only stored, an admin's command still
answered.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Protocol, TypeVar

from core.access import REFUSAL_TEXT, Entry, Gate
from core.arrivals import BusyMode
from core.checkpoints import ABANDONED_TEXT, Checkpoint
from core.clock import utc_now
from core.commands import CommandContext, CommandRegistry
from core.envelopes import Inbound
from core.mailbox.base import Claim
from core.messages import Message
from core.outages import Patience, redis_outage
from core.policy import ChannelPolicy
from core.ratelimit import RateLimits, Tested
from core.runtime import AgentRuntime
from core.session_compaction import SessionCompaction
from core.session_reset import SessionReset
from core.stopping import NOT_YOURS, STOPPED
from core.store.base import Fence, SessionRecord, Store, TurnClose, TurnStanding
from core.store.log import new_session_id
from core.store.takeovers import chat_of
from core.turns.outbox import Outbox
from core.turns.scheduled import ScheduledRuns
from core.turns.steering import Pause, Steering
from core.turns.turn import Contexts, Outcome, Turn, TurnRunner

__all__ = ["REFUSAL_TEXT", "ExternalTurns", "InboundHandler"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

APOLOGY_TEXT = "Sorry, something went wrong on my side and I could not answer that message."


class ExternalTurns(Protocol):
    """Runs `Inbound(origin="external")` work (`core.notifications.external.ExternalRuns`)."""

    async def run(
        self, inbound: Inbound, *, cancel: asyncio.Event, fence: Fence | None
    ) -> None: ...


class InboundHandler:
    """Handles inbound work of any session; the worker makes sure one session at a time."""

    def __init__(
        self,
        *,
        store: Store,
        policy: ChannelPolicy,
        commands: CommandRegistry,
        contexts: Contexts,
        turns: TurnRunner,
        scheduled: ScheduledRuns,
        outbox: Outbox,
        gate: Gate,
        clock: Callable[[], datetime] = utc_now,
        rate_limits: RateLimits | None = None,
        external: ExternalTurns | None = None,
        patience: Patience | None = None,
        busy: BusyMode = "queue",
        busy_window: float = 1.5,
        pause: Pause = asyncio.sleep,
        session_reset: SessionReset | None = None,
    ) -> None:
        """`patience`: how the handler's own writes (the processed mark) wait out an outage of
        the store (the turn runner's, unless given). `busy`: what the person's messages that
        come while their turn runs do (`core/turns/steering.py`; `busy_window`: seconds
        "collect" waits from the first message's arrival, through `pause`). `session_reset`:
        when a person's conversation starts afresh by itself (`[sessions]`); None: only on
        `/new`."""
        self.busy = busy
        self.busy_window = busy_window
        self._pause = pause
        self.session_reset = session_reset
        self.patience = patience or turns.patience
        self.store = store
        self.policy = policy
        self.commands = commands
        self.contexts = contexts
        self.turns = turns
        self.scheduled = scheduled
        self.outbox = outbox
        self.gate = gate
        self._clock = clock
        self.rate_limits = rate_limits
        # Agent turns asked for from outside (`core/notifications/external.py`).
        self.external = external

    async def handle(
        self,
        inbound: Inbound,
        *,
        cancel: asyncio.Event,
        fence: Fence | None = None,
        claim: Claim | None = None,
    ) -> None:
        """Answer `inbound` unless it was answered before; mark it answered (the caller then
        takes it out of the session's queue: a repeat is skipped by the mark). `claim`: the
        session's, whose mailbox holds `inbound` as its head (messages behind it may join its
        turn, per `busy`)."""
        if inbound.origin != "user":
            if await self.store.is_processed(inbound.dedupe_key):
                log.info("skipping %s: already answered", inbound.dedupe_key)
                return
            if inbound.origin == "scheduled":
                await self.scheduled.run(inbound, cancel=cancel, fence=fence)
            elif self.external is None:
                log.error("no runner for external requests; dropped %s", inbound.id)
            else:
                await self.external.run(inbound, cancel=cancel, fence=fence)
            await self._close(inbound, fence)
            return
        # A person's message: its processed mark, checkpoint and session (one read), its
        # person's access and how it stands against the rate limits, asked for at once.
        standing, entry, tested = await asyncio.gather(
            self.store.turn_standing(
                inbound.dedupe_key, inbound.session_key, chat=chat_of(inbound.address)
            ),
            self.gate.entry(inbound),
            self._rate_test(inbound),
        )
        if standing.processed:
            log.info("skipping %s: already answered", inbound.dedupe_key)
            return
        if standing.takeover is not None and not (inbound.kind == "command" and entry.admin):
            # An operator answers here: no model call, no answer.
            await self._keep(inbound, standing, fence)
            return
        ran: tuple[Turn, Outcome] | None = None
        if entry.action == "ignore":
            pass  # a group message for someone else: read, not answered
        elif entry.action == "refuse":
            await self._refuse(inbound, entry.text)
        elif entry.action == "pair":
            # The code goes out again when asked for, within the rate limits.
            if await self._within_rate(inbound, tested):
                await self._pair(inbound)
        elif inbound.kind == "command":
            # Commands count against the person's and the chat's rates like messages do.
            if await self._within_rate(inbound, None if entry.admin else tested):
                await self._command(inbound, entry, fence)
        else:
            ran = await self._turn(inbound, entry, standing, tested, cancel, fence, claim)
        await self._close(inbound, fence)
        if ran is not None:
            await self.turns.settled(*ran)

    async def _close(self, inbound: Inbound, fence: Fence | None) -> None:
        """The message's last write: its processed mark, its turn's checkpoint (if it has one)
        marked completed."""
        closing = TurnClose(finished=inbound.dedupe_key)
        await self.patience(lambda: self.store.close_turn(closing, fence=fence))

    async def _keep(self, inbound: Inbound, standing: TurnStanding, fence: Fence | None) -> None:
        """A message in a taken-over chat: stored in its conversation and marked processed,
        together (`TakeoverRecords.keep_message`)."""
        session_id = new_session_id() if standing.session is None else standing.session.id
        message = Message.user(
            inbound.model_text, inbound.images, source=inbound.dedupe_key, author=inbound.author
        )
        log.info("kept %s: %s is taken over", inbound.dedupe_key, chat_of(inbound.address))
        await self.patience(
            lambda: self.store.keep_message(
                inbound.session_key, session_id, message, finished=inbound.dedupe_key, fence=fence
            )
        )

    async def stop(self, turn: Inbound, request: Inbound, cancel: asyncio.Event) -> None:
        """Stop the running turn answering `turn` (`cancel` is its event), as `request` asks,
        if its person may: the one whose turn it is, or an admin (`core/stopping.py`).

        The request is marked processed first, so its copy in the session's mailbox, reached
        once the turn has ended, is skipped instead of answered "nothing to stop". A typed
        `/stop` is answered; a button's press is not (the stopped answer says it).
        """
        mine = bool(request.user_id) and request.user_id == turn.user_id
        allowed = mine or (await self.gate.entry(request)).admin
        await self.patience(lambda: self.store.mark_processed(request.dedupe_key))
        if not allowed:
            log.info("refused a stop of %s by user %s", turn.session_key, request.user_id)
            await self.outbox.send(request, "notice", NOT_YOURS)
            return
        log.info("stopping the turn of %s at user %s's request", turn.session_key, request.user_id)
        cancel.set()
        if request.kind == "command":
            await self.outbox.send(request, "notice", STOPPED)

    async def apologize(self, inbound: Inbound) -> None:
        """Tell the user their message could not be handled (after repeated failures)."""
        await self.outbox.send(inbound, "reply", APOLOGY_TEXT, failed=True)
        # The user was told: a restart must not take the turn up again.
        await self.store.finish_checkpoint(inbound.dedupe_key, "abandoned")

    async def abandon(self, inbound: Inbound) -> None:
        """Give up a turn a crash cut off: tell the user once, then mark it abandoned."""
        await self.outbox.send(inbound, "notice", ABANDONED_TEXT, failed=True)
        await self.store.finish_checkpoint(inbound.dedupe_key, "abandoned")

    async def _refuse(self, inbound: Inbound, text: str = REFUSAL_TEXT) -> None:
        address = inbound.address
        log.info("refused %s user %s in %s", address.platform, inbound.user_id, address.chat)
        # One polite refusal per chat; after that, silence (no noise in a busy group).
        first = await self.store.mark_processed(
            f"refused:{address.platform}:{address.bot}:{address.chat}"
        )
        if first:
            await self.outbox.send(inbound, "notice", text)

    async def _pair(self, inbound: Inbound) -> None:
        """A stranger's DM under the pairing policy: their code, no model call, no turn."""
        reply = await self.gate.pairing.request(inbound)
        if reply.text is not None:  # None: their request was denied
            await self.outbox.send(inbound, "notice", reply.text)

    async def _command(self, inbound: Inbound, entry: Entry, fence: Fence | None) -> None:
        word = (inbound.command or "").lower()
        is_admin = entry.admin
        command = self.commands.find(word)
        if command is None:
            text = self.commands.unknown_text(word, admin=is_admin)
        elif command.info.admin_only and not is_admin:
            text = f"Only an admin of this bot can use /{command.info.name}."
        else:
            context = CommandContext(
                inbound=inbound,
                args=_arguments(inbound.text),
                is_admin=is_admin,
                store=self.store,
                registry=self.commands,
                models=self.turns.runtime.models,
                budgets=self.turns.runtime.budgets,
                confirm=self.turns.runtime.confirm,
                rate_limits=self.rate_limits,
                fence=fence,
                compaction=_compaction(self.turns.runtime),
            )
            text = await command.handler(context)
        await self.outbox.send(inbound, "notice", text)

    async def _turn(
        self,
        inbound: Inbound,
        entry: Entry,
        standing: TurnStanding,
        tested: Tested | None,
        cancel: asyncio.Event,
        fence: Fence | None,
        claim: Claim | None = None,
    ) -> tuple[Turn, Outcome] | None:
        """Run a turn answering `inbound`, as the message stands (`standing.checkpoint`: a
        resumed turn's, from before a crash) and once the rate limits let it. The turn and its
        outcome, if it ran to one."""
        if not inbound.text.strip() and not inbound.images and not inbound.documents:
            return None
        limit = self.policy.max_input_chars
        if len(inbound.text) > limit:
            await self.outbox.send(
                inbound,
                "notice",
                f"That message is too long ({len(inbound.text):,} characters; the limit is "
                f"{limit:,}). Please send a shorter one.",
            )
            return None
        found = standing.checkpoint
        if found is not None and found.status == "abandoned":
            log.info("skipping %s: abandoned after a restart", inbound.dedupe_key)
            return None  # the user was told to send it again
        # Counted before the turn opens (its checkpoint saved with it): a turn resumed from
        # its checkpoint was counted when it first came. Admins are not limited.
        counted_before = found is not None and found.counted
        if not await self._within_rate(inbound, None if entry.admin or counted_before else tested):
            return None
        session = standing.session
        if session is not None and found is None and self._reset_due(session):
            # As `/new` does: a new current session, the old one kept.
            key = inbound.session_key
            session = await self.patience(lambda: self.store.create_session(key))
            log.info("%s was idle past its reset: a new session %s", key, session.id)
        # A conversation's first turn makes its session under this id as the turn opens.
        session_id = new_session_id() if session is None else session.id
        turn = Turn(
            inbound=inbound,
            context=self.gate.shape(self.contexts.for_message(inbound), inbound, entry),
            session_id=session_id,
            checkpoint=self._checkpoint(inbound, session_id, found),
            model=None if session is None else session.model,
            arrivals=self._steering(inbound, claim),
        )
        outcome = await self.turns.run(turn, cancel=cancel, fence=fence)
        return None if outcome is None else (turn, outcome)

    def _reset_due(self, session: SessionRecord) -> bool:
        """Whether `session` is over by `[sessions] reset_idle` / `reset_at`."""
        reset = self.session_reset
        return reset is not None and reset.due(session.updated_at, self._clock())

    def _steering(self, inbound: Inbound, claim: Claim | None) -> Steering | None:
        """Where the messages joining `inbound`'s turn come from, and an `ask_user` answer
        (with `busy = "queue"` none joins, each waits its turn); None without a claim."""
        if claim is None:
            return None
        return Steering(
            claim=claim,
            head=inbound,
            marks=self.store,
            policy=self.policy,
            mode=self.busy,
            window=self.busy_window,
            patience=self.patience,
            clock=self._clock,
            pause=self._pause,
        )

    async def _rate_test(self, inbound: Inbound) -> Tested | None:
        """How a person's message stands against the rate limits (None: nothing to test)."""
        if (
            self.rate_limits is None
            or not self.policy.addressed(inbound)  # read, not answered: nothing to count
        ):
            return None
        is_admin = self.policy.is_admin(inbound.address.platform, inbound.user_id)
        return await _counters(self.rate_limits.test(inbound, is_admin=is_admin))

    async def _within_rate(self, inbound: Inbound, tested: Tested | None) -> bool:
        """Whether the rate limits let this message be answered (a turn, a command or a
        pairing code; `tested`: how it stood); the notice, if due, is sent. Counts it."""
        limits = self.rate_limits
        if limits is None or tested is None:
            return True
        allowed, notice = await self.patience(lambda: _counters(limits.settle(tested)))
        if notice is not None:
            await self.outbox.send(inbound, "notice", notice)
        return allowed

    def _checkpoint(
        self, inbound: Inbound, session_id: str, found: Checkpoint | None
    ) -> Checkpoint:
        """The turn's `running` checkpoint, to be saved (`found` is the one kept from before a
        crash, when the turn is resumed)."""
        now = self._clock()
        if found is None or found.session_id != session_id:
            found = Checkpoint(
                run_key=inbound.dedupe_key,
                session_id=session_id,
                inbound=inbound,
                started_at=now,
                updated_at=now,
            )
        return found.model_copy(update={"status": "running", "updated_at": now})


def _compaction(runtime: AgentRuntime) -> SessionCompaction | None:
    """`/compact` through the runtime's compactor; None when it has none."""
    if runtime.compactor is None:
        return None
    return SessionCompaction(
        runtime.store,
        runtime.compactor,
        window_tokens=runtime.context_window,
        spending=runtime.spending,
        models=runtime.models,
        consolidator=runtime.consolidator,
    )


def _arguments(text: str) -> str:
    """What follows the command word in a command's text (`/approve ABC` -> `ABC`)."""
    text = text.strip()
    if text.startswith("/"):
        parts = text.split(maxsplit=1)
        text = parts[1] if len(parts) > 1 else ""
    return text.strip()


async def _counters(counting: Awaitable[_T]) -> _T:
    """The rate limits' `counting`, a Redis outage raised as the outage it is (their counters
    raise the client's errors as they are): waited out like the store's."""
    try:
        return await counting
    except Exception as exc:
        outage = redis_outage(exc)
        if outage is None:
            raise
        raise outage from exc
