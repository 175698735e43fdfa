"""`AgentRuntime`: the turn loop.

One turn: persist the user message, then per step ask the provider (streaming, with a timeout),
persist its answer, run the tools it asked for under the turn's capability mode, persist their
results, and loop until the model answers without tools or a budget runs out. Every message is
written to the store as soon as it exists, so a crash loses at most the step in flight.

Requests carry what fits the model's context window (`core.window.TurnWindow`): the session's
latest compaction summary and the messages after it, compacted first when they near the
window. A `context_overflow` from the provider compacts (or, without a compactor, halves what
is sent) and retries once.

The turn's reads and writes wait out an outage of the store (Redis restarting, the disk full)
through the runtime's `Patience` (`core/outages.py`), so a model call already paid for is
not made again; an outage longer than its budget ends the turn with the `Unavailable` error
(no apology: the worker keeps the message and tries it again once the store is back).

Its parts, each in a module of its own: the budgets and the cost of each call
(`core/turn_spending.py`), compaction and consolidation (`core/turn_compaction.py`), the
joining of messages that came meanwhile (`core/turn_joins.py`), the turn's writes
(`core/turn_writes.py`), one model call streamed (`core/model_stream.py`) and one round of
tool calls, with what follows it (`core/tool_rounds.py`: an answer that ends the turn, or the
verification prompt of the next request).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from core.arrivals import Arrivals
from core.attention import AttentionSettings, attend
from core.budgets import BudgetGuard, spender_keys
from core.checkpoints import Checkpoint
from core.clock import Clock, utc_now
from core.compaction import Compactor
from core.confirm import Confirm
from core.consolidation import Consolidator
from core.context import context_window as window_of
from core.context import estimate_text, estimate_tokens, estimate_tools
from core.envelopes import new_id
from core.errors import (
    BudgetExceeded,
    ProviderError,
    StoreError,
    Unavailable,
)
from core.event_buffer import EventBuffer
from core.events import (
    AgentEvent,
    Cancelled,
    Finished,
    Progress,
    RunCompleted,
    RunFailed,
    RunStarted,
)
from core.extensions import Extensions, ExtensionStop
from core.failures import (
    ANSWER_CUT_OFF,
    INTERNAL_ERROR,
    MODEL_TOO_SLOW,
    MODEL_UNAVAILABLE,
    provider_failure,
    too_long,
)
from core.fencing import Fence, FenceOvertaken
from core.history import HistoryCache
from core.hooks import HookChain, Hooks, ModelCompletion
from core.logcontext import log_context
from core.messages import Message, ToolCall, Usage
from core.model_choice import ModelChoices
from core.model_stream import ModelStream
from core.outages import Patience
from core.playbook import Playbook
from core.prompt import SystemPrompt
from core.providers.base import ModelRequest, Provider
from core.redact import Redactor
from core.safety import LOOP_STOPPED
from core.step_state import StepState, turn_ended, with_state
from core.store.images import StoredImages
from core.store.ledger import CostLedger
from core.store.log import ConversationLog
from core.store.tool_outputs import ToolOutputs
from core.store.turns import TurnOpening, TurnRecords, TurnStart
from core.stored_images import with_recent_images
from core.tool_calls import ToolCalls
from core.tool_hooks import ToolHooks
from core.tool_rounds import ToolRounds
from core.tools.ask_user import offered_to
from core.tools.base import Tool, ToolContext, ToolRegistry
from core.tracing import (
    span,
)
from core.turn_answers import answers_for
from core.turn_compaction import TurnCompaction
from core.turn_joins import join_arrivals
from core.turn_spending import CostFunction, TurnSpending
from core.turn_state import ChannelContext, RuntimeLimits, TurnState
from core.turn_writes import TurnWrites
from core.window import TurnWindow

__all__ = [
    "ANSWER_CUT_OFF",
    "MODEL_TOO_SLOW",
    "MODEL_UNAVAILABLE",
    "AgentRuntime",
    "ChannelContext",
    "CostFunction",
    "RuntimeLimits",
    "TurnContext",
    "TurnStore",
]

log = logging.getLogger(__name__)

# Stored after the text of a model call cut short, so later turns know it is not whole.
_CUT_OFF_NOTE = "\n\n[This answer was cut off here: the model's stream broke.]"
_CANCELLED_NOTE = "\n\n[This answer was cancelled here by the person.]"

# Extra context for one turn (memory snippets) from the channel context and the user's text.
TurnContext = Callable[[ChannelContext, str], Awaitable[str]]


class _Cancel:
    """Tells a turn task apart from one cancelled by its consumer going away."""

    def __init__(self) -> None:
        self.requested = False


class TurnStore(ConversationLog, CostLedger, TurnRecords, StoredImages, Protocol):
    """What a turn keeps: its messages and summaries (their images apart), and what its model
    calls cost."""


class AgentRuntime:
    """Runs turns of a conversation against one provider with one tool registry.

    `context_window` overrides the model's window from `core.context.CONTEXT_WINDOWS`;
    without a `compactor` old turns are only left out of requests, never summarized.
    `confirm` asks the user before a privileged tool runs where the mode wants it;
    without it such calls are refused. `budgets` checks the layered spending limits before
    each model call; without it only `limits.max_spend_usd` (per session) applies.
    `patience` waits out outages of the store (one for the whole worker: the turn path
    shares it, `bots/app.py`). `models`: what a session's chosen model (`run(model=)`)
    maps to; without it every turn uses `provider` and `model`. `tool_hooks`: the
    operator's hooks around each tool call (`[hooks]`, core/tool_hooks.py). `tool_outputs`
    keeps cut tool results whole for `read_tool_output`. `consolidator`: asked which
    durable facts the messages a compaction summarizes established (core/consolidation.py);
    without it compaction only summarizes. `playbook`: records the tool sequences of turns
    that ended well and offers them as hints (core/playbook.py); `attention`: the attention
    layer of a person's turns (core/attention.py); None: neither. `verify`: the
    instruction added to the request after each tool round (`core/tool_rounds.py`); None:
    none. `extensions`: the operator's `[hooks] input`, `before_agent_start` and
    `context` (core/extensions.py). `step_state`: live state (a browser page) added to
    each request, never stored, and told when a turn ends (core/step_state.py).
    """

    def __init__(
        self,
        *,
        provider: Provider,
        model: str,
        tools: ToolRegistry,
        store: TurnStore,
        limits: RuntimeLimits | None = None,
        prompt: SystemPrompt | None = None,
        temperature: float | None = None,
        cost: CostFunction | None = None,
        redactor: Redactor | None = None,
        clock: Clock = utc_now,
        turn_context: TurnContext | None = None,
        compactor: Compactor | None = None,
        context_window: int | None = None,
        hooks: Hooks | None = None,
        confirm: Confirm | None = None,
        budgets: BudgetGuard | None = None,
        patience: Patience | None = None,
        models: ModelChoices | None = None,
        tool_hooks: ToolHooks | None = None,
        tool_outputs: ToolOutputs | None = None,
        consolidator: Consolidator | None = None,
        playbook: Playbook | None = None,
        attention: AttentionSettings | None = None,
        verify: str | None = None,
        extensions: Extensions | None = None,
        step_state: StepState | None = None,
    ) -> None:
        """The arguments are described on the class."""
        self.provider, self.model, self.tools, self.store = provider, model, tools, store
        self.limits = limits or RuntimeLimits()
        self.prompt = prompt or SystemPrompt()
        self.temperature = temperature
        self._redact = redactor or Redactor()
        self._clock = clock
        self.playbook, self.attention = playbook, attention
        hints = None if playbook is None else playbook.hints
        self._gatherers = [g for g in (turn_context, hints) if g is not None]
        self.compactor, self.consolidator, self.step_state = compactor, consolidator, step_state
        self.context_window = context_window or window_of(model)
        # A chain even for one hook: it keeps a hook that raises from breaking the turn.
        self.hooks = HookChain([hooks] if hooks is not None else [])
        self._confirm = confirm
        self._histories = HistoryCache()
        self.budgets = budgets
        self.patience = patience or Patience()
        self.models = models
        self._writes = TurnWrites(self.store, self.patience, clock)
        self.spending = self._spending_of(cost)
        self._compaction = TurnCompaction(
            self.hooks, self._redact, self.spending, consolidator, model=model
        )
        self._stream = ModelStream(self._redact, self.hooks, text_calls=self.limits.text_tool_calls)
        self._calls = self._tool_calls(tool_hooks, tool_outputs)
        self._rounds = ToolRounds(self._calls, self._writes, verify)
        self.extensions = extensions or Extensions()

    def _spending_of(self, cost: CostFunction | None) -> TurnSpending:
        """The checks of the turn's budgets and the pricing of its model calls."""
        return TurnSpending(
            limits=self.limits,
            ledger=self.store,
            patience=self.patience,
            clock=self._clock,
            cost=cost,
            budgets=self.budgets,
            models=self.models,
        )

    def _tool_calls(
        self, tool_hooks: ToolHooks | None, tool_outputs: ToolOutputs | None
    ) -> ToolCalls:
        """What runs a step's tool calls: this runtime's tools, hooks, redaction, confirmations
        and tool timeout, with the operator's `tool_hooks` and the `tool_outputs` store."""
        return ToolCalls(
            tools=self.tools,
            hooks=self.hooks,
            redactor=self._redact,
            confirm=self._confirm,
            timeout=self.limits.tool_timeout,
            tool_hooks=tool_hooks,
            outputs=tool_outputs,
        )

    def child(self, *, tools: ToolRegistry, limits: RuntimeLimits) -> AgentRuntime:
        """A runtime for a sub-agent's turns (core/subagents.py): this one's provider, store,
        prompt, pricing, budgets, hooks and confirmations, with `tools` and `limits`; no memory
        context and no compactor (its turns are short and start afresh)."""
        return AgentRuntime(
            provider=self.provider,
            model=self.model,
            tools=tools,
            store=self.store,
            limits=limits,
            prompt=self.prompt,
            temperature=self.temperature,
            cost=self.spending.cost_of,
            redactor=self._redact,
            clock=self._clock,
            context_window=self.context_window,
            hooks=self.hooks,
            confirm=self._confirm,
            budgets=self.budgets,
            patience=self.patience,
            models=self.models,
            tool_hooks=self._calls.tool_hooks,
            tool_outputs=self._calls.outputs,
            step_state=self.step_state,
        )

    @property
    def confirm(self) -> Confirm | None:
        """How the chat is asked for a yes (privileged tools, `/forgetme`); None: never."""
        return self._confirm

    async def run(
        self,
        session_id: str,
        user_input: Message,
        context: ChannelContext,
        *,
        cancel: asyncio.Event | None = None,
        fence: Fence | None = None,
        model: str | None = None,
        checkpoint: Checkpoint | None = None,
        arrivals: Arrivals | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """Run one turn and yield its events; the last one is RunCompleted/RunFailed/Cancelled.

        The turn opens in `session_id`; with no such session, in the current session of
        `context.session_key`, made under `session_id` if the key has none (`RunStarted`
        names the session it ran in). Setting `cancel` stops the turn at once (in-flight
        model and tool calls are cancelled) and ends it with `Cancelled`. Every write carries
        `fence`, so a worker that lost the session's lease cannot add to its history.
        `checkpoint` (a person's turn) is saved as the turn opens and moved on with each tool
        round. `model`: the session's chosen model (`/model`), looked up in `models`; None or
        one no longer allowed: the default. `arrivals`: where messages that come meanwhile are
        found, to join the turn before each model call (None: none join).
        """
        run_id = new_id()
        state = TurnState(fence, checkpoint)
        state.run_id = run_id
        state.arrivals = self.extensions.joining(arrivals, run_id, context, state)
        if self.models is not None:
            state.provider, state.model = self.models.pick(model)
        else:
            state.provider, state.model = self.provider, self.model
        state.max_steps = self.limits.max_steps
        # Bounded: a consumer that falls behind makes the model stream wait for it.
        queue = EventBuffer(self.limits.stream_buffer_size)
        state.room = queue.room
        flag = _Cancel()
        with log_context(run=run_id):  # the turn's task, and its log lines, carry the run id
            turn = asyncio.create_task(
                self._turn(run_id, session_id, user_input, context, queue.put, flag, state),
                name=f"turn:{session_id}",
            )
        watcher = asyncio.create_task(self._watch(cancel, turn, flag)) if cancel else None
        try:
            while (event := await queue.get()) is not None:
                yield event
            await turn
        finally:
            for task in (watcher, turn):
                if task is not None and not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task

    @staticmethod
    async def _watch(cancel: asyncio.Event, turn: asyncio.Task[None], flag: _Cancel) -> None:
        await cancel.wait()
        if not turn.done():
            flag.requested = True
            turn.cancel()

    async def _turn(
        self,
        run_id: str,
        session_id: str,
        user_input: Message,
        context: ChannelContext,
        emit: Callable[[AgentEvent | None], None],
        flag: _Cancel,
        state: TurnState,
    ) -> None:
        attributes: dict[str, str | int | float | bool] = {
            "switchboard.run_id": run_id,
            "switchboard.platform": context.platform,
            "switchboard.mode": context.mode.name,
        }
        with span("turn", attributes=attributes):
            await self._traced_turn(run_id, session_id, user_input, context, emit, flag, state)

    async def _traced_turn(
        self,
        run_id: str,
        session_id: str,
        user_input: Message,
        context: ChannelContext,
        emit: Callable[[AgentEvent | None], None],
        flag: _Cancel,
        state: TurnState,
    ) -> None:
        final: RunCompleted | RunFailed | Cancelled | None = None
        state.session_id = session_id
        try:
            final = await self._steps(run_id, session_id, user_input, context, emit, state)
            emit(final)
        except asyncio.CancelledError:
            if not flag.requested:
                raise
            final = await self._cancelled(run_id, state)
            emit(final)
        except ExtensionStop as stop:
            final = stop.final(run_id)
            emit(final)
        except FenceOvertaken:
            # Another worker holds the session now: it answers, this turn says nothing.
            log.warning(
                "turn %s of session %s stopped: its claim was overtaken", run_id, state.session_id
            )
            raise
        except Unavailable as exc:
            # Waited out for the whole budget already: the worker keeps the message and runs
            # the turn again once the store is back (it goes on from what was stored).
            # The outage itself was logged once, when it began (`core/outages.py`).
            log.debug("turn %s of session %s stopped: %s", run_id, state.session_id, exc)
            raise
        except Exception as exc:
            log.exception("turn %s of session %s failed", run_id, state.session_id)
            final = await self._crashed(run_id, state, exc)
            emit(final)
        finally:
            # Kept only if it is exactly what the store holds (see HistoryCache.keep).
            self._histories.keep(
                state.session_id,
                state.history,
                after_seq=state.after,
                ready=state.ready,
                revision=state.revision,
            )
            if self.playbook is not None and isinstance(final, RunCompleted) and final.steps:
                await self.playbook.learn([m for m in state.history if m.seq >= state.first_seq])
            if final is not None:
                await self.hooks.on_agent_end(final)
            await turn_ended(self.step_state, state.session_id)
            emit(None)

    async def _cancelled(self, run_id: str, state: TurnState) -> Cancelled:
        """The person cancelled the turn: what its call in flight streamed is kept, marked
        as cancelled, and its calls left without a result are closed."""
        current = asyncio.current_task()
        if current is not None:
            current.uncancel()
        await self._keep_cut_call(state.session_id, run_id, state, _CANCELLED_NOTE)
        await self._writes.close_pending(state.session_id, state, "The user cancelled this call.")
        return Cancelled(run_id=run_id)

    async def _crashed(self, run_id: str, state: TurnState, exc: Exception) -> RunFailed:
        """The turn failed on a bug: its calls left without a result are closed."""
        await self._writes.close_pending(
            state.session_id, state, "The turn failed before this call ran."
        )
        return RunFailed(
            run_id=run_id,
            failure="internal",
            message=INTERNAL_ERROR,
            detail=self._redact(f"{type(exc).__name__}: {exc}"),
        )

    async def _steps(
        self,
        run_id: str,
        session_id: str,
        user_input: Message,
        context: ChannelContext,
        emit: Callable[[AgentEvent | None], None],
        state: TurnState,
    ) -> RunCompleted | RunFailed:
        """Open the turn and run its steps; a turn a crash cut off goes on from what it
        stored."""
        user_input = await self.extensions.on_input(user_input, run_id, context, state)
        start = await self._open(session_id, user_input, context, state)
        session_id = state.session_id = start.session.id
        state.first_seq = start.message.seq
        if start.resumed:
            # This message's turn was started before and cut off (a worker died): go on from
            # what it stored instead of storing the message again.
            log.warning("resuming an interrupted turn of session %s", session_id)
            state.history = await self._resumed(session_id, state)
        # The store reads images back as references: this turn's own are sent whole.
        state.history = await self.patience(
            lambda: with_recent_images(self.store, session_id, state.history), read=True
        )
        emit(
            RunStarted(
                run_id=run_id,
                session_id=session_id,
                provider=state.provider.name,
                model=state.model,
            )
        )
        last = state.history[-1] if start.resumed and state.history else None
        if last is not None and last.role == "assistant" and not last.tool_calls:
            # The cut-off turn had already answered; only its delivery may be missing.
            return RunCompleted(run_id=run_id, text=last.text, steps=0)
        if (reply := state.requests.reply) is not None:  # an extension answered: no model call
            state.history += await self._writes.persist(
                session_id, state, [Message.assistant(reply)]
            )
            return RunCompleted(run_id=run_id, text=reply, steps=0)
        return await self._loop(run_id, session_id, state.history, context, emit, state)

    async def _open(
        self, session_id: str, user_input: Message, context: ChannelContext, state: TurnState
    ) -> TurnStart:
        """Open the turn (its session, checkpoint and message, one write) and put together
        its history (`state.history`) from what this process holds and what the store had
        after it."""
        if user_input.id is None:
            # One id for every attempt: a message stored though its answer was lost is not
            # stored twice.
            user_input = user_input.model_copy(update={"id": new_id()})
        opening = TurnOpening(
            session_id=session_id,
            session_key=context.session_key,
            message=user_input,
            checkpoint=state.checkpoint,
            after_seq=self._histories.known(session_id),
            direct_with=(
                f"{context.platform}:{context.user_id}"
                if context.is_direct and context.user_id and not context.scheduled
                else None
            ),
        )
        start = await self.patience(lambda: self.store.open_turn(opening, fence=state.fence))
        state.checkpoint, state.summary = start.checkpoint, start.summary
        state.after = start.summary.up_to_seq if start.summary else 0
        state.revision = start.session.revision
        joined = self._histories.join(
            start.session.id,
            state.after,
            start.messages,
            read_after=start.read_after,
            revision=state.revision,
        )
        if joined is None:  # what this process held is of no use with this summary
            state.history = await self.patience(
                lambda: self.store.list_messages(start.session.id, after_seq=state.after),
                read=True,
            )
        else:
            state.history, state.ready = joined
        return start

    async def _resumed(self, session_id: str, state: TurnState) -> list[Message]:
        """A resumed turn's history: its calls left without a result closed first."""
        await self._writes.close_pending(
            session_id, state, "This call was interrupted before it finished."
        )
        state.ready = None
        return await self.patience(
            lambda: self.store.list_messages(session_id, after_seq=state.after), read=True
        )

    async def _loop(
        self,
        run_id: str,
        session_id: str,
        history: list[Message],
        context: ChannelContext,
        emit: Callable[[AgentEvent | None], None],
        state: TurnState,
    ) -> RunCompleted | RunFailed:
        """The turn's steps, the person's message stored already: check the budgets, ask the
        model, store its answer (with its cost), run the tools it asked for, store their
        results; again until it answers without tools."""
        system, offered, tool_context = await self._prepare(
            run_id, session_id, history, context, state
        )
        for step in range(1, self.limits.max_steps + 1):
            if step > state.max_steps:
                break
            if step > 1:
                emit(Progress(step=step, message=f"step {step}: asking the model again"))
            refusal = await self.spending.over_budget(run_id, session_id, context, state, emit)
            if refusal is not None:
                return refusal
            history += await join_arrivals(self.store, self.patience, session_id, state, emit, step)
            force = state.requests.take_compaction()  # an extension asked for it
            await self._compaction.compact(session_id, history, context, state, emit, force=force)
            outcome = await self._ask(run_id, system, offered, history, state, emit, context)
            if isinstance(outcome, RunFailed):
                await self._keep_cut_call(session_id, run_id, state, _CUT_OFF_NOTE)
                return outcome
            text, calls, finished = outcome
            if text:
                state.texts.append(text)
            answer = Message.assistant(text, calls, usage=finished.usage)
            history += await self._writes.persist(
                session_id,
                state,
                [answer],
                self.spending.cost(session_id, run_id, finished, state),
            )
            if not calls:
                if state.requests.take_compaction():
                    await self._compaction.compact(
                        session_id, history, context, state, emit, force=True
                    )
                return self._completed(run_id, text, state, step)
            done = await self._rounds.run(
                session_id, calls, context, tool_context, emit, state, step
            )
            history += done.messages
            if done.answer is not None:  # every call ended the turn: no other model call
                return self._completed(run_id, done.answer, state, step)
            if state.monitor.stopped:
                return RunFailed(
                    run_id=run_id,
                    failure="loop",
                    message=LOOP_STOPPED,
                    detail=f"{state.monitor.stop_reason} (step {step})",
                )
        return self._out_of_steps(run_id, state)

    @staticmethod
    def _completed(run_id: str, text: str, state: TurnState, step: int) -> RunCompleted:
        """The turn answered without tools at `step`: its answer, usage and cost."""
        return RunCompleted(
            run_id=run_id,
            text=text or "\n\n".join(state.texts),
            usage=state.usage,
            cost_usd=None if state.unpriced else state.cost,
            steps=step,
        )

    @staticmethod
    def _out_of_steps(run_id: str, state: TurnState) -> RunFailed:
        """The turn used all its steps (`max_steps`, fewer once degraded) without an answer."""
        return RunFailed(
            run_id=run_id,
            failure="budget",
            message=(
                f"I could not finish this within {state.max_steps} steps, so I stopped. "
                "Try asking for less at once."
            ),
            detail=f"max_steps={state.max_steps} reached",
        )

    async def _prepare(
        self,
        run_id: str,
        session_id: str,
        history: list[Message],
        context: ChannelContext,
        state: TurnState,
    ) -> tuple[str, list[Tool[Any]], ToolContext]:
        """What every step of the turn uses: the system prompt, the tools offered, the tools'
        context; the turn's memory context and its view of the window go into `state`."""
        offered = context.mode.allowed_tools(self.tools)
        answers = answers_for(self.store, self.patience, session_id, state)
        offered = offered_to(offered, context.scheduled, context.user_id, answers=answers)
        system = self.prompt.build(
            mode=context.mode,
            platform_hint=context.prompt_hint,
            session_id=session_id,
            now=self._clock(),
            scheduled=context.schedule_brief,
        )
        system = await self.extensions.on_agent_start(system, run_id, context, state)
        state.user, state.chat = spender_keys(
            context.platform, context.user_id, context.address, scheduled=context.scheduled
        )
        state.charged = context.charge_session or session_id
        state.turn_context = await self._context_for(context, history)
        state.view = TurnWindow(
            store=self.store,
            session_id=session_id,
            window_tokens=self.context_window,
            max_tokens=self.limits.max_tokens,
            fixed_tokens=estimate_text(system)
            + estimate_text(state.turn_context)
            + estimate_text(self._rounds.verify or "")
            + estimate_tools([t.spec for t in offered]),
            summary=state.summary,
            compactor=self.compactor,
            ready=state.ready,
        )
        state.ready = state.view.ready
        tool_context = ToolContext(
            session_id=session_id,
            user_id=context.user_id,
            platform=context.platform,
            address=context.address,
            is_admin=context.is_admin,
            scheduled=context.scheduled,
            clock=self._clock,
            run_id=run_id,
            charge_session=context.charge_session,
            answers=answers,
        )
        return system, offered, tool_context

    async def _ask(
        self,
        run_id: str,
        system: str,
        offered: list[Tool[Any]],
        history: list[Message],
        state: TurnState,
        emit: Callable[[AgentEvent | None], None],
        context: ChannelContext,
    ) -> tuple[str, list[ToolCall], Finished] | RunFailed:
        """One model call; a context overflow compacts (or sends less) and tries once more."""
        overflowed: ProviderError | None = None
        while True:
            try:
                messages = state.view.messages(history)
            except BudgetExceeded as exc:
                if overflowed is not None:
                    return self._failure(run_id, overflowed)
                return too_long(run_id, exc)
            messages = await self.extensions.on_context(messages, run_id, context, state)
            request = self._request(system, offered, self._rounds.checked(messages), state)
            state.in_flight, state.streamed = request, []
            try:
                text, calls, finished = await self._stream.traced_call(
                    request, emit, state.streamed, provider=state.provider, room=state.room
                )
            except ProviderError as exc:
                if exc.kind == "context_overflow" and overflowed is None:
                    overflowed = exc
                    log.warning("context overflow; compacting and retrying once")
                    if await self._compaction.compact(
                        state.session_id, history, context, state, emit, force=True
                    ):
                        continue
                    if state.view.shrink():
                        continue
                log.warning(
                    "provider %s failed (%s): %s",
                    state.provider.name,
                    exc.kind,
                    self._redact(str(exc)),
                )
                return self._failure(run_id, exc, cut_off=bool(state.streamed))
            state.in_flight = None
            await self.hooks.after_model(
                request, ModelCompletion(text=text, tool_calls=calls, finished=finished)
            )
            return text, calls, finished

    def _request(
        self, system: str, offered: list[Tool[Any]], messages: list[Message], state: TurnState
    ) -> ModelRequest:
        """The request of one model call of the turn, `messages` what fits its window."""
        # model_construct: the history is made of validated messages already; validating
        # it again on every step would cost time growing with the conversation.
        return ModelRequest.model_construct(
            model=state.model,
            system=system,
            turn_context=with_state(state.turn_context, self.step_state, state.session_id),
            messages=messages,
            tools=[t.spec for t in offered],
            max_tokens=self.limits.max_tokens,
            temperature=self.temperature,
        )

    async def _keep_cut_call(
        self, session_id: str, run_id: str, state: TurnState, note: str
    ) -> None:
        """A model call that ended early (cancelled, or its stream broke): charge what it
        spent, estimated, and keep the text it streamed, marked as cut, in the conversation.

        Best effort: the turn is ending anyway, and a write refused (a lost claim) is logged.
        """
        request, text = state.in_flight, "".join(state.streamed)
        state.in_flight, state.streamed = None, []
        if request is None:
            return
        spent = Usage(
            input_tokens=estimate_text(request.system)
            + estimate_text(request.turn_context)
            + estimate_tools(request.tools)
            + sum(estimate_tokens(m) for m in request.messages),
            output_tokens=estimate_text(text),
        )
        kept = [Message.assistant(text + note)] if text.strip() else []
        try:
            await self._writes.persist(
                session_id,
                state,
                kept,
                self.spending.cost(session_id, run_id, Finished(usage=spent), state),
            )
        except StoreError as exc:
            log.warning("could not keep the call cut short in %s: %s", session_id, exc)

    def _failure(self, run_id: str, exc: ProviderError, *, cut_off: bool = False) -> RunFailed:
        """What the person is told when the model fails (`core/failures.py`)."""
        name = exc.provider or self.provider.name
        return provider_failure(run_id, exc, provider=name, redact=self._redact, cut_off=cut_off)

    async def _context_for(self, context: ChannelContext, history: list[Message]) -> str:
        """The turn's extra context: the attention layer of a person's turn, then memory and
        the playbook's hints for the newest user text; a part that fails is left out."""
        asked = next((m.text for m in reversed(history) if m.role == "user"), "")
        heeded = self.attention is not None and self.attention.enabled and not context.scheduled
        parts = [attend(history, self.attention).layer() if heeded else ""]
        for gather in self._gatherers:
            parts.append(await self._gathered(gather, context, asked))
        return "\n\n".join(part for part in parts if part)

    async def _gathered(self, gather: TurnContext, context: ChannelContext, asked: str) -> str:
        """One part of the turn's extra context; "" when it fails."""
        try:
            return await self.patience(lambda: gather(context, asked), read=True)
        except Unavailable as exc:
            log.warning("could not gather the turn's context: %s", exc)
            return ""
        except Exception:
            # Memory is a help, not a requirement: the turn goes on without it.
            log.warning("could not gather the turn's context", exc_info=True)
            return ""
