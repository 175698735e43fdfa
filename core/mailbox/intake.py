"""`accept_inbound`: where every producer hands in an `Inbound`.

Gateways, the scheduler, the hooks listener and the web page all call it, so one rule decides
where a piece of work goes: a message into its session's mailbox (which wakes a worker), and
whatever the turn running in that session must hear at once on the `control` topic, which
every worker hears (whichever holds the session acts on it).

A message's hand-over is the first span of its trace (`mailbox put`), and the envelope carries
that span's `traceparent` to the worker (`core/tracing.py`).
"""

from __future__ import annotations

from opentelemetry.trace import SpanKind

from core.bus.base import Bus
from core.bus.names import CONTROL
from core.confirm import Confirmations
from core.envelopes import Inbound
from core.mailbox.base import Mailboxes
from core.stopping import is_stop_command
from core.tracing import span, traceparent

__all__ = ["accept_inbound"]


async def accept_inbound(inbound: Inbound, *, mailboxes: Mailboxes, bus: Bus) -> None:
    """Put `inbound` where the worker of its session finds it.

    A cancel or a press of a confirmation button goes on `control` only. A `/stop` goes in the
    mailbox and on `control`: the running turn, wherever it runs, stops at once, and the
    mailbox copy answers "nothing to stop" if none ran (`core/stopping.py`). A typed yes or no
    does the same: the worker whose turn waits for that answer takes it from `control` and
    marks it processed, so the mailbox copy is skipped; with no question waiting, the copy is
    an ordinary message (`core/confirm.py`). Calling it again after a failure is safe: the
    mailbox keeps one copy of an envelope, and the processed marks answer a message once.
    """
    if inbound.kind in ("cancel", "answer"):
        await bus.publish(CONTROL, inbound)
        return
    attributes: dict[str, str | int | bool] = {
        "switchboard.platform": inbound.address.platform,
        "switchboard.origin": inbound.origin,
        "switchboard.inbound.kind": inbound.kind,
    }
    with span("mailbox put", kind=SpanKind.PRODUCER, attributes=attributes):
        if (context := traceparent()) is not None:
            inbound = inbound.model_copy(update={"traceparent": context})
        await mailboxes.put(inbound)
    if is_stop_command(inbound) or Confirmations.could_answer(inbound):
        await bus.publish(CONTROL, inbound)
