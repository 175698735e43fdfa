"""`TurnSpending`: what a turn's model calls cost, and whether it may make another.

Before each model call the turn's own cap (`max_turn_cost_usd`), then the layered budgets
(`core/budgets.py`, or the session's `max_spend_usd` without them) are checked; a budget past
its `degrade_at` moves the rest of the turn onto the cheaper model. After each call its usage
is priced into a ledger entry and added to the turn's totals.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from core.budgets import BudgetGuard, Degrade, Spender, dollars
from core.clock import Clock
from core.envelopes import new_id
from core.events import AgentEvent, Degraded, Finished, RunFailed
from core.messages import Usage
from core.model_choice import ModelChoices
from core.outages import Patience
from core.store.ledger import CostEntry, CostLedger
from core.turn_state import ChannelContext, RuntimeLimits, TurnState

__all__ = ["CostFunction", "TurnSpending"]

log = logging.getLogger(__name__)

# The price of one call's usage for a model; None when the model has no known price.
CostFunction = Callable[[str, Usage], float | None]


class TurnSpending:
    """The spending checks and the pricing of one runtime's turns."""

    def __init__(
        self,
        *,
        limits: RuntimeLimits,
        ledger: CostLedger,
        patience: Patience,
        clock: Clock,
        cost: CostFunction | None = None,
        budgets: BudgetGuard | None = None,
        models: ModelChoices | None = None,
    ) -> None:
        self.limits = limits
        self.ledger = ledger
        self.patience = patience
        self.clock = clock
        self.cost_of = cost
        self.budgets = budgets
        self.models = models

    async def over_budget(
        self,
        run_id: str,
        session_id: str,
        context: ChannelContext,
        state: TurnState,
        emit: Callable[[AgentEvent | None], None],
    ) -> RunFailed | None:
        """The refusal of a turn that may not make another model call; None: it may."""
        cap = self.limits.max_turn_cost_usd
        if cap is not None and state.cost >= cap:
            return RunFailed(
                run_id=run_id,
                failure="budget",
                message=f"This task reached its spending limit of {dollars(cap)}, so I stopped.",
                detail=f"spent ${state.cost:.4f} of max_turn_cost_usd={cap}",
            )
        if self.budgets is not None:
            return await self._layered(self.budgets, run_id, session_id, context, state, emit)
        return await self._session(run_id, state.charged or session_id)

    async def _layered(
        self,
        budgets: BudgetGuard,
        run_id: str,
        session_id: str,
        context: ChannelContext,
        state: TurnState,
        emit: Callable[[AgentEvent | None], None],
    ) -> RunFailed | None:
        """The layered budgets' verdict; one past its `degrade_at` degrades the turn."""
        spender = Spender(
            session_id=state.charged or session_id,
            user=state.user,
            chat=state.chat,
            scheduled=context.scheduled,
        )
        verdict = await self.patience(lambda: budgets.assess(spender, state.cost), read=True)
        hit = verdict.hit
        if hit is None:
            if verdict.degrade is not None:
                self.degrade(verdict.degrade, state, emit)
            return None
        return RunFailed(
            run_id=run_id,
            failure="budget",
            message=hit.sentence(self.clock()),
            detail=f"spent ${hit.spent_usd:.4f} of {hit.name}={hit.limit_usd}",
        )

    async def _session(self, run_id: str, session_id: str) -> RunFailed | None:
        """Without layered budgets: the session's `max_spend_usd`."""
        limit = self.limits.max_spend_usd
        if limit is None:
            return None
        summary = await self.patience(lambda: self.ledger.cost_summary(session_id), read=True)
        spent = summary.cost_usd
        if spent < limit:
            return None
        return RunFailed(
            run_id=run_id,
            failure="budget",
            message=(
                f"This conversation has reached its spending limit of {dollars(limit)}. "
                "Send /new to start a fresh one."
            ),
            detail=f"spent ${spent:.4f} of max_spend_usd={limit}",
        )

    def degrade(
        self, degrade: Degrade, state: TurnState, emit: Callable[[AgentEvent | None], None]
    ) -> None:
        """Run the rest of the turn on the cheaper model (and within its steps), silently."""
        if state.degraded:
            return
        reached = self.models.reach(degrade.model) if self.models is not None else None
        if reached is None:
            # The start checks the profile can reach it; one gone since is no reason to refuse.
            log.warning(
                "degrade_model %s cannot be reached; the turn keeps its model", degrade.model
            )
            return
        state.provider, state.model = reached
        state.degraded = True
        if degrade.steps is not None:
            state.max_steps = min(state.max_steps, degrade.steps)
        log.info(
            "%s of %s past degrade_at: this turn runs on %s",
            degrade.name,
            degrade.scope,
            degrade.model,
        )
        emit(Degraded(model=degrade.model, budget=degrade.name, scope=degrade.scope))

    def cost(self, session_id: str, run_id: str, finished: Finished, state: TurnState) -> CostEntry:
        """The ledger entry of one model call, its usage and cost added to the turn's."""
        model = finished.model or state.model
        cost = self.cost_of(model, finished.usage) if self.cost_of else None
        state.usage += finished.usage
        if cost is None:
            state.unpriced = True
        else:
            state.cost += cost
        return CostEntry(
            session_id=state.charged or session_id,
            run_id=run_id,
            provider=finished.provider or state.provider.name,
            model=model,
            usage=finished.usage,
            cost_usd=cost,
            at=self.clock(),
            user=state.user,
            chat=state.chat,
            degraded=state.degraded,
            # One id for every attempt: a write that landed though its answer was lost is not
            # charged twice.
            id=new_id(),
        )
