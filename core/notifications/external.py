"""External triggers: a text to deliver, or a prompt to answer, asked for from outside.

`Notifier` is what `switchboard notify` and the hooks listener (`bots/hooks.py`) call. A text
goes straight to the target's `outbound.<platform>` queue as a `notification`; a prompt goes to
the mailbox of its session as `Inbound(origin="external")`, which a worker hands to
`ExternalRuns`: one turn in
the session `notify:<name>`, under the target chat's capability mode (never `full` for a hook),
not shown while it runs, its answer delivered per the policy (`always`, or `conditional`: only
an answer that starts with `[NOTIFY]`, without the marker).

Both are idempotent by key: a request with an idempotency key gets an id derived from it. A
repeated text is kept from being queued again by the bus's dedupe (a day, in the SQLite file
or Redis); a repeated prompt may be put in the mailbox again, but its processed mark (in the
database, across restarts) answers it once.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Literal

from core.bus.base import Bus
from core.bus.names import outbound_queue
from core.envelopes import Address, Inbound, NotificationSource, Outbound, new_id
from core.events import RunCompleted, RunFailed
from core.mailbox.base import Mailboxes
from core.mailbox.intake import accept_inbound
from core.runtime import ChannelContext
from core.scheduling.book import NOTIFY_MARKER, deliverable
from core.store.base import Fence, Store
from core.turns.turn import Contexts, Turn, TurnRunner

__all__ = [
    "ExternalRuns",
    "Notifier",
    "check_reachable",
    "external_brief",
    "request_id",
]

log = logging.getLogger(__name__)

ExternalPolicy = Literal["always", "conditional"]

# Ids derived from idempotency keys live in their own namespace.
_KEYS = uuid.UUID("6f1d7c52-58c4-4c1e-9a8e-0b7f3f1d2a90")


def external_brief(*, asker: str, chat: str, policy: ExternalPolicy) -> str:
    """The system-prompt section of an external request: who asks, where the answer goes,
    and (for `conditional`) exactly when it is delivered."""
    lines = [
        f"This request comes from {asker}, not from a person in a live conversation: nobody "
        "is waiting to reply to you.",
        f"Your final answer is delivered to the chat {chat} as a message of its own.",
    ]
    if policy == "conditional":
        lines[-1] = (
            f"Your final answer is delivered to the chat {chat} ONLY if it begins with "
            f"{NOTIFY_MARKER}. Begin with exactly {NOTIFY_MARKER}, then the message for the "
            "chat, when there is something worth telling them (the marker is removed). "
            f"Otherwise do not write {NOTIFY_MARKER}: say in one short line why there is "
            "nothing to report; that answer is not delivered."
        )
    return "\n".join(lines)


# Platforms no queue reaches from outside: the terminal chat shows only its own work.
UNREACHABLE = frozenset({"terminal"})


def check_reachable(address: Address) -> None:
    """`ValueError` for an address external requests cannot reach (the terminal)."""
    if address.platform in UNREACHABLE:
        raise ValueError(
            f"{address.platform} cannot be reached from outside (the terminal chat shows only "
            "its own work); use a chat platform's address"
        )


def request_id(kind: str, key: str | None) -> str:
    """A fresh id, or with an idempotency key always the same id for the same key."""
    if key is None:
        return new_id()
    return uuid.uuid5(_KEYS, f"{kind}\n{key}").hex


class Notifier:
    """Puts external notifications on the bus and prompts in their sessions' mailboxes."""

    def __init__(self, bus: Bus, mailboxes: Mailboxes) -> None:
        self.bus = bus
        self.mailboxes = mailboxes

    async def notify(
        self, to: Address, text: str, *, source: NotificationSource, key: str | None = None
    ) -> str:
        """Queue `text` for delivery to `to` as it is; returns the request's id."""
        ident = request_id("notify", key)
        outbound = Outbound(id=ident, kind="notification", address=to, text=text, source=source)
        await self.bus.enqueue(outbound_queue(to.platform), outbound, dedupe_id=f"notify:{ident}")
        return ident

    async def ask(
        self,
        to: Address,
        prompt: str,
        *,
        policy: ExternalPolicy,
        session: str,
        source: NotificationSource,
        key: str | None = None,
    ) -> str:
        """Queue a turn answering `prompt` in `notify:<session>`; returns the request's id.

        `source.kind == "cli"` runs it as the operator (the chat's mode as it is); a hook's
        turn never gets `full`.
        """
        ident = request_id("agent", key)
        inbound = Inbound(
            id=ident,
            address=to,
            text=prompt,
            origin="external",
            external_session=session,
            owner="cli" if source.kind == "cli" else f"hook:{source.name}",
            notify=policy,
        )
        await accept_inbound(inbound, mailboxes=self.mailboxes, bus=self.bus)
        return ident


class ExternalRuns:
    """Runs `Inbound(origin="external")` work and delivers the answer per its policy."""

    def __init__(self, *, bus: Bus, store: Store, contexts: Contexts, turns: TurnRunner) -> None:
        self.bus = bus
        self.store = store
        self.contexts = contexts
        self.turns = turns

    def context(self, inbound: Inbound) -> ChannelContext:
        """The target chat's mode; `full` only when the operator asked (the CLI)."""
        target = inbound.address
        is_admin = inbound.owner == "cli"
        mode_name = self.contexts.policy.mode_for_address(target)
        if mode_name == "full" and not is_admin:
            mode_name = "safe-chat"
        owner = inbound.owner or "cli"
        asker = (
            "the operator, from the command line"
            if is_admin
            else f"the external hook {owner.removeprefix('hook:')!r}"
        )
        policy: ExternalPolicy = "conditional" if inbound.notify == "conditional" else "always"
        return ChannelContext(
            platform=target.platform,
            mode=self.contexts.modes.get(mode_name),
            prompt_hint=self.contexts.prompt_hints.get(target.platform, ""),
            session_key=inbound.session_key,
            user_id=owner,
            address=target,
            is_admin=is_admin,
            # Like a schedule's run: quiet, no memory writes, scoped to who asked.
            scheduled=True,
            schedule_brief=external_brief(asker=asker, chat=str(target), policy=policy),
        )

    async def run(self, inbound: Inbound, *, cancel: asyncio.Event, fence: Fence | None) -> None:
        """Answer the prompt quietly in its session; deliver what the policy lets through."""
        session = await self.store.current_session(inbound.session_key)
        context = self.context(inbound)
        # On the model the chat it answers in chose (`/model`), as a scheduled run is.
        chat = await self.store.find_current_session(inbound.address.session_key)
        turn = Turn(
            inbound=inbound,
            context=context,
            session_id=session.id,
            model=None if chat is None else chat.model,
            shown=False,
        )
        outcome = await self.turns.run(turn, cancel=cancel, fence=fence)
        if not isinstance(outcome, RunCompleted):
            why = outcome.detail or outcome.message if isinstance(outcome, RunFailed) else "none"
            log.warning("external request %s got no answer (%s)", inbound.id, why)
            return
        policy: ExternalPolicy = "conditional" if inbound.notify == "conditional" else "always"
        text = deliverable(policy, outcome.text)
        if text is None:
            log.info("external request %s: the answer stays quiet (%s)", inbound.id, policy)
            return
        owner = inbound.owner or "cli"
        kind: Literal["hook", "cli"] = "cli" if owner == "cli" else "hook"
        name = inbound.external_session or "default"
        outbound = Outbound(
            kind="notification",
            address=inbound.address,
            text=text,
            source=NotificationSource(kind=kind, name=name, run_id=inbound.id),
        )
        await self.bus.enqueue(
            outbound_queue(inbound.address.platform), outbound, dedupe_id=f"answer:{inbound.id}"
        )
