"""`InboundHandler`: what a worker does with one `Inbound` once it is that session's turn.

The intake rules, in order: an answered message is skipped (dedupe); a scheduled run goes to
`ScheduledRuns`; the access `Gate` (`core/access.py`) decides the rest: a group message for
someone else is read, not answered; a stranger's DM under the pairing policy gets their
pairing code (the same one each time, within the rate limits), and nothing else; someone the
policy does not admit gets one polite refusal per chat; a command is answered from the
registry (`core/commands.py`) once it is within the rate limits; a message too long is
refused; a message over a rate limit (`core/ratelimit.py`) gets one notice per window, then
silence; anything else is a turn (`core/turns/turn.py`) under a mode fitted to its person,
checkpointed so a crash mid-turn can be recovered.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Protocol, TypeVar

from core.access import REFUSAL_TEXT, Entry, Gate
from core.checkpoints import ABANDONED_TEXT, Checkpoint
from core.clock import utc_now
from core.commands import CommandContext, CommandRegistry
from core.envelopes import Inbound
from core.outages import Patience, redis_outage
from core.policy import ChannelPolicy
from core.ratelimit import RateLimits, Tested
from core.stopping import NOT_YOURS, STOPPED
from core.store.base import Fence, SessionRecord, Store
from core.store.log import new_session_id
from core.turns.outbox import Outbox
from core.turns.scheduled import ScheduledRuns
from core.turns.turn import Contexts, TurnRunner

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
    ) -> None:
        """`patience`: how the turn's own writes (its checkpoint, its session, its processed
        mark) wait out an outage of the store (the turn runner's, unless given)."""
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
        done: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Answer `inbound` unless it was answered before; mark it answered.

        `done` is the caller's own last write for the message (the worker's: taking it out of
        its mailbox). When given, it is made together with the processed mark; the caller
        sees whether it was by its own bookkeeping.
        """
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
            await self._settle(inbound, done)
            return
        # A person's message: the reads it needs are independent, so they are asked for at
        # once: its processed mark,
        # its person's access, its checkpoint, and (for what may become a turn) how it stands
        # against the rate limits and its session (looked up only: a stranger's message
        # makes none).
        processed, entry, found, tested, session = await asyncio.gather(
            self.store.is_processed(inbound.dedupe_key),
            self.gate.entry(inbound),
            self.store.get_checkpoint(inbound.dedupe_key),
            self._rate_test(inbound),
            self._session_of(inbound),
        )
        if processed:
            log.info("skipping %s: already answered", inbound.dedupe_key)
            return
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
                await self._command(inbound, entry)
        else:
            finished = await self._turn(inbound, entry, cancel, fence, found, tested, session)
            await self._settle(inbound, done, finished)
            return
        await self._settle(inbound, done)

    async def _settle(
        self,
        inbound: Inbound,
        done: Callable[[], Awaitable[None]] | None,
        finished: str | None = None,
    ) -> None:
        """The message's last writes, issued at once: its turn's checkpoint marked completed
        (`finished`: its run key), its processed mark, and the caller's `done`."""
        writes: list[Awaitable[object]] = []
        if finished is not None:
            writes.append(
                self.patience(lambda: self.store.finish_checkpoint(finished, "completed"))
            )
        writes.append(self.patience(lambda: self.store.mark_processed(inbound.dedupe_key)))
        if done is not None:
            writes.append(done())
        await asyncio.gather(*writes)

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

    async def _command(self, inbound: Inbound, entry: Entry) -> None:
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
            )
            text = await command.handler(context)
        await self.outbox.send(inbound, "notice", text)

    async def _turn(
        self,
        inbound: Inbound,
        entry: Entry,
        cancel: asyncio.Event,
        fence: Fence | None,
        found: Checkpoint | None,
        tested: Tested | None,
        session: SessionRecord | None,
    ) -> str | None:
        """Run a turn; `found` is the message's checkpoint from before (a resumed turn's),
        `session` its session as looked up with it (None: it has none yet).

        Returns the run key of the turn's checkpoint when it is for the caller to finish (the
        turn came to its end, or the rate limits stopped it), else None.
        """
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
        if found is not None and found.status == "abandoned":
            log.info("skipping %s: abandoned after a restart", inbound.dedupe_key)
            return None  # the user was told to send it again
        # A conversation's first turn makes its session under an id chosen here, with the
        # checkpoint's save.
        session_id = new_session_id() if session is None else session.id
        context = self.gate.shape(self.contexts.for_message(inbound), inbound, entry)
        checkpoint = self._checkpoint(inbound, session_id, found)
        # The message is counted against the rate limits and the checkpoint written while the
        # turn reads its history; the turn goes on only if the count lets it, and only once
        # the checkpoint is saved (both in `admitted`, awaited before the turn writes or
        # calls anything): a crash later in the turn leaves a checkpoint for the recovery
        # sweep. (Nothing else orders the save before the turn's own writes: each store call
        # is a transaction on a connection of its own.)
        # Typing shows as the turn starts its steps. A turn resumed after a crash was
        # admitted when it first came (unless its checkpoint says the count may not have been
        # made); admins (the profile's, and people approved as admins) are not limited.
        counted_before = found is not None and found.counted
        limited = None if entry.admin or counted_before else tested
        first = checkpoint if limited is None else checkpoint.model_copy(update={"counted": False})
        making = (
            None
            if session is not None
            else asyncio.ensure_future(
                self.patience(
                    lambda: self.store.current_session(inbound.session_key, new_id=session_id)
                )
            )
        )
        saved = asyncio.ensure_future(self.patience(lambda: self.store.save_checkpoint(first)))
        counting = asyncio.ensure_future(self._within_rate(inbound, limited))
        failed: list[Exception] = []
        # The key's session, when another writer made it after the look-up (not the one
        # made under `session_id`): the turn runs again, in it.
        elsewhere: list[SessionRecord] = []

        async def admit() -> bool:
            try:
                admitted = await counting
                if making is not None and (made := await making).id != session_id:
                    elsewhere.append(made)
                    return False  # nothing was written under the chosen id
                if admitted:
                    await saved
                return admitted
            except Exception as exc:  # raised below, once the runtime has let the turn go
                failed.append(exc)
                return False

        admitting = asyncio.ensure_future(admit())
        try:
            outcome = await self.turns.run(
                inbound,
                context,
                session_id,
                cancel=cancel,
                fence=fence,
                checkpoint=checkpoint,
                shown=True,
                finish=False,
                admitted=admitting,
                typing=True,
                model=session.model if session is not None else None,
            )
        except BaseException:
            await _settled(saved, counting, admitting, making, cancel=True)
            raise
        await _settled(saved, counting, admitting, making)
        if failed:
            raise failed[0]
        if elsewhere and counting.result() and outcome is None:
            # Counted already: the turn in the key's session is not counted again. (A turn
            # cancelled meanwhile has its outcome, and said so: it is not run again.)
            return await self._turn(inbound, entry, cancel, fence, None, None, elsewhere[0])
        if not admitting.result():
            saved.result()  # its error, if any, is the message's
            return checkpoint.run_key  # stopped by the rate limits: finished with the message
        return checkpoint.run_key if outcome is not None else None

    async def _session_of(self, inbound: Inbound) -> SessionRecord | None:
        """The session a message that may become a turn goes to, if it has one yet."""
        if inbound.kind == "command" or not self.policy.addressed(inbound):
            return None
        return await self.store.find_current_session(inbound.session_key)

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


async def _settled(*tasks: asyncio.Future[Any] | None, cancel: bool = False) -> None:
    """Wait for the tasks that were given (cancelled first with `cancel`); their errors are
    read by whoever asks for their results."""
    running = [task for task in tasks if task is not None]
    if cancel:
        for task in running:
            task.cancel()
    await asyncio.gather(*running, return_exceptions=True)
