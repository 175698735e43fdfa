"""The worker: takes `Inbound` work off the bus and runs turns, one at a time per session.

Messages of one session wait in a lane and run in arrival order; different sessions run
concurrently up to `concurrency`. A delivery is acked only after its answer is on the outbound
queue and the message is marked processed, so a crash makes the bus give the work again and
the processed mark keeps a redelivered message from being answered twice.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from core.bus.base import Bus, Delivery
from core.bus.names import EVENTS, INBOUND, outbound_queue
from core.envelopes import EventEnvelope, Inbound, Outbound, OutboundKind, new_id
from core.errors import BusError
from core.events import (
    LIFECYCLE_NAMES,
    AgentEvent,
    Cancelled,
    RunCompleted,
    RunFailed,
    RunStarted,
    TextDelta,
    ToolRequested,
)
from core.messages import Message
from core.modes import ModeCatalog
from core.policy import ChannelPolicy
from core.pricing import format_usd
from core.runtime import AgentRuntime, ChannelContext
from core.store.base import Store

__all__ = ["HELP_TEXT", "REFUSAL_TEXT", "Worker"]

log = logging.getLogger(__name__)

HELP_TEXT = (
    "Talk to me in plain words. Commands: /new starts a fresh conversation, "
    "/cost shows what this conversation has used, /help shows this message."
)


REFUSAL_TEXT = "Sorry, this bot only answers the people it was set up for."


@dataclass
class _Lane:
    """The waiting messages of one session and the cancel switch of its running turn."""

    key: str
    waiting: collections.deque[tuple[Delivery, Inbound]] = field(default_factory=collections.deque)
    cancel: asyncio.Event | None = None
    running_id: str | None = None


class Worker:
    """Consumes the `inbound` queue and answers on `outbound.<platform>`."""

    def __init__(
        self,
        *,
        bus: Bus,
        store: Store,
        runtime: AgentRuntime,
        modes: ModeCatalog | None = None,
        policy: ChannelPolicy | None = None,
        prompt_hints: Mapping[str, str] | None = None,
        name: str | None = None,
        concurrency: int = 8,
        stream_interval: float = 0.05,
    ) -> None:
        self.bus = bus
        self.store = store
        self.runtime = runtime
        self.modes = modes or ModeCatalog()
        self.policy = policy or ChannelPolicy()
        self.prompt_hints = dict(prompt_hints or {})
        self.name = name or f"worker-{new_id()[:8]}"
        self._slots = asyncio.Semaphore(concurrency)
        # Bounds how much work is taken off the queue before it can run.
        self._intake = asyncio.Semaphore(concurrency * 4)
        self._stream_interval = stream_interval
        self._lanes: dict[str, _Lane] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = asyncio.Event()
        self._runner: asyncio.Task[Any] | None = None
        self._receiving = False
        self.idle = asyncio.Event()
        self.idle.set()

    async def run(self) -> None:
        """Take work until `stop()` is called."""
        self._runner = asyncio.current_task()
        failures = 0
        while not self._stopping.is_set():
            # Set while waiting for room as well: stop() must interrupt that wait too, or the
            # worker would take one more message once a stopped turn frees its place.
            self._receiving = True
            try:
                delivery = await self._receive()
            except asyncio.CancelledError:
                if not self._stopping.is_set():
                    raise
                # stop() interrupted the wait; nothing was taken off the queue.
                if self._runner is not None:
                    self._runner.uncancel()
                return
            except BusError as exc:
                failures += 1
                delay = min(30.0, 0.5 * 2**failures)
                log.warning("cannot receive work (%s); trying again in %.0fs", exc, delay)
                await asyncio.sleep(delay)
                continue
            finally:
                self._receiving = False
            failures = 0
            if delivery is not None:
                self._admit(delivery)

    async def _receive(self) -> Delivery | None:
        """The next inbound delivery, taken once there is room; it holds an intake place."""
        await self._intake.acquire()
        try:
            delivery = await self.bus.receive(INBOUND, consumer=self.name, timeout=5.0)
        except BaseException:
            self._intake.release()
            raise
        if delivery is None:
            self._intake.release()
        return delivery

    async def stop(self, grace: float = 10.0) -> None:
        """Stop taking work; let running turns finish for up to `grace` seconds.

        Work not finished by then stays unacknowledged, so the bus gives it out again.
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

    def _admit(self, delivery: Delivery) -> None:
        inbound = delivery.envelope
        if not isinstance(inbound, Inbound):
            log.error("dropping a %s found on the inbound queue", type(inbound).__name__)
            self._spawn(self._ack(delivery))
            return
        key = inbound.address.session_key
        lane = self._lanes.get(key)
        if inbound.kind == "cancel":
            if lane is not None and lane.cancel is not None:
                lane.cancel.set()
            self._spawn(self._ack(delivery))
            return
        if lane is None:
            lane = self._lanes[key] = _Lane(key)
            lane.waiting.append((delivery, inbound))
            self._spawn(self._drain(lane))
        else:
            lane.waiting.append((delivery, inbound))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        self.idle.clear()
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not self._tasks:
            self.idle.set()

    async def _ack(self, delivery: Delivery) -> None:
        try:
            await delivery.ack()
        finally:
            self._intake.release()

    async def _drain(self, lane: _Lane) -> None:
        try:
            while lane.waiting:
                delivery, inbound = lane.waiting.popleft()
                try:
                    async with self._slots:
                        await self._handle(delivery, inbound, lane)
                finally:
                    self._intake.release()
        finally:
            # A lane cancelled at shutdown leaves its waiting work unacked for redelivery.
            if self._lanes.get(lane.key) is lane:
                del self._lanes[lane.key]

    async def _handle(self, delivery: Delivery, inbound: Inbound, lane: _Lane) -> None:
        try:
            if await self.store.is_processed(inbound.dedupe_key):
                log.info("skipping %s: already answered", inbound.dedupe_key)
            elif not self.policy.addressed(inbound):
                pass  # a group message for someone else: read, not answered
            elif not self.policy.admits(inbound):
                await self._refuse(inbound)
            elif inbound.kind == "command":
                await self._command(inbound)
            else:
                await self._turn(inbound, lane)
            await self.store.mark_processed(inbound.dedupe_key)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("could not handle inbound %s; it will be delivered again", inbound.id)
            with contextlib.suppress(Exception):
                await delivery.nack()
            return
        await delivery.ack()

    async def _reply(
        self, inbound: Inbound, kind: OutboundKind, text: str, *, failed: bool = False
    ) -> None:
        await self.bus.enqueue(
            outbound_queue(inbound.address.platform),
            Outbound(
                kind=kind,
                address=inbound.address,
                text=text,
                reply_to=inbound.id,
                reply_to_platform_id=inbound.platform_message_id,
                failed=failed,
            ),
        )

    async def _refuse(self, inbound: Inbound) -> None:
        address = inbound.address
        log.info("refused %s user %s in %s", address.platform, inbound.user_id, address.chat)
        # One polite refusal per chat; after that, silence (no noise in a busy group).
        first = await self.store.mark_processed(
            f"refused:{address.platform}:{address.bot}:{address.chat}"
        )
        if first:
            await self._reply(inbound, "notice", REFUSAL_TEXT)

    async def _command(self, inbound: Inbound) -> None:
        key = inbound.address.session_key
        match (inbound.command or "").lower():
            case "new" | "reset":
                await self.store.create_session(key)
                await self._reply(inbound, "notice", "Started a new conversation.")
            case "cost" | "usage":
                session = await self.store.current_session(key)
                await self._reply(inbound, "notice", await self._usage_text(session.id))
            case "help" | "start":
                await self._reply(inbound, "notice", HELP_TEXT)
            case other:
                await self._reply(inbound, "notice", f"Unknown command /{other}. {HELP_TEXT}")

    async def _usage_text(self, session_id: str) -> str:
        spent = await self.store.cost_summary(session_id)
        usage = spent.usage
        calls = f"{spent.calls} model call{'' if spent.calls == 1 else 's'}"
        if spent.unpriced_calls:
            money = f"at least {format_usd(spent.cost_usd)} over {calls} "
            money += f"({spent.unpriced_calls} with a model that has no known price)"
        else:
            money = f"{format_usd(spent.cost_usd)} over {calls}"
        return (
            f"This conversation has cost {money}: {usage.input_tokens:,} tokens in, "
            f"{usage.output_tokens:,} out, {usage.cache_read_tokens:,} read from cache, "
            f"{usage.cache_write_tokens:,} written to cache."
        )

    async def _turn(self, inbound: Inbound, lane: _Lane) -> None:
        if not inbound.text.strip() and not inbound.images:
            return
        limit = self.policy.max_input_chars
        if len(inbound.text) > limit:
            await self._reply(
                inbound,
                "notice",
                f"That message is too long ({len(inbound.text):,} characters; the limit is "
                f"{limit:,}). Please send a shorter one.",
            )
            return
        session = await self.store.current_session(inbound.address.session_key)
        mode = self.modes.get(self.policy.mode_for(inbound))
        context = ChannelContext(
            platform=inbound.address.platform,
            mode=mode,
            prompt_hint=self.prompt_hints.get(inbound.address.platform, ""),
            session_key=inbound.address.session_key,
            user_id=inbound.user_id,
            user_name=inbound.user_name,
        )
        await self._reply(inbound, "typing", "")
        lane.cancel, lane.running_id = asyncio.Event(), inbound.id
        try:
            await self._stream_turn(inbound, session.id, context, lane.cancel)
        finally:
            lane.cancel, lane.running_id = None, None

    async def _stream_turn(
        self, inbound: Inbound, session_id: str, context: ChannelContext, cancel: asyncio.Event
    ) -> None:
        message = Message.user(inbound.text, inbound.images)
        pending: list[str] = []
        last_flush = 0.0
        run_id = ""

        async def flush() -> None:
            nonlocal last_flush
            if pending:
                text = "".join(pending)
                pending.clear()
                await self._reply(inbound, "delta", text)
            last_flush = time.monotonic()

        async for event in self.runtime.run(session_id, message, context, cancel=cancel):
            if isinstance(event, RunStarted):
                run_id = event.run_id
            await self._publish_lifecycle(event, session_id, run_id, context.session_key)
            match event:
                case TextDelta(text=chunk) if chunk:
                    pending.append(chunk)
                    if time.monotonic() - last_flush >= self._stream_interval:
                        await flush()
                case ToolRequested(name=name, arguments=arguments):
                    await flush()
                    shown = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
                    await self._reply(inbound, "progress", f"{name}({shown})")
                case RunCompleted(text=text):
                    await flush()
                    await self._reply(inbound, "reply", text)
                case RunFailed(message=text):
                    await flush()
                    await self._reply(inbound, "reply", text, failed=True)
                case Cancelled():
                    await self._reply(inbound, "notice", "Cancelled.")

    async def _publish_lifecycle(
        self, event: AgentEvent, session_id: str, run_id: str, session_key: str
    ) -> None:
        name = LIFECYCLE_NAMES.get(type(event))
        if name is None:
            return
        data = event.model_dump(mode="json", exclude={"kind"})
        try:
            await self.bus.publish(
                EVENTS,
                EventEnvelope(
                    name=name,
                    session_id=session_id,
                    run_id=run_id,
                    session_key=session_key,
                    data=data,
                ),
            )
        except Exception:
            # Lifecycle fan-out is best effort; the turn itself must not fail for it.
            log.warning("could not publish %s for run %s", name, run_id, exc_info=True)
