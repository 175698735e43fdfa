"""Builds a `Worker` the way `bots/app.py` does, with test-friendly defaults for its parts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bots.app import assemble_worker
from bots.platforms import REGISTERED
from core.bus.base import Bus
from core.commands import CommandRegistry, builtin_commands
from core.confirm import Confirmations
from core.mailbox.base import Mailboxes
from core.mailbox.memory import MemoryMailboxes
from core.modes import ModeCatalog
from core.policy import ChannelPolicy
from core.readiness import Readiness
from core.redact import Redactor
from core.runtime import AgentRuntime
from core.scheduling.book import ScheduleBook
from core.store.base import Store
from core.turns import StreamPolicy
from core.worker import Worker

__all__ = ["build_worker", "stream_policies"]


def stream_policies(interval: float) -> dict[str, StreamPolicy]:
    """Every platform paced at `interval` (tests need not wait a second), progress shown
    where its ChannelSpec says."""
    return {
        name: StreamPolicy(interval=interval, shows_progress=policy.shows_progress)
        for name, policy in REGISTERED.stream_policies().items()
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
    """A worker over the given parts, with test defaults; `options` go to `Worker`."""
    options.setdefault("on_crash", None)
    options.setdefault("readiness", Readiness())
    return assemble_worker(
        bus=bus,
        store=store,
        mailboxes=mailboxes or MemoryMailboxes(),
        runtime=runtime,
        policy=policy or ChannelPolicy(),
        modes=modes or ModeCatalog(),
        prompt_hints=prompt_hints or {},
        streaming=streaming or stream_policies(stream_interval),
        book=book or ScheduleBook(store),
        commands=commands or CommandRegistry(builtin_commands()),
        confirmations=confirmations,
        redactor=Redactor(),
        **options,
    )
