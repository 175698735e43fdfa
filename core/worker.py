"""`Worker`: claims sessions with waiting work and runs each session's turns in order.

Producers put work straight into its session's mailbox (`core/mailbox/intake.py`), which
wakes one idle worker. The worker that claims the session (a lease, across processes in the
distributed deployment) runs the mailbox's work one item at a time; sessions run concurrently
up to `concurrency`. A sweep finds mailboxes whose worker died, or whose wake was lost, and
carries on with them, so nothing put in a mailbox is lost; the store's processed marks keep an
item handled twice from being answered twice. Cancels, `/stop` and confirmation answers reach
the worker running the session on the `control` topic.

At start-up a worker given an `on_crash` policy looks for turns a crash cut off (their
checkpoints are still `running`, `core/checkpoints.py`) and resumes or abandons them.

While the bus or the mailboxes are unreachable (Redis restarting) every loop (wakes, claims,
drain, sweep, the control listener) keeps trying with backoff and marks itself down
in the process's `Readiness`, and carries on when Redis answers again. A turn waits out such
an outage itself (`core/outages.py`); one that outlasts the turn's patience, or a write
refused because the data disk is full (reads still work then), leaves its message in the
mailbox: it is tried again with backoff, not counted towards `attempts`, never given up.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine
from datetime import timedelta
from typing import Any, TypeVar

from opentelemetry.trace import SpanKind, StatusCode

from core.bus.base import Bus, Subscription
from core.bus.names import CONTROL
from core.checkpoints import Checkpoint, CrashPolicy
from core.clock import utc_now
from core.confirm import Confirmations
from core.consolidation import QuietConsolidation
from core.envelopes import Inbound, new_id
from core.errors import BusError, StoreError, Unavailable
from core.fencing import FenceOvertaken
from core.logcontext import log_context
from core.mailbox.base import Claim, Mailboxes
from core.readiness import Readiness, keep_trying
from core.stopping import is_stop
from core.store.base import Store
from core.takeover import Takeovers
from core.tasks import cancel_and_wait
from core.tracing import handed_over, span
from core.turns.intake import InboundHandler

__all__ = ["Worker"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

# The longest wait before a message whose turn met an outage is tried again.
_LONGEST_OUTAGE_WAIT = 10.0
# How long one wait for a wake lasts; the loop is marked up again only when one returns. Short:
# after a Redis restart, waits of 5 s were seen to go unanswered again and again (redis-py 5,
# Redis 7.0), waits of 4 s and less not.
_WAKE_WAIT = 2.0
# How often the quiet-period memory pass looks for conversations gone quiet: its periods are
# minutes long (`[memory] consolidate_after`).
_QUIET_EVERY = 60.0


class Worker:
    """Works the sessions' mailboxes and answers on `outbound.<platform>`."""

    def __init__(
        self,
        *,
        bus: Bus,
        store: Store,
        mailboxes: Mailboxes,
        handler: InboundHandler,
        confirmations: Confirmations | None,
        on_crash: CrashPolicy | None,
        readiness: Readiness,
        name: str | None = None,
        concurrency: int = 8,
        sweep_interval: float = 5.0,
        attempts: int = 3,
        crash_age: timedelta = timedelta(0),
        takeovers: Takeovers | None = None,
        quiet: QuietConsolidation | None = None,
    ) -> None:
        """`handler` answers each item; `mailboxes` order each session's work.

        `confirmations` is the gate the runtime's `confirm` asks through (None: nothing asks);
        its answers are heard on the `control` topic (their mailbox copies are then skipped).
        `on_crash` (None: leave them be) is what `run` does with turns a crash cut off whose
        checkpoint has not moved for `crash_age` (zero when no other process runs turns).
        `readiness` is the process's: the worker's loops report to it. `takeovers`: the
        sweep also ends takeovers past their time (`core/takeover.py`). `quiet`: the sweep
        also consolidates the memory of conversations gone quiet (`core/consolidation.py`).
        """
        self.takeovers = takeovers
        self.quiet = quiet
        self.readiness = readiness
        self.on_crash = on_crash
        self._crash_age = crash_age
        self.bus = bus
        self.confirmations = confirmations
        self.store = store
        self.mailboxes = mailboxes
        self.handler = handler
        self.name = name or f"worker-{new_id()[:8]}"
        self._slots = asyncio.Semaphore(concurrency)
        self._sweep_interval = sweep_interval
        self._attempts = attempts
        # Sessions this worker drains, each with the marker of its drain (a drain whose
        # claim is given up may still be winding down when the next one starts).
        self._draining: dict[str, object] = {}
        # Sessions woken while being drained: looked at again once their drain ends, unless
        # the drain read their mailbox (a claim, a `done`) after the wake. Work put after a
        # `done` that emptied the box and released the claim with it would otherwise wait
        # for the sweep.
        self._again: set[str] = set()
        # The item each session's drain handles now, with the event that cancels its turn.
        self._running: dict[str, tuple[Inbound, asyncio.Event]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = asyncio.Event()
        self._runner: asyncio.Task[Any] | None = None
        # The control subscription (made again when Redis drops it for good).
        self._control: Subscription | None = None
        self._receiving = False
        self.idle = asyncio.Event()
        self.idle.set()

    async def run(self) -> None:
        """Take work until `stop()` is called."""
        self._runner = asyncio.current_task()
        control = self._control = await self.bus.subscribe(CONTROL)
        if self.on_crash is not None:
            await self.recover(self.on_crash)
        helpers = [
            asyncio.create_task(self._listen(control), name=f"{self.name}-control"),
            asyncio.create_task(self._sweep_forever(), name=f"{self.name}-sweep"),
        ]
        if self.quiet is not None:
            helpers.append(
                asyncio.create_task(
                    self._consolidate_forever(self.quiet), name=f"{self.name}-memory"
                )
            )
        try:
            await self._take_wakes()
        finally:
            for task in helpers:
                await cancel_and_wait(task)
            if self._control is not None:
                with contextlib.suppress(Exception):
                    await self._control.aclose()

    async def recover(self, policy: CrashPolicy) -> None:
        """Resume or abandon every turn a crash cut off (see `crash_age`)."""
        cutoff = utc_now() - self._crash_age if self._crash_age else None
        try:
            found = await self.store.incomplete_checkpoints(older_than=cutoff)
        except StoreError as exc:
            log.warning("could not look for turns cut off by a crash: %s", exc)
            return
        for checkpoint in found:
            try:
                await self._recover(checkpoint, policy)
            except (StoreError, BusError) as exc:
                log.warning("could not recover turn %s: %s", checkpoint.run_key, exc)

    async def _recover(self, checkpoint: Checkpoint, policy: CrashPolicy) -> None:
        inbound = checkpoint.inbound
        if await self.store.is_processed(checkpoint.run_key):
            # Answered; only the checkpoint's last write was lost.
            await self.store.finish_checkpoint(checkpoint.run_key, "completed")
        elif policy == "resume":
            log.info("resuming turn %s cut off by a crash", checkpoint.run_key)
            await self.mailboxes.put(inbound)
            self._wake(inbound.session_key)
        else:
            log.info("abandoning turn %s cut off by a crash", checkpoint.run_key)
            await self.handler.abandon(inbound)

    async def stop(self, grace: float = 10.0) -> None:
        """Stop taking work; let running turns finish for up to `grace` seconds.

        Work not finished by then stays in its mailbox for the next worker (or the next start).
        """
        self._stopping.set()
        if self._runner is not None and self._receiving:
            self._runner.cancel()
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=grace)
            for task in pending:
                task.cancel()
            for task in pending:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _take_wakes(self) -> None:
        """Wait for wakes (work put in a mailbox) while a slot is free; claim each woken
        session with that slot and drain it."""
        while not self._stopping.is_set():
            # Set while waiting for a slot as well: stop() must interrupt that wait too, or the
            # worker would claim one more session once a stopped turn frees its slot.
            self._receiving = True
            try:
                await self._slots.acquire()
                try:
                    session_key = await keep_trying(
                        self.readiness,
                        "worker wakes",
                        lambda: self.mailboxes.woken(_WAKE_WAIT),
                        stopping=self._stopping,
                    )
                except BaseException:
                    self._slots.release()
                    raise
            except asyncio.CancelledError:
                if not self._stopping.is_set():
                    raise
                # stop() interrupted the wait; a wake taken meanwhile is the sweep's to find.
                if self._runner is not None:
                    self._runner.uncancel()
                return
            except BusError:
                return  # stopping while the mailboxes are away
            finally:
                self._receiving = False
            if session_key is None:
                self._slots.release()
            else:
                self._spawn(self._take(session_key))

    async def _take(self, session_key: str) -> None:
        """Claim a woken session with the slot taken for it, and drain it.

        A claim refused means the session is held (by another worker, or by a drain of this
        one): its holder reads the mailbox again at its next `done` or release, after the put
        that woke this worker.
        """
        if self._stopping.is_set():
            self._slots.release()
            return
        self._again.discard(session_key)  # the claim reads the mailbox's head
        try:
            claim = await self._patiently(
                "worker claims", lambda: self.mailboxes.claim(session_key, owner=self.name)
            )
        except BusError as exc:
            self._slots.release()
            log.warning("could not claim %s (%s); the sweep will try again", session_key, exc)
            return
        except BaseException:
            self._slots.release()
            raise
        if claim is None:
            self._slots.release()
            return
        # A drain of this worker may still be winding down (its claim given up with its last
        # `done`, the answer not read yet): this one takes its place.
        marker = self._draining[session_key] = object()
        await self._drain(session_key, marker, claimed=claim)

    async def _patiently(self, name: str, operation: Callable[[], Awaitable[_T]]) -> _T:
        """`operation()`, tried again while the bus or the store is away (until `stop()`)."""
        return await keep_trying(self.readiness, name, operation, stopping=self._stopping)

    def _wake(self, session_key: str) -> None:
        """Drain the session's mailbox unless this worker does already (or is stopping)."""
        if self._stopping.is_set():
            return
        if session_key in self._draining:
            self._again.add(session_key)
            return
        marker = self._draining[session_key] = object()
        self._spawn(self._drain(session_key, marker))

    def _let_go(self, session_key: str, marker: object) -> None:
        """The drain `marker` no longer reads the session's mailbox: a wake starts another."""
        if self._draining.get(session_key) is marker:
            del self._draining[session_key]

    async def _drain(self, session_key: str, marker: object, claimed: Claim | None = None) -> None:
        """Claim a session and run its waiting work, oldest first.

        `claimed`: the caller took a slot and the session's claim already; the slot is
        released here.
        """
        more = False
        try:
            if claimed is None:
                await self._slots.acquire()
            try:
                claim = claimed
                if claim is None:
                    if self._stopping.is_set():
                        return
                    self._again.discard(session_key)  # the claim reads the mailbox's head
                    claim = await self._patiently(
                        "worker drain",
                        lambda: self.mailboxes.claim(session_key, owner=self.name),
                    )
                if claim is None:
                    return  # another worker runs this session
                try:
                    await self._drain_claimed(claim, marker)
                finally:
                    more = await self._release(claim)
            finally:
                self._slots.release()
        except (BusError, StoreError) as exc:
            log.warning("could not drain %s (%s); the sweep will try again", session_key, exc)
        finally:
            self._let_go(session_key, marker)
        if session_key in self._again:
            self._again.discard(session_key)
            more = True
        if more:
            self._wake(session_key)

    async def _release(self, claim: Claim) -> bool:
        try:
            return await self._patiently("worker drain", claim.release)
        except BusError as exc:
            log.warning("could not release %s (%s); its lease will lapse", claim.session_key, exc)
            return False

    async def _drain_claimed(self, claim: Claim, marker: object) -> None:
        failures = 0
        outages = 0
        # A claim given up by its last `done` reads the mailbox no more: what came since is
        # another drain's.
        while not self._stopping.is_set() and not claim.lost.is_set() and not claim.released:
            inbound = await self._patiently("worker drain", claim.head)
            if inbound is None:
                return
            # The trace its producer began goes on here (`core/tracing.py`).
            with span(
                "mailbox claim",
                kind=SpanKind.CONSUMER,
                parent=handed_over(inbound.traceparent),
                attributes={"switchboard.platform": inbound.address.platform},
            ) as handling:
                error = await self._handle(inbound, claim)
                if error is not None:
                    handling.set_status(StatusCode.ERROR, type(error).__name__)
            if error is None:
                failures = outages = 0
            elif isinstance(error, Unavailable):
                # The store or the bus is away (a write refused on a full disk: reads work):
                # not the item at fault. Kept, tried again once they answer, uncounted.
                outages += 1
                await self._outage(inbound, claim)
                await self._pause(min(_LONGEST_OUTAGE_WAIT, 0.25 * 2**outages))
                continue
            elif isinstance(error, (BusError, StoreError)) and await self._outage(inbound, claim):
                continue  # Redis was away, not the item at fault: try it again, uncounted
            elif claim.lost.is_set():
                return  # the session's next holder answers it; no apology from here
            else:
                failures += 1
                if failures < self._attempts:
                    await asyncio.sleep(min(10.0, 0.5 * 2**failures))
                    continue
                log.error("giving up on inbound %s after %d attempts", inbound.id, failures)
                with contextlib.suppress(Exception):
                    await self.handler.apologize(inbound)
                failures = 0
            if claim.lost.is_set():
                return
            # Taken out once handled: its processed mark makes a repeat after a crash harmless.
            await self._patiently(
                "worker drain", functools.partial(self._done, claim, inbound, marker)
            )

    async def _pause(self, seconds: float) -> None:
        """Wait `seconds`, or less if the worker is told to stop meanwhile."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    async def _done(self, claim: Claim, inbound: Inbound, marker: object) -> None:
        """`claim.done(inbound)`. It reads what the mailbox holds next (and may release the
        claim when nothing is left), so wakes of the session before it are answered by it.
        A claim given up with it ends the drain's reading: work that comes while the drain
        winds down is claimed by a drain of its own at once (its wake)."""
        self._again.discard(claim.session_key)
        await claim.done(inbound)
        if claim.released:
            self._let_go(claim.session_key, marker)

    async def _outage(self, inbound: Inbound, claim: Claim) -> bool:
        """Whether the store or the mailboxes are unreachable now; if so, wait until they
        answer again (marked down meanwhile)."""
        waited = False

        async def probe() -> None:
            nonlocal waited
            try:
                await self.store.is_processed(inbound.dedupe_key)
                await claim.head()
            except (BusError, StoreError):
                waited = True
                raise

        await self._patiently("worker drain", probe)
        return waited

    async def _handle(self, inbound: Inbound, claim: Claim) -> Exception | None:
        """Handle one item; the error when it failed and should be tried again.

        A lost claim stops the turn by cancelling it, not through `cancel`: a worker that no
        longer holds the session must send nothing more (a "Cancelled." notice would take the
        place of the answer the next holder gives).
        """
        key = inbound.session_key
        cancel = asyncio.Event()
        self._running[key] = (inbound, cancel)
        # Every line logged while it is handled names its platform and session.
        with log_context(platform=inbound.address.platform, session=key):
            turn = asyncio.create_task(
                self.handler.handle(inbound, cancel=cancel, fence=claim.fence, claim=claim)
            )
        lost = asyncio.create_task(claim.lost.wait())
        try:
            await asyncio.wait({turn, lost}, return_when=asyncio.FIRST_COMPLETED)
            if not turn.done():
                log.warning("stopped the turn of %s: its claim was lost", inbound.dedupe_key)
                with contextlib.suppress(Exception):
                    await cancel_and_wait(turn)
                return None
            turn.result()
        except FenceOvertaken:
            log.warning("stopped the turn of %s: its claim was overtaken", inbound.dedupe_key)
            claim.lost.set()
            return None
        except asyncio.CancelledError:
            raise
        except Unavailable as exc:
            # The outage was logged when it began (`core/outages.py`, the loops' readiness).
            log.debug("inbound %s waits for the store or the bus: %s", inbound.id, exc)
            return exc
        except Exception as exc:
            log.exception("could not handle inbound %s", inbound.id)
            return exc
        finally:
            for task in (lost, turn):
                if not task.done():
                    with contextlib.suppress(Exception):
                        await cancel_and_wait(task)
            if (running := self._running.get(key)) is not None and running[1] is cancel:
                del self._running[key]
        return None

    async def _listen(self, control: Subscription) -> None:
        """Pass cancels and confirmation answers on; subscribe again if the subscription is lost."""
        while True:
            try:
                async for envelope in control:
                    if isinstance(envelope, Inbound) and is_stop(envelope):
                        # A task: the checks and writes must not hold up other chats' stops
                        # and answers.
                        self._spawn(self._stop(envelope))
                    elif isinstance(envelope, Inbound) and self.confirmations is not None:
                        await self.confirmations.answer(envelope)
                return  # the bus closed
            except BusError as exc:
                self.readiness.down("worker control", str(exc))
            with contextlib.suppress(Exception):
                await control.aclose()
            control = await keep_trying(
                self.readiness, "worker control", lambda: self.bus.subscribe(CONTROL)
            )
            self._control = control

    async def _stop(self, request: Inbound) -> None:
        """Stop the turn this worker runs in `request`'s chat, if it runs one and the person
        may (an item that is not a turn, such as a command, is left be)."""
        running = self._running.get(request.session_key)
        if running is None or running[0].kind != "message":
            return
        turn, cancel = running
        try:
            await self.handler.stop(turn, request, cancel)
        except Exception as exc:
            log.warning("could not stop the turn of %s: %s", request.session_key, exc)

    async def _sweep_forever(self) -> None:
        """Pick up mailboxes nobody drains (their worker died, or a hand-off raced)."""
        while True:
            for session_key in await keep_trying(
                self.readiness, "worker sweep", self.mailboxes.pending
            ):
                self._wake(session_key)
            if self.takeovers is not None:
                await keep_trying(self.readiness, "takeover expiry", self.takeovers.expire)
            await asyncio.sleep(self._sweep_interval)

    async def _consolidate_forever(self, quiet: QuietConsolidation) -> None:
        """The sweep's memory part, in a loop of its own: a model call must not hold up the
        sweep of mailboxes nobody drains."""
        while True:
            await keep_trying(self.readiness, "memory consolidation", quiet.tick_once)
            await asyncio.sleep(_QUIET_EVERY)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        self.idle.clear()
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not self._tasks:
            self.idle.set()
