"""One turn of the runtime, the same for a person's message and a scheduled run.

`TurnRunner.run` drives `AgentRuntime.run` once: it publishes the lifecycle events, moves the
checkpoint on after each tool round (a person's turn is checkpointed, `core/checkpoints.py`),
and, when the turn is shown in the chat, streams the answer through one `ReplyStream` paced
per the platform, notes tool activity where the platform shows it, and sends the final text.
A run that is not shown (a schedule's) returns its outcome for its caller to deliver.
`Contexts` builds the `ChannelContext` of either kind of turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime

from core.checkpoints import Checkpoint
from core.clock import utc_now
from core.envelopes import Inbound
from core.errors import StoreError
from core.events import (
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
from core.outages import Patience
from core.policy import ChannelPolicy
from core.runtime import AgentRuntime, ChannelContext
from core.stopping import stopped_text
from core.store.base import Fence, Store
from core.turns.lifecycle import Lifecycle
from core.turns.outbox import Outbox
from core.turns.stream import ReplyStream

__all__ = ["Contexts", "Outcome", "TurnRunner"]

log = logging.getLogger(__name__)

Outcome = RunCompleted | RunFailed | Cancelled


class Contexts:
    """The `ChannelContext` of a turn: its mode, prompt hint and who asks, per the policy."""

    def __init__(
        self, *, modes: ModeCatalog, policy: ChannelPolicy, prompt_hints: Mapping[str, str]
    ) -> None:
        self.modes = modes
        self.policy = policy
        self.prompt_hints = dict(prompt_hints)

    def for_message(self, inbound: Inbound) -> ChannelContext:
        """A person's message, in the chat it came from."""
        platform = inbound.address.platform
        return ChannelContext(
            platform=platform,
            mode=self.modes.get(self.policy.mode_for(inbound)),
            prompt_hint=self.prompt_hints.get(platform, ""),
            session_key=inbound.session_key,
            user_id=inbound.user_id,
            user_name=inbound.user_name,
            address=inbound.address,
            is_admin=self.policy.is_admin(platform, inbound.user_id),
        )

    def for_schedule(self, inbound: Inbound) -> ChannelContext:
        """A schedule's run, for its owner, in the chat its answer goes to."""
        target = inbound.address
        owner = inbound.owner or ""
        is_admin = owner == "cli" or owner in self.policy.admins
        mode_name = self.policy.mode_for_address(target)
        if mode_name == "full" and not is_admin:
            mode_name = "safe-chat"  # `full` only for what an admin scheduled
        return ChannelContext(
            platform=target.platform,
            mode=self.modes.get(mode_name),
            prompt_hint=self.prompt_hints.get(target.platform, ""),
            session_key=inbound.session_key,
            # The owner as `<platform>:<user id>` (or "cli"): memory scopes read it so.
            user_id=owner,
            address=target,
            is_admin=is_admin,
            scheduled=True,
        )


class TurnRunner:
    """Runs turns of the runtime and shows them (or not) in their chat."""

    def __init__(
        self,
        *,
        runtime: AgentRuntime,
        store: Store,
        outbox: Outbox,
        lifecycle: Lifecycle,
        clock: Callable[[], datetime] = utc_now,
        patience: Patience | None = None,
    ) -> None:
        """`patience`: how the turn's checkpoint writes wait out an outage of the store (the
        runtime's, unless given)."""
        self.patience = patience or runtime.patience
        self.runtime = runtime
        self.store = store
        self.outbox = outbox
        self.lifecycle = lifecycle
        self._clock = clock

    async def run(
        self,
        inbound: Inbound,
        context: ChannelContext,
        session_id: str,
        *,
        cancel: asyncio.Event,
        fence: Fence | None,
        checkpoint: Checkpoint | None,
        shown: bool,
        finish: bool = True,
        admitted: Awaitable[bool] | None = None,
        typing: bool = False,
        model: str | None = None,
    ) -> Outcome | None:
        """Run one turn answering `inbound`; its outcome (None if the runtime stopped short
        or `admitted` said no).

        With `shown`, the answer streams into the chat and ends with its final text. The
        checkpoint is marked completed when the turn has an outcome, unless `finish` is False
        (the caller finishes it, together with its own last writes). `admitted`: see
        `AgentRuntime.run`. With `typing` (and `shown`), the typing indicator is sent as the
        runtime starts its steps (with their first writes). `model`: the session's chosen
        model (`/model`), None for the default.
        """
        message = Message.user(inbound.model_text, inbound.images, source=inbound.dedupe_key)
        policy = self.outbox.policy(inbound.address.platform) if shown else None

        async def piece(text: str, seq: int) -> None:
            await self.outbox.send(inbound, "delta", text, seq=seq)

        stream = ReplyStream(piece, policy.interval if policy else 0.0)
        run_id = ""
        outcome: Outcome | None = None
        try:
            async for event in self.runtime.run(
                session_id,
                message,
                context,
                cancel=cancel,
                fence=fence,
                admitted=admitted,
                model=model,
            ):
                if isinstance(event, RunStarted):
                    run_id = event.run_id
                    if typing and policy is not None:
                        await self.outbox.send(inbound, "typing", "")
                await self.lifecycle.publish(event, session_id, run_id, context)
                if isinstance(event, RunCompleted | RunFailed | Cancelled):
                    outcome = event
                if isinstance(event, Progress) and event.step > 1 and checkpoint is not None:
                    # Step n starts once round n - 1 of tool calls is stored.
                    checkpoint = await self._bump(checkpoint, event.step - 1)
                if policy is None:
                    continue
                match event:
                    case TextDelta(text=chunk) if chunk:
                        await stream.add(chunk)
                    case ToolRequested(name=name, arguments=arguments) if policy.shows_progress:
                        await stream.flush()
                        shown_args = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
                        await self.outbox.send(inbound, "progress", f"{name}({shown_args})")
                    case RunCompleted(text=text) | RunFailed(message=text):
                        # The final text is whole: a piece still waiting is not needed.
                        await stream.close()
                        failed = isinstance(event, RunFailed)
                        await self.outbox.send(
                            inbound, "reply", text, seq=stream.next_seq, failed=failed
                        )
                    case Cancelled():
                        await stream.close()
                        # In place of the pieces: what was said, marked as stopped.
                        said = stopped_text(stream.text) if policy.edits_in_place else "Cancelled."
                        await self.outbox.send(inbound, "notice", said, seq=stream.next_seq)
        finally:
            await stream.close()
        if outcome is not None and checkpoint is not None and finish:
            run_key = checkpoint.run_key
            await self.patience(lambda: self.store.finish_checkpoint(run_key, "completed"))
        return outcome

    async def _bump(self, checkpoint: Checkpoint, rounds: int) -> Checkpoint:
        """Record that another tool round is done; best effort, the turn goes on regardless."""
        bumped = checkpoint.model_copy(
            update={"tool_rounds": max(rounds, checkpoint.tool_rounds), "updated_at": self._clock()}
        )
        try:
            await self.patience(lambda: self.store.save_checkpoint(bumped))
        except StoreError as exc:
            log.warning("could not checkpoint %s: %s", checkpoint.run_key, exc)
            return checkpoint
        return bumped
