"""`InboundHandler`: what a worker does with one `Inbound` once it is that session's turn.

Commands, refusals, over-long input, and turns of the runtime whose events become `Outbound`
deliveries (typing, streamed text, progress, the reply) and lifecycle events on `events`.
A user turn is checkpointed (`core/checkpoints.py`) so a crash mid-turn can be recovered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from core.bus.base import Bus
from core.bus.names import EVENTS, outbound_queue
from core.checkpoints import ABANDONED_TEXT, Checkpoint
from core.clock import utc_now
from core.commands import CommandContext, CommandRegistry
from core.envelopes import EventEnvelope, Inbound, Outbound, OutboundKind
from core.errors import StoreError
from core.events import (
    LIFECYCLE_NAMES,
    AgentEvent,
    Cancelled,
    Progress,
    RunCompleted,
    RunFailed,
    RunStarted,
    TextDelta,
    ToolRequested,
)
from core.messages import Message
from core.modes import ModeCatalog
from core.policy import ChannelPolicy
from core.runtime import AgentRuntime, ChannelContext
from core.store.base import Fence, Store

if TYPE_CHECKING:
    from core.scheduling.book import ScheduleBook

__all__ = ["REFUSAL_TEXT", "InboundHandler"]

log = logging.getLogger(__name__)

REFUSAL_TEXT = "Sorry, this bot only answers the people it was set up for."


class InboundHandler:
    """Handles inbound work of any session; the worker makes sure one session at a time."""

    def __init__(
        self,
        *,
        bus: Bus,
        store: Store,
        runtime: AgentRuntime,
        modes: ModeCatalog,
        policy: ChannelPolicy,
        prompt_hints: Mapping[str, str],
        stream_interval: float,
        commands: CommandRegistry,
        book: ScheduleBook | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.bus = bus
        self.store = store
        self.runtime = runtime
        self.modes = modes
        self.policy = policy
        self.prompt_hints = dict(prompt_hints)
        self._stream_interval = stream_interval
        self._started: dict[str, float] = {}
        self.book = book
        self.commands = commands
        self._clock = clock

    async def handle(
        self, inbound: Inbound, *, cancel: asyncio.Event, fence: Fence | None = None
    ) -> None:
        """Answer `inbound` unless it was answered before; mark it answered."""
        if await self.store.is_processed(inbound.dedupe_key):
            log.info("skipping %s: already answered", inbound.dedupe_key)
            return
        if inbound.origin == "scheduled":
            await self._scheduled(inbound, cancel, fence)
        elif not self.policy.addressed(inbound):
            pass  # a group message for someone else: read, not answered
        elif not self.policy.admits(inbound):
            await self._refuse(inbound)
        elif inbound.kind == "command":
            await self._command(inbound)
        else:
            await self._turn(inbound, cancel, fence)
        await self.store.mark_processed(inbound.dedupe_key)

    async def _scheduled(
        self, inbound: Inbound, cancel: asyncio.Event, fence: Fence | None
    ) -> None:
        """A schedule's run: answered quietly, delivered per its policy to its target chat."""
        if self.book is None or inbound.schedule_id is None or inbound.run_id is None:
            log.error("a scheduled run reached a worker without schedules; dropped")
            return
        target = inbound.deliver_to or inbound.address
        is_admin = inbound.user_id == "cli" or inbound.user_id in self.policy.admins
        mode_name = self.policy.mode_for_address(target)
        if mode_name == "full" and not is_admin:
            mode_name = "safe-chat"  # `full` only for what an admin scheduled
        context = ChannelContext(
            platform=target.platform,
            mode=self.modes.get(mode_name),
            prompt_hint=self.prompt_hints.get(target.platform, ""),
            session_key=inbound.session_key,
            user_id=inbound.user_id,
            address=target,
            is_admin=is_admin,
            scheduled=True,
        )
        session = await self.store.current_session(inbound.session_key)
        message = Message.user(inbound.text, source=inbound.dedupe_key)
        outcome: RunCompleted | RunFailed | Cancelled | None = None
        run_id = ""
        started = time.monotonic()
        async for event in self.runtime.run(
            session.id, message, context, cancel=cancel, fence=fence
        ):
            if isinstance(event, RunStarted):
                run_id = event.run_id
            await self._publish_lifecycle(event, session.id, run_id, context)
            if isinstance(event, RunCompleted | RunFailed | Cancelled):
                outcome = event
        output, error, cost = "", "cancelled", None
        if isinstance(outcome, RunCompleted):
            output, error, cost = outcome.text, "", outcome.cost_usd
        elif isinstance(outcome, RunFailed):
            error = outcome.detail or outcome.message
        notes = await self.book.finish(
            inbound.schedule_id,
            inbound.run_id,
            succeeded=isinstance(outcome, RunCompleted),
            output=output,
            error=error,
            duration_ms=round((time.monotonic() - started) * 1000, 1),
            cost_usd=cost,
        )
        for number, note in enumerate(notes):
            await self.bus.enqueue(
                outbound_queue(note.address.platform),
                Outbound(kind="notification", address=note.address, text=note.text),
                dedupe_id=f"run:{inbound.run_id}:{number}",
            )

    async def apologize(self, inbound: Inbound) -> None:
        """Tell the user their message could not be handled (after repeated failures)."""
        await self.reply(
            inbound,
            "reply",
            "Sorry, something went wrong on my side and I could not answer that message.",
            failed=True,
        )
        # The user was told: a restart must not take the turn up again.
        await self.store.finish_checkpoint(inbound.dedupe_key, "abandoned")

    async def abandon(self, inbound: Inbound) -> None:
        """Give up a turn a crash cut off: tell the user once, then mark it abandoned."""
        await self.reply(inbound, "notice", ABANDONED_TEXT, failed=True)
        await self.store.finish_checkpoint(inbound.dedupe_key, "abandoned")

    async def reply(
        self, inbound: Inbound, kind: OutboundKind, text: str, *, failed: bool = False
    ) -> None:
        """Send a delivery about `inbound` to its platform's outbound queue.

        The final answer is enqueued under a dedupe id: a turn repeated by another worker
        after a crash does not reach the user twice.
        """
        final = kind in ("reply", "notice")
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
            dedupe_id=f"{inbound.dedupe_key}:final" if final else None,
        )

    async def _refuse(self, inbound: Inbound) -> None:
        address = inbound.address
        log.info("refused %s user %s in %s", address.platform, inbound.user_id, address.chat)
        # One polite refusal per chat; after that, silence (no noise in a busy group).
        first = await self.store.mark_processed(
            f"refused:{address.platform}:{address.bot}:{address.chat}"
        )
        if first:
            await self.reply(inbound, "notice", REFUSAL_TEXT)

    async def _command(self, inbound: Inbound) -> None:
        word = (inbound.command or "").lower()
        is_admin = self.policy.is_admin(inbound.address.platform, inbound.user_id)
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
            )
            text = await command.handler(context)
        await self.reply(inbound, "notice", text)

    async def _turn(self, inbound: Inbound, cancel: asyncio.Event, fence: Fence | None) -> None:
        if not inbound.text.strip() and not inbound.images:
            return
        limit = self.policy.max_input_chars
        if len(inbound.text) > limit:
            await self.reply(
                inbound,
                "notice",
                f"That message is too long ({len(inbound.text):,} characters; the limit is "
                f"{limit:,}). Please send a shorter one.",
            )
            return
        found = await self.store.get_checkpoint(inbound.dedupe_key)
        if found is not None and found.status == "abandoned":
            log.info("skipping %s: abandoned after a restart", inbound.dedupe_key)
            return  # the user was told to send it again
        # Typing shows before the session lookup and the checkpoint write (Redis round trips).
        await self.reply(inbound, "typing", "")
        session = await self.store.current_session(inbound.session_key)
        mode = self.modes.get(self.policy.mode_for(inbound))
        context = ChannelContext(
            platform=inbound.address.platform,
            mode=mode,
            prompt_hint=self.prompt_hints.get(inbound.address.platform, ""),
            session_key=inbound.session_key,
            user_id=inbound.user_id,
            user_name=inbound.user_name,
            address=inbound.address,
            is_admin=self.policy.is_admin(inbound.address.platform, inbound.user_id),
        )
        checkpoint = await self._checkpoint(inbound, session.id, found)
        await self._stream_turn(inbound, checkpoint, context, cancel, fence)

    async def _stream_turn(
        self,
        inbound: Inbound,
        checkpoint: Checkpoint,
        context: ChannelContext,
        cancel: asyncio.Event,
        fence: Fence | None,
    ) -> None:
        session_id = checkpoint.session_id
        message = Message.user(inbound.text, inbound.images, source=inbound.dedupe_key)
        stream = _DeltaStream(self, inbound, self._stream_interval)
        run_id = ""
        ended = False
        try:
            async for event in self.runtime.run(
                session_id, message, context, cancel=cancel, fence=fence
            ):
                if isinstance(event, RunStarted):
                    run_id = event.run_id
                await self._publish_lifecycle(event, session_id, run_id, context)
                ended = ended or isinstance(event, RunCompleted | RunFailed | Cancelled)
                match event:
                    case Progress(step=step) if step > 1:
                        # Step n starts once round n - 1 of tool calls is stored.
                        checkpoint = await self._bump(checkpoint, step - 1)
                    case TextDelta(text=chunk) if chunk:
                        await stream.add(chunk)
                    case ToolRequested(name=name, arguments=arguments):
                        await stream.flush()
                        shown = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
                        await self.reply(inbound, "progress", f"{name}({shown})")
                    case RunCompleted(text=text):
                        await stream.flush()
                        await self.reply(inbound, "reply", text)
                    case RunFailed(message=text):
                        await stream.flush()
                        await self.reply(inbound, "reply", text, failed=True)
                    case Cancelled():
                        await self.reply(inbound, "notice", "Cancelled.")
        finally:
            await stream.close()
        if ended:
            await self.store.finish_checkpoint(checkpoint.run_key, "completed")

    async def _checkpoint(
        self, inbound: Inbound, session_id: str, found: Checkpoint | None
    ) -> Checkpoint:
        """Save the turn's `running` checkpoint (`found` is the one kept from before a crash,
        when the turn is resumed)."""
        now = self._clock()
        if found is None or found.session_id != session_id:
            found = Checkpoint(
                run_key=inbound.dedupe_key,
                session_id=session_id,
                inbound=inbound,
                started_at=now,
                updated_at=now,
            )
        checkpoint = found.model_copy(update={"status": "running", "updated_at": now})
        await self.store.save_checkpoint(checkpoint)
        return checkpoint

    async def _bump(self, checkpoint: Checkpoint, rounds: int) -> Checkpoint:
        """Record that another tool round is done; best effort, the turn goes on regardless."""
        bumped = checkpoint.model_copy(
            update={"tool_rounds": max(rounds, checkpoint.tool_rounds), "updated_at": self._clock()}
        )
        try:
            await self.store.save_checkpoint(bumped)
        except StoreError as exc:
            log.warning("could not checkpoint %s: %s", checkpoint.run_key, exc)
            return checkpoint
        return bumped

    async def _publish_lifecycle(
        self, event: AgentEvent, session_id: str, run_id: str, context: ChannelContext
    ) -> None:
        name = LIFECYCLE_NAMES.get(type(event))
        if name is None:
            return
        data = event.model_dump(mode="json", exclude={"kind"})
        data["platform"] = context.platform
        now = time.monotonic()
        if isinstance(event, RunStarted):
            self._started[run_id] = now
        elif isinstance(event, RunCompleted | RunFailed | Cancelled):
            started = self._started.pop(run_id, None)
            if started is not None:
                data["duration_ms"] = round((now - started) * 1000, 1)
        try:
            await self.bus.publish(
                EVENTS,
                EventEnvelope(
                    name=name,
                    session_id=session_id,
                    run_id=run_id,
                    session_key=context.session_key,
                    data=data,
                ),
            )
        except Exception:
            # Lifecycle fan-out is best effort; the turn itself must not fail for it.
            log.warning("could not publish %s for run %s", name, run_id, exc_info=True)


class _DeltaStream:
    """Coalesces streamed text into `delta` deliveries at most every `interval` seconds.

    A piece that arrives inside the interval goes out when it ends, even if the model then
    pauses, so the chat never lags behind what the model wrote by more than `interval`.
    """

    def __init__(self, handler: InboundHandler, inbound: Inbound, interval: float) -> None:
        self._handler = handler
        self._inbound = inbound
        self._interval = interval
        self._pieces: list[str] = []
        self._last = 0.0
        self._timer: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def add(self, piece: str) -> None:
        self._pieces.append(piece)
        wait = self._last + self._interval - time.monotonic()
        if wait <= 0:
            await self.flush()
        elif self._timer is None or self._timer.done():
            self._timer = asyncio.create_task(self._flush_later(wait))

    async def flush(self) -> None:
        async with self._lock:
            self._last = time.monotonic()
            if not self._pieces:
                return
            text = "".join(self._pieces)
            self._pieces.clear()
            await self._handler.reply(self._inbound, "delta", text)

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer

    async def _flush_later(self, wait: float) -> None:
        await asyncio.sleep(wait)
        try:
            await self.flush()
        except Exception as exc:
            log.info("could not send streamed text: %s", exc)


def _arguments(text: str) -> str:
    """What follows the command word in a command's text (`/approve ABC` -> `ABC`)."""
    text = text.strip()
    if text.startswith("/"):
        parts = text.split(maxsplit=1)
        text = parts[1] if len(parts) > 1 else ""
    return text.strip()
