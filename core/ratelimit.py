"""Rate limits per person and per chat, and a cap on each person's turns per day.

`[limits]` in profile.toml: `rate_limit = "20/minute"` (one person, any chat),
`chat_rate_limit = "60/minute"` (one chat, everyone in it), `daily_turns = 200` (one person,
any moving 24 hours). The `limits` package counts (moving windows), in the storage `bots/`
gives: its Redis storage in the distributed deployment, so every worker shares the counters
(each hit is one atomic script), and its memory storage in the embedded one (one process).

Chat commands (`/help`, `/cost`, `/new`...) count against the same per-person and per-chat
rates as messages (each answer is a write the bot makes, and `/new` makes a session), but not
against the daily turns, which are for turns the model runs.

Over a limit the person gets one short notice per window of that limit, then silence, and no
turn runs (and no command is answered). Local channels (the terminal and the web page) and
admins are exempt; scheduled runs are not turns a person sends, so the budgets
(`core/budgets.py`) bound them instead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.envelopes import Inbound

# `limits` (about 30 ms of imports) is loaded when a profile's rate is checked or a message
# first tested, not at start: `switchboard chat`, whose terminal is never limited, does without
# it unless its profile writes a rate of its own.
if TYPE_CHECKING:
    from limits import RateLimitItem
    from limits.aio.storage import Storage
    from limits.aio.strategies import MovingWindowRateLimiter

__all__ = ["LOCAL_PLATFORMS", "RateLimitSettings", "RateLimits", "Tested"]

log = logging.getLogger(__name__)

# Channels whose person is the operator at this machine: never limited.
LOCAL_PLATFORMS: Final = frozenset({"terminal", "web"})


class RateLimitSettings(BaseModel):
    """`[limits]` of profile.toml; a limit set to "" (or `daily_turns = 0`) is off."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # `limits` notation: "20/minute", "5 per 10 seconds", "100/hour".
    rate_limit: str = "20/minute"
    chat_rate_limit: str = "60/minute"
    daily_turns: int = Field(default=200, ge=0)

    @field_validator("rate_limit", "chat_rate_limit")
    @classmethod
    def _readable(cls, value: str) -> str:
        if value.strip():
            from limits import parse

            try:
                parse(value)
            except ValueError:
                raise ValueError(
                    f"{value!r} is not a rate; write it like '20/minute' or '5 per 10 seconds'"
                ) from None
        return value


@dataclass(frozen=True, slots=True)
class _Limit:
    """One limit as checked: its item, what it is keyed by, and the notice when it is hit."""

    name: str
    item: RateLimitItem
    notice: str


@dataclass(frozen=True, slots=True)
class Tested:
    """How a message stands against each limit that applies to it (none: exempt)."""

    checks: list[tuple[_Limit, tuple[str, ...]]]
    passed: list[bool]


class RateLimits:
    """Decides whether a person's message may become a turn; shared by every worker that uses
    the same storage."""

    def __init__(
        self,
        settings: RateLimitSettings,
        storage: Storage | Callable[[], Storage],
        *,
        exempt_platforms: Collection[str] = LOCAL_PLATFORMS,
    ) -> None:
        """`storage` is the counters' storage, or what makes it on the first message that is
        tested (so that a process whose messages are all exempt never loads `limits`)."""
        self._settings = settings
        self._storage = storage
        self._exempt = frozenset(exempt_platforms)
        self._parts: _Parts | None = None

    def _ready(self) -> _Parts:
        """The limiter and the limits, made the first time they are needed."""
        if self._parts is None:
            from limits import RateLimitItemPerDay
            from limits.aio.storage import Storage
            from limits.aio.strategies import MovingWindowRateLimiter

            settings = self._settings
            storage = self._storage
            daily = settings.daily_turns
            self._parts = _Parts(
                limiter=MovingWindowRateLimiter(
                    storage if isinstance(storage, Storage) else storage()
                ),
                person=_limit(
                    "person",
                    settings.rate_limit,
                    "You are sending messages faster than I answer ({rate}); please wait a moment.",
                ),
                chat=_limit(
                    "chat",
                    settings.chat_rate_limit,
                    "This chat is sending more messages than I answer ({rate}); please wait a"
                    " moment.",
                ),
                daily=_Limit(
                    name="daily",
                    item=RateLimitItemPerDay(daily),
                    notice=(
                        f"You have used your {daily} messages for the last 24 hours;"
                        " please try again later."
                    ),
                )
                if daily
                else None,
            )
        return self._parts

    async def admit(self, inbound: Inbound, *, is_admin: bool) -> tuple[bool, str | None]:
        """Whether `inbound` may run a turn (or, a command, be answered), and the notice to
        send when it may not (None: stay silent, the person was told already in this window).
        Admitting counts it."""
        return await self.settle(await self.test(inbound, is_admin=is_admin))

    async def test(self, inbound: Inbound, *, is_admin: bool) -> Tested:
        """The first half of `admit`, which only reads: how `inbound` stands against each
        limit (a command: not against the daily turns). The worker asks for it together with
        its other reads of the message."""
        address = inbound.address
        if is_admin or address.platform in self._exempt:
            return Tested(checks=[], passed=[])
        parts = self._ready()
        person: tuple[str, ...] = (address.platform, inbound.user_id)
        checks: list[tuple[_Limit, tuple[str, ...]]] = [
            (limit, keys)
            for limit, keys in (
                (parts.person, person),
                (parts.chat, (address.platform, address.bot, address.chat)),
                (None if inbound.kind == "command" else parts.daily, person),
            )
            if limit is not None
        ]
        # The limits are independent, so they are asked all at once.
        passed = await asyncio.gather(
            *(parts.limiter.test(limit.item, limit.name, *keys) for limit, keys in checks)
        )
        return Tested(checks=checks, passed=list(passed))

    async def settle(self, tested: Tested) -> tuple[bool, str | None]:
        """The second half of `admit`: count the message against every limit it passed, or
        refuse it (and the notice, if due)."""
        # Tested first, then counted: a message refused by one limit uses none of the others.
        for (limit, keys), ok in zip(tested.checks, tested.passed, strict=True):
            if not ok:
                return False, await self._notice(limit, keys)
        limiter = self._ready().limiter
        counted = await asyncio.gather(
            *(limiter.hit(limit.item, limit.name, *keys) for limit, keys in tested.checks)
        )
        for (limit, keys), ok in zip(tested.checks, counted, strict=True):
            if not ok:
                # Another worker took the last place between the test and the hit.
                return False, await self._notice(limit, keys)
        return True, None

    async def forget(self, platform: str, user_id: str) -> None:
        """Drop one person's counters (their rate, their daily turns and the notices of both),
        as when they asked to be forgotten; the chats' counters are nobody's and stay."""
        parts = self._ready()
        person = (platform, user_id)
        for limit in (parts.person, parts.daily):
            if limit is None:
                continue
            from limits import RateLimitItemPerSecond

            once = RateLimitItemPerSecond(1, limit.item.get_expiry())
            await parts.limiter.clear(limit.item, limit.name, *person)
            await parts.limiter.clear(once, "notice", limit.name, *person)

    async def _notice(self, limit: _Limit, keys: tuple[str, ...]) -> str | None:
        """The limit's notice the first time it is hit in its window; None after that."""
        log.info("rate limit %s reached by %s", limit.name, ":".join(keys))
        from limits import RateLimitItemPerSecond

        once = RateLimitItemPerSecond(1, limit.item.get_expiry())
        first = await self._ready().limiter.hit(once, "notice", limit.name, *keys)
        return limit.notice if first else None


@dataclass(frozen=True, slots=True)
class _Parts:
    limiter: MovingWindowRateLimiter
    person: _Limit | None
    chat: _Limit | None
    daily: _Limit | None


def _limit(name: str, rate: str, notice: str) -> _Limit | None:
    if not rate.strip():
        return None
    from limits import parse

    item = parse(rate)
    shown = f"{item.amount} per {_window(item)}"
    return _Limit(name=name, item=item, notice=notice.format(rate=shown))


def _window(item: RateLimitItem) -> str:
    """`minute`, `10 seconds`: the window of a rate, as a person reads it."""
    unit = item.GRANULARITY.name
    return unit if item.multiples == 1 else f"{item.multiples} {unit}s"
