"""Builds a `Worker` the way `bots/app.py` does, with test-friendly defaults for its parts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.bus.base import Bus
from core.commands import CommandRegistry, builtin_commands
from core.confirm import Confirmations
from core.mailbox.base import Mailboxes
from core.mailbox.memory import MemoryMailboxes
from core.modes import ModeCatalog
from core.policy import ChannelPolicy
from core.readiness import Readiness
from core.runtime import AgentRuntime
from core.scheduling.book import ScheduleBook
from core.store.base import Store
from core.turns import (
    Contexts,
    InboundHandler,
    Lifecycle,
    Outbox,
    ScheduledRuns,
    StreamPolicy,
    TurnRunner,
)
from core.worker import Worker

__all__ = ["build_worker", "stream_policies"]

# The platforms that show notes of tool activity (as in bots/app.py).
_SHOW_PROGRESS = frozenset({"terminal", "slack"})


def stream_policies(interval: float) -> dict[str, StreamPolicy]:
    """Every platform paced at `interval`, progress shown where the product shows it."""
    return {
        platform: StreamPolicy(interval=interval, shows_progress=platform in _SHOW_PROGRESS)
        for platform in ("terminal", "telegram", "slack", "discord")
    }


def build_worker(
    *,
    bus: Bus,
    store: Store,
    runtime: AgentRuntime,
    policy: ChannelPolicy | None = None,
    modes: ModeCatalog | None = None,
    prompt_hints: Mapping[str, str] | None = None,
    stream_interval: float = 0.05,
    streaming: Mapping[str, StreamPolicy] | None = None,
    mailboxes: Mailboxes | None = None,
    book: ScheduleBook | None = None,
    commands: CommandRegistry | None = None,
    confirmations: Confirmations | None = None,
    **options: Any,
) -> Worker:
    """A worker over the given parts; `options` go to `Worker` (`name`, `on_crash`, ...)."""
    policy = policy or ChannelPolicy()
    contexts = Contexts(
        modes=modes or ModeCatalog(), policy=policy, prompt_hints=prompt_hints or {}
    )
    outbox = Outbox(bus, streaming or stream_policies(stream_interval))
    turns = TurnRunner(runtime=runtime, store=store, outbox=outbox, lifecycle=Lifecycle(bus))
    handler = InboundHandler(
        store=store,
        policy=policy,
        commands=commands or CommandRegistry(builtin_commands()),
        contexts=contexts,
        turns=turns,
        scheduled=ScheduledRuns(
            bus=bus, store=store, book=book or ScheduleBook(store), contexts=contexts, turns=turns
        ),
        outbox=outbox,
    )
    options.setdefault("on_crash", None)
    options.setdefault("readiness", Readiness())
    return Worker(
        bus=bus,
        store=store,
        mailboxes=mailboxes or MemoryMailboxes(),
        handler=handler,
        confirmations=confirmations,
        **options,
    )
