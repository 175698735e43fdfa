"""Layered spending budgets in USD, checked against the cost ledger before each model call.

Five limits, each optional (`[budgets]` in profile.toml):

| limit | counts | resets |
|---|---|---|
| `global_daily` | every call of the bot | UTC midnight |
| `per_user_daily` | the calls answering one person (a schedule's, its owner) | UTC midnight |
| `per_chat_daily` | the calls in one chat, whatever its sessions (`/new`) | UTC midnight |
| `per_session` | one conversation (`max_spend_usd` is its older name) | `/new` |
| `per_schedule_run` | one run of a schedule | the next run |

`BudgetGuard.check` names the first limit reached (in the order of `_ORDER`); the runtime turns
it into one sentence for the person, and `BudgetAlerts` tells the admins once per limit, scope
and day with a `budget.reached` event on the `events` topic.

Cheaper before refused: with `degrade_at` and `degrade_model`, `BudgetGuard.assess` also says
when a daily scope (person, chat or bot) has spent that share of its limit; the runtime then
runs the turn on `degrade_model` (and at most `degrade_steps` steps). At 100 % the refusal stays.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, time, timedelta
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.bus.base import Bus
from core.bus.names import EVENTS, outbound_queue
from core.clock import Clock, utc_now
from core.envelopes import Address, EventEnvelope, NotificationSource, Outbound
from core.store.ledger import CostLedger
from core.store.processed import ProcessedMarks

__all__ = [
    "BUDGET_REACHED",
    "BudgetAlerts",
    "BudgetGuard",
    "BudgetHit",
    "BudgetName",
    "Budgets",
    "Degrade",
    "Spender",
    "Verdict",
    "spender_keys",
]

log = logging.getLogger(__name__)

# The name of the event that tells admins a budget was reached (on the `events` topic).
BUDGET_REACHED: Final = "budget.reached"

BudgetName = Literal[
    "per_schedule_run", "per_session", "per_user_daily", "per_chat_daily", "global_daily"
]


class Budgets(BaseModel):
    """`[budgets]` of profile.toml: spending limits in USD; an unset one does not apply."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    global_daily: float | None = Field(default=None, ge=0)
    per_user_daily: float | None = Field(default=None, ge=0)
    per_chat_daily: float | None = Field(default=None, ge=0)
    per_session: float | None = Field(default=None, ge=0)
    per_schedule_run: float | None = Field(default=None, ge=0)
    # Cheaper before refused: past this share of a daily limit, turns run on `degrade_model`
    # (which `bots/providers.py` checks the profile can reach) and at most `degrade_steps`.
    degrade_at: float | None = Field(default=None, gt=0, lt=1)
    degrade_model: str | None = Field(default=None, min_length=1)
    degrade_steps: int | None = Field(default=None, ge=1, le=100)

    @model_validator(mode="after")
    def _degrade_is_whole(self) -> Budgets:
        if (self.degrade_at is None) != (self.degrade_model is None):
            raise ValueError("budgets: degrade_at and degrade_model go together; set both")
        if self.degrade_steps is not None and self.degrade_model is None:
            raise ValueError("budgets: degrade_steps needs degrade_at and degrade_model")
        daily = (self.per_user_daily, self.per_chat_daily, self.global_daily)
        if self.degrade_at is not None and all(limit is None for limit in daily):
            raise ValueError(
                "budgets: degrade_at needs a daily limit (per_user_daily, per_chat_daily or "
                "global_daily) to be a share of"
            )
        return self

    def any_set(self) -> bool:
        """Whether at least one limit applies."""
        limits = (
            self.global_daily,
            self.per_user_daily,
            self.per_chat_daily,
            self.per_session,
            self.per_schedule_run,
        )
        return any(value is not None for value in limits)


class Spender(BaseModel):
    """Whose money a model call spends: its session, person, chat, and whether a schedule's."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    # `<platform>:<user id>` (a schedule's owner), `<platform>:<bot>:<chat>`; None: unknown.
    user: str | None = None
    chat: str | None = None
    scheduled: bool = False


class BudgetHit(BaseModel):
    """A limit reached: which, how much, by whom, and when it resets (None: not by time)."""

    model_config = ConfigDict(frozen=True)

    name: BudgetName
    limit_usd: float
    spent_usd: float
    # The person, chat or session the limit counts for ("all" for the global one).
    scope: str
    resets_at: datetime | None = None

    def sentence(self, now: datetime) -> str:
        """The one sentence the person gets."""
        amount = dollars(self.limit_usd)
        when = "" if self.resets_at is None else _resets(self.resets_at, now)
        match self.name:
            case "per_session":
                return (
                    f"This conversation has reached its spending limit of {amount}. "
                    "Send /new to start a fresh one."
                )
            case "per_schedule_run":
                return (
                    f"This scheduled run reached its spending limit of {amount} per run and "
                    "stopped; the next run starts afresh."
                )
            case "per_user_daily":
                return f"You have reached your daily spending limit of {amount}; {when}."
            case "per_chat_daily":
                return f"This chat has reached its daily spending limit of {amount}; {when}."
            case "global_daily":
                return f"This bot has reached its daily spending limit of {amount}; {when}."


class Degrade(BaseModel):
    """A daily scope past `degrade_at` of its limit: the turn runs on the cheaper model."""

    model_config = ConfigDict(frozen=True)

    # The scope closest to its limit (the largest share spent).
    name: BudgetName
    limit_usd: float
    spent_usd: float
    scope: str
    model: str
    steps: int | None = None

    def sentence(self) -> str:
        """What `/cost` says of it."""
        share = self.spent_usd / self.limit_usd if self.limit_usd else 1.0
        whose = {"per_user_daily": "your", "per_chat_daily": "this chat's"}.get(
            self.name, "this bot's"
        )
        return (
            f"Past {share:.0%} of {whose} daily spending limit of {dollars(self.limit_usd)}, "
            f"turns run on the cheaper model {self.model} until midnight UTC."
        )


class Verdict(BaseModel):
    """What the budgets say of one model call: refused (`hit`), cheaper (`degrade`), or
    neither."""

    model_config = ConfigDict(frozen=True)

    hit: BudgetHit | None = None
    degrade: Degrade | None = None


# Called once for every hit (BudgetAlerts keeps it to once per limit, scope and day).
BudgetAlert = Callable[[BudgetHit], Awaitable[None]]


class BudgetGuard:
    """Checks the layered budgets of one model call against the ledger."""

    def __init__(
        self,
        budgets: Budgets,
        ledger: CostLedger,
        *,
        clock: Clock = utc_now,
        on_hit: BudgetAlert | None = None,
    ) -> None:
        self.budgets = budgets
        self.ledger = ledger
        self._clock = clock
        self._on_hit = on_hit

    async def check(self, spender: Spender, run_spent: float = 0.0) -> BudgetHit | None:
        """The first limit this call would pass (spent is already at or over it), or None.

        `run_spent` is what the turn under way spent so far (the per-run limit reads it).
        """
        return (await self.assess(spender, run_spent)).hit

    async def assess(self, spender: Spender, run_spent: float = 0.0) -> Verdict:
        """`check`, and whether the call should run on the cheaper model, in one ledger read."""
        verdict = await self._verdict(spender, run_spent)
        hit = verdict.hit
        if hit is not None and self._on_hit is not None:
            try:
                await self._on_hit(hit)
            except Exception:
                # Telling the admins is best effort; the person's refusal must still go out.
                log.warning("could not report the %s budget", hit.name, exc_info=True)
        return verdict

    async def _verdict(self, spender: Spender, run_spent: float) -> Verdict:
        limits = self.budgets
        if spender.scheduled and limits.per_schedule_run is not None:
            if run_spent >= limits.per_schedule_run:
                return Verdict(
                    hit=BudgetHit(
                        name="per_schedule_run",
                        limit_usd=limits.per_schedule_run,
                        spent_usd=run_spent,
                        scope=spender.session_id,
                    )
                )
        now = self._clock().astimezone(UTC)
        midnight = datetime.combine(now.date() + timedelta(days=1), time(), tzinfo=UTC)
        # A limit whose person or chat is unknown (a call nobody asked for) does not apply.
        daily: list[tuple[BudgetName, float | None, str | None]] = []
        if spender.user is not None:
            daily.append(("per_user_daily", limits.per_user_daily, spender.user))
        if spender.chat is not None:
            daily.append(("per_chat_daily", limits.per_chat_daily, spender.chat))
        daily.append(("global_daily", limits.global_daily, "all"))
        if limits.per_session is None and all(limit is None for _, limit, _ in daily):
            return Verdict()
        # Every scope in one read of the ledger, before each call.
        spending = await self.ledger.spending(
            now.date(), session_id=spender.session_id, user=spender.user, chat=spender.chat
        )
        if limits.per_session is not None and spending.session >= limits.per_session:
            return Verdict(
                hit=BudgetHit(
                    name="per_session",
                    limit_usd=limits.per_session,
                    spent_usd=spending.session,
                    scope=spender.session_id,
                )
            )
        spent_by = {
            "per_user_daily": spending.user_daily,
            "per_chat_daily": spending.chat_daily,
            "global_daily": spending.global_daily,
        }
        for name, limit, scope in daily:
            if limit is not None and spent_by[name] >= limit:
                return Verdict(
                    hit=BudgetHit(
                        name=name,
                        limit_usd=limit,
                        spent_usd=spent_by[name],
                        scope=scope or "all",
                        resets_at=midnight,
                    )
                )
        return Verdict(degrade=self._degrade(daily, spent_by))

    def _degrade(
        self,
        daily: Sequence[tuple[BudgetName, float | None, str | None]],
        spent_by: dict[str, float],
    ) -> Degrade | None:
        """The daily scope closest to its limit, if past `degrade_at` of it."""
        limits = self.budgets
        if limits.degrade_at is None or limits.degrade_model is None:
            return None
        closest: Degrade | None = None
        best = -1.0
        for name, limit, scope in daily:
            if not limit:
                continue
            share = spent_by[name] / limit
            if share >= limits.degrade_at and share > best:
                best = share
                closest = Degrade(
                    name=name,
                    limit_usd=limit,
                    spent_usd=spent_by[name],
                    scope=scope or "all",
                    model=limits.degrade_model,
                    steps=limits.degrade_steps,
                )
        return closest


class BudgetAlerts:
    """Tells the admins a budget was reached: one `budget.reached` event per limit, scope and
    UTC day, however many workers see the hit (the processed marks are shared), and the same
    news as a notification to each admin DM address given (`admin_dms`)."""

    def __init__(
        self,
        bus: Bus,
        marks: ProcessedMarks,
        *,
        admin_dms: Sequence[Address] = (),
        clock: Clock = utc_now,
    ) -> None:
        self.bus = bus
        self.marks = marks
        self.admin_dms = tuple(admin_dms)
        self._clock = clock

    async def __call__(self, hit: BudgetHit) -> None:
        """Publish the event unless this limit's hit was reported today already."""
        day = self._clock().astimezone(UTC).date().isoformat()
        first = await self.marks.mark_processed(f"budget-alert:{hit.name}:{hit.scope}:{day}")
        if not first:
            return
        log.warning(
            "budget %s reached by %s: $%.4f of $%g",
            hit.name,
            hit.scope,
            hit.spent_usd,
            hit.limit_usd,
        )
        await self.bus.publish(
            EVENTS,
            EventEnvelope(
                name=BUDGET_REACHED,
                session_id=hit.scope if hit.name in ("per_session", "per_schedule_run") else "",
                run_id="",
                data=hit.model_dump(mode="json"),
            ),
        )
        note = (
            f"Budget reached: {hit.name} ({dollars(hit.limit_usd)}) by {hit.scope}, "
            f"${hit.spent_usd:.4f} spent."
        )
        if hit.resets_at is not None:
            note += " It resets at midnight UTC."
        for address in self.admin_dms:
            await self.bus.enqueue(
                outbound_queue(address.platform),
                Outbound(
                    kind="notification",
                    address=address,
                    text=note,
                    # Fanned out on `notifications` with its receipt, like every proactive one.
                    source=NotificationSource(kind="alert", name=f"budget:{hit.name}"),
                ),
                dedupe_id=f"budget-alert:{hit.name}:{hit.scope}:{day}:{address}",
            )


def spender_keys(
    platform: str, user_id: str, address: Address | None, *, scheduled: bool
) -> tuple[str | None, str | None]:
    """The ledger's person and chat keys of a turn: `<platform>:<user id>` (a schedule's
    owner is already so written) and `<platform>:<bot>:<chat>` (threads count to their chat)."""
    user: str | None
    if scheduled:
        user = user_id or None
    else:
        user = f"{platform}:{user_id}" if user_id else None
    chat = f"{address.platform}:{address.bot}:{address.chat}" if address is not None else None
    return user, chat


def dollars(amount: float) -> str:
    """`$5.00` or `$0.25`, but `$0.001` rather than a misleading `$0.00`."""
    return f"${amount:.2f}" if round(amount, 2) == amount else f"${amount:g}"


def _resets(at: datetime, now: datetime) -> str:
    minutes = max(1, int((at - now).total_seconds() // 60))
    hours, minutes = divmod(minutes, 60)
    left = f"{hours} h {minutes} min" if hours else f"{minutes} min"
    return f"it resets at midnight UTC (in {left})"
