"""A stand-in gateway for the worker-path workloads (W3, W4): it puts Telegram-shaped direct
messages in their sessions' mailboxes (as a gateway does) and takes the answers off
`outbound.telegram`.

The hops are measured from the envelopes' own timestamps (one machine, one clock): enqueue to
pick-up runs from the inbound's `received_at` to the `created_at` of the worker's first answer
to it (the typing indicator, sent as the turn starts, so the worker's wake, claim, duplicate
check and checkpoint read are in it); reply to outbound runs from each answer's `created_at`
to the moment the driver received it. First-token latency runs from the sending to the first
answer text the driver receives (a streamed piece or the reply).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from bench.common import ANSWER, BenchError, percentile
from core.bus.base import Bus
from core.bus.names import outbound_queue
from core.clock import utc_now
from core.envelopes import Address, Inbound, Outbound
from core.mailbox.base import Mailboxes
from core.mailbox.intake import accept_inbound

PLATFORM = "telegram"
# Where workers took messages from before one queue per session (issue 33, decision 0009).
PREVIOUS_INBOUND_QUEUE = "inbound"
TURN_TIMEOUT = 60.0


class ChatDriver:
    """Conversations that each send their next message once the last one was answered."""

    def __init__(self, bus: Bus, mailboxes: Mailboxes, *, inbound_queue: bool = False) -> None:
        """`inbound_queue`: hand messages in as versions before one queue per session took
        them (the bus's `inbound` queue), for workers of such a revision (`--against`)."""
        self.bus = bus
        self.mailboxes = mailboxes
        self.inbound_queue = inbound_queue
        self.measuring = False
        self.pickup_ms: list[float] = []
        self.outbound_ms: list[float] = []
        self.turn_ms: list[float] = []
        # From a message's sending to the first answer text the gateway has for it (a
        # streamed piece or the whole reply): what a person waits before words appear.
        self.first_text_ms: list[float] = []
        self._no_text_yet: set[str] = set()
        self.answered = 0
        self._sent: dict[str, float] = {}
        self._waiting: dict[str, asyncio.Future[str]] = {}
        self._receiving: asyncio.Task[None] | None = None
        self._stopping = False

    async def __aenter__(self) -> ChatDriver:
        self._receiving = asyncio.create_task(self._receive())
        return self

    async def __aexit__(self, *exc: object) -> None:
        # Asked to stop rather than cancelled: a receive cancelled mid-command can leave
        # redis-py waiting (see docs/performance.md), and the gateway takes short waits.
        self._stopping = True
        if self._receiving is not None:
            done, _ = await asyncio.wait({self._receiving}, timeout=5)
            if not done:
                self._receiving.cancel()
            await asyncio.gather(self._receiving, return_exceptions=True)

    async def conversations(
        self,
        count: int,
        turns: int,
        *,
        at_once: int | None = None,
        first: int = 0,
        after_turn: Callable[[], object] | None = None,
    ) -> None:
        """`count` conversations of `turns` messages, numbered from `first`; `at_once` of
        them run side by side (all by default), each next one starting as one ends."""
        numbers = iter(range(first, first + count))

        async def lane() -> None:
            for number in numbers:
                await self._conversation(number, turns, after_turn)

        await asyncio.gather(*(lane() for _ in range(min(count, at_once or count))))

    async def in_turn(self, count: int, turns: int, *, first: int = 0) -> None:
        """`count` conversations of `turns` messages, numbered from `first`, one message at a
        time, each conversation in turn: a conversation's next message comes `count - 1`
        turns after its last, as a person's would, not while its last turn still ends."""
        for _ in range(turns):
            for index in range(first, first + count):
                await self._turn(index, None)

    async def _conversation(
        self, index: int, turns: int, after_turn: Callable[[], object] | None
    ) -> None:
        for _ in range(turns):
            await self._turn(index, after_turn)

    async def _turn(self, index: int, after_turn: Callable[[], object] | None) -> None:
        """One message of conversation `index`, and its answer awaited."""
        inbound = Inbound(
            address=Address(platform=PLATFORM, chat=str(700_000 + index)),
            user_id=str(700_000 + index),
            user_name=f"bench{index}",
            text="what is 17*23?",
            is_direct=True,
        )
        answer = self._waiting[inbound.id] = asyncio.get_running_loop().create_future()
        self._sent[inbound.id] = inbound.received_at.timestamp()
        self._no_text_yet.add(inbound.id)
        started = time.perf_counter()
        if self.inbound_queue:
            await self.bus.enqueue(PREVIOUS_INBOUND_QUEUE, inbound)
        else:
            await accept_inbound(inbound, mailboxes=self.mailboxes, bus=self.bus)
        try:
            text = await asyncio.wait_for(answer, timeout=TURN_TIMEOUT)
        except TimeoutError:
            raise BenchError(f"a turn got no answer within {TURN_TIMEOUT:g} s") from None
        finally:
            self._sent.pop(inbound.id, None)
            self._no_text_yet.discard(inbound.id)
        if text != ANSWER:
            raise BenchError(f"a turn answered {text!r} instead of the calculator's answer")
        self.answered += 1
        if self.measuring:
            self.turn_ms.append((time.perf_counter() - started) * 1000)
        if after_turn is not None:
            after_turn()

    async def _receive(self) -> None:
        queue = outbound_queue(PLATFORM)
        while not self._stopping:
            delivery = await self.bus.receive(queue, consumer="bench-gateway", timeout=0.2)
            if delivery is None:
                continue
            arrived = utc_now().timestamp()
            envelope = delivery.envelope
            await delivery.ack()
            if not isinstance(envelope, Outbound) or envelope.reply_to is None:
                continue
            created = envelope.created_at.timestamp()
            if self.measuring:
                self.outbound_ms.append((arrived - created) * 1000)
                sent = self._sent.get(envelope.reply_to)
                if envelope.kind == "typing" and sent is not None:
                    self.pickup_ms.append((created - sent) * 1000)
                first = envelope.reply_to in self._no_text_yet and bool(envelope.text)
                if first and sent is not None and envelope.kind in ("delta", "reply"):
                    self._no_text_yet.discard(envelope.reply_to)
                    self.first_text_ms.append((arrived - sent) * 1000)
            if envelope.ends_turn:
                future = self._waiting.pop(envelope.reply_to, None)
                if future is not None and not future.done():
                    future.set_result(envelope.text)

    def figures(self) -> dict[str, Any]:
        return {
            "turn_p50_ms": percentile(self.turn_ms, 50),
            "turn_p99_ms": percentile(self.turn_ms, 99),
            "pickup_p50_ms": percentile(self.pickup_ms, 50),
            "pickup_p99_ms": percentile(self.pickup_ms, 99),
            "outbound_p50_ms": percentile(self.outbound_ms, 50),
            "outbound_p99_ms": percentile(self.outbound_ms, 99),
            "first_text_p50_ms": percentile(self.first_text_ms, 50),
            "first_text_p95_ms": percentile(self.first_text_ms, 95),
            "first_text_samples": len(self.first_text_ms),
            "pickup_samples": len(self.pickup_ms),
            "outbound_samples": len(self.outbound_ms),
        }
