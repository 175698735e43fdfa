"""One turn of the runtime, the same for a person's message and a scheduled run.

`TurnRunner.run` drives `AgentRuntime.run` once for a `Turn`: it publishes the lifecycle
events and, when the turn is shown in the chat, streams the answer through one `ReplyStream`
paced per the platform, notes tool activity where the platform shows it, and sends the final
text. A run that is not shown (a schedule's) returns its outcome for its caller to deliver.
The runtime keeps the turn's records (its checkpoint too, `core/checkpoints.py`); the caller
closes the turn once its answer is on its way (`InboundHandler`).
`Contexts` builds the `ChannelContext` of either kind of turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

from core.arrivals import Arrivals
from core.budgets import spender_keys
from core.checkpoints import Checkpoint
from core.envelopes import Inbound
from core.events import (
    AgentEvent,
    Cancelled,
    RunCompleted,
    RunFailed,
    RunStarted,
    TextDelta,
    ToolRequested,
    TurnSettled,
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
from core.turns.stream import ReplyStream, StreamPolicy
from core.voice import transcription_costs

__all__ = ["Contexts", "Outcome", "Turn", "TurnRunner"]

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
            is_direct=inbound.is_direct,
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


@dataclass(frozen=True)
class Turn:
    """One turn to run: what it answers, where, in which session, with what."""

    inbound: Inbound
    context: ChannelContext
    # The session to open it in (see `AgentRuntime.run`: with no such session, the key's).
    session_id: str
    # A person's turn's `running` checkpoint, saved as the turn opens; None: not checkpointed.
    checkpoint: Checkpoint | None = None
    # The session's chosen model (`/model`), None for the default.
    model: str | None = None
    # Streamed into the chat with typing and its final text (a person's message), or not (a
    # schedule's run: its caller delivers the outcome).
    shown: bool = True
    # Where the person's messages that come meanwhile are found, to join the turn (the
    # profile's `busy`); None: each waits for a turn of its own.
    arrivals: Arrivals | None = None


class TurnRunner:
    """Runs turns of the runtime and shows them (or not) in their chat."""

    def __init__(
        self,
        *,
        runtime: AgentRuntime,
        store: Store,
        outbox: Outbox,
        lifecycle: Lifecycle,
        patience: Patience | None = None,
    ) -> None:
        """`patience`: how the turn's own writes wait out an outage of the store (the
        runtime's, unless given)."""
        self.patience = patience or runtime.patience
        self.runtime = runtime
        self.store = store
        self.outbox = outbox
        self.lifecycle = lifecycle

    async def run(
        self, turn: Turn, *, cancel: asyncio.Event, fence: Fence | None
    ) -> Outcome | None:
        """Run `turn`; its outcome (None if the runtime stopped short). A shown turn streams
        its answer into the chat and ends with its final text."""
        inbound, context = turn.inbound, turn.context
        message = Message.user(
            inbound.model_text, inbound.images, source=inbound.dedupe_key, author=inbound.author
        )
        policy = self.outbox.policy(inbound.address.platform) if turn.shown else None

        async def piece(text: str, seq: int) -> None:
            await self.outbox.send(inbound, "delta", text, seq=seq)

        stream = ReplyStream(piece, policy.interval if policy else 0.0)
        session_id, run_id = turn.session_id, ""
        outcome: Outcome | None = None
        events = self.runtime.run(
            turn.session_id,
            message,
            context,
            cancel=cancel,
            fence=fence,
            model=turn.model,
            checkpoint=turn.checkpoint,
            arrivals=turn.arrivals,
        )
        try:
            async for event in events:
                if isinstance(event, RunStarted):
                    session_id, run_id = event.session_id, event.run_id
                    await self._charge_voice(inbound, context, session_id, run_id)
                    if policy is not None:
                        await self.outbox.send(inbound, "typing", "")
                await self.lifecycle.publish(event, session_id, run_id, context)
                if isinstance(event, RunCompleted | RunFailed | Cancelled):
                    outcome = event
                if policy is not None:
                    await self._show(inbound, event, policy, stream)
        finally:
            await stream.close()
        return outcome

    async def settled(self, turn: Turn, outcome: Outcome) -> None:
        """Publish `turn.settled`: the turn's message is marked processed and its final reply
        handed to the outbox (call it after both)."""
        match outcome:
            case RunCompleted():
                event = TurnSettled(run_id=outcome.run_id, outcome="completed")
            case RunFailed():
                event = TurnSettled(run_id=outcome.run_id, outcome="failed")
            case Cancelled():
                event = TurnSettled(run_id=outcome.run_id, outcome="cancelled")
        await self.lifecycle.publish(event, turn.session_id, outcome.run_id, turn.context)

    async def _charge_voice(
        self, inbound: Inbound, context: ChannelContext, session_id: str, run_id: str
    ) -> None:
        """The message's transcribed recordings in the ledger, as the turn's session's, its
        person's and its chat's spending (`core/voice.py`)."""
        user, chat = spender_keys(
            context.platform, context.user_id, context.address, scheduled=context.scheduled
        )
        costs = transcription_costs(
            inbound, session_id=session_id, run_id=run_id, user=user, chat=chat
        )
        for entry in costs:
            await self.patience(partial(self.store.record_cost, entry))

    async def _show(
        self, inbound: Inbound, event: AgentEvent, policy: StreamPolicy, stream: ReplyStream
    ) -> None:
        """Show one event of a turn in its chat, as the platform's `policy` says."""
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
                await self.outbox.send(inbound, "reply", text, seq=stream.next_seq, failed=failed)
            case Cancelled():
                await stream.close()
                # In place of the pieces: what was said, marked as stopped.
                said = stopped_text(stream.text) if policy.edits_in_place else "Cancelled."
                await self.outbox.send(inbound, "notice", said, seq=stream.next_seq)
