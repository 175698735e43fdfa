"""Builds a `Worker` the way `bots/app.py` does, with test-friendly defaults for its parts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bots.app import assemble_worker
from bots.platforms import REGISTERED
from core.bus import outbound_queue
from core.bus.base import Bus
from core.commands import CommandRegistry, builtin_commands
from core.confirm import Confirmations
from core.envelopes import Inbound, Outbound
from core.mailbox.base import Mailboxes
from core.mailbox.intake import accept_inbound
from core.modes import ModeCatalog
from core.policy import ChannelPolicy
from core.readiness import Readiness
from core.redact import Redactor
from core.runtime import AgentRuntime
from core.scheduling.book import ScheduleBook
from core.store.base import Store
from core.turns import StreamPolicy
from core.worker import Worker
from tests.backends.memory_mailboxes import MemoryMailboxes

__all__ = ["Outbox", "build_worker", "hand_in", "stream_policies", "take_waiting"]

PATIENCE = 5.0


class Outbox:
    """Reads a platform's outbound queue, keeping everything it saw in arrival order."""

    def __init__(self, bus: Bus, platform: str = "terminal") -> None:
        self.bus = bus
        self.queue = outbound_queue(platform)
        self.seen: list[Outbound] = []

    async def next(self, wait: float = PATIENCE) -> Outbound | None:
        """The next delivery (acked and kept), or None if none came within `wait` seconds."""
        delivery = await self.bus.receive(self.queue, consumer="test", timeout=wait)
        if delivery is None:
            return None
        await delivery.ack()
        envelope = delivery.envelope
        assert isinstance(envelope, Outbound)
        self.seen.append(envelope)
        return envelope

    async def until(self, wanted: str = "", kind: str = "") -> Outbound:
        """The first delivery (seen or yet to come) whose text contains `wanted`, of `kind`."""
        while not (found := [o for o in self.seen if wanted in o.text and kind in ("", o.kind)]):
            came = await self.next()
            assert came is not None, f"{wanted!r} ({kind}) never arrived; saw {self.seen}"
        return found[0]

    async def turn_of(self, inbound: Inbound) -> list[Outbound]:
        """Everything sent for `inbound` up to and including what ends its turn."""
        while not any(o.reply_to == inbound.id and o.ends_turn for o in self.seen):
            came = await self.next()
            assert came is not None, f"nothing arrived on {self.queue}; saw {self.seen}"
        return [o for o in self.seen if o.reply_to == inbound.id]

    async def rest(self) -> list[Outbound]:
        """Whatever is still waiting (read without waiting for more), kept too."""
        came: list[Outbound] = []
        while (envelope := await self.next(wait=0.05)) is not None:
            came.append(envelope)
        return came

    async def is_empty(self) -> bool:
        return await self.bus.receive(self.queue, consumer="test", timeout=0) is None


def stream_policies(interval: float) -> dict[str, StreamPolicy]:
    """Every platform paced at `interval` (tests need not wait a second), progress shown
    where its ChannelSpec says."""
    return {
        name: StreamPolicy(
            interval=interval,
            shows_progress=policy.shows_progress,
            edits_in_place=policy.edits_in_place,
        )
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


async def hand_in(worker: Worker, *inbounds: Inbound) -> None:
    """Hand `inbounds` to `worker` as a gateway does: into their sessions' mailboxes (and on
    the control topic when they are for a running turn)."""
    for inbound in inbounds:
        await accept_inbound(inbound, mailboxes=worker.mailboxes, bus=worker.bus)


async def take_waiting(mailboxes: Mailboxes) -> list[Inbound]:
    """Everything waiting in the mailboxes of sessions nobody holds, taken out, oldest first."""
    found: list[Inbound] = []
    for session_key in await mailboxes.pending():
        claim = await mailboxes.claim(session_key, owner="test")
        assert claim is not None
        while (head := await claim.head()) is not None:
            found.append(head)
            await claim.done(head)
        await claim.release()
    return sorted(found, key=lambda inbound: inbound.received_at)
