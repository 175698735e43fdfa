"""`WebAdapter`: the web page's chats as a channel, through the same bus as every platform.

A request of the page becomes an `Inbound` handed to the gateway's sink; the answers come back
as `Outbound`s on `outbound.web` and are passed to whoever watches that conversation (the
event stream of a `POST /api/chat`). Deliveries nobody watches (a schedule's notification to
a web conversation) go to the page's live feed instead.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

from channels.base import InboundSink
from channels.web.spec import BOT, SPEC, USER
from core.confirm import answer_inbound, button_value
from core.envelopes import Address, Inbound, Outbound, new_id
from core.errors import ChannelError

__all__ = ["WebAdapter"]


class WebAdapter:
    """The web page's side of the channel contract, with watchers per conversation."""

    def __init__(self, *, commands: frozenset[str] = frozenset()) -> None:
        """`commands` are the chat command words (`new`, `help`...) typed after a slash."""
        self._commands = commands
        self._sink: InboundSink | None = None
        self._stopping = asyncio.Event()
        self._watchers: dict[str, set[asyncio.Queue[Outbound]]] = {}
        self._feed: set[asyncio.Queue[Outbound]] = set()

    @property
    def platform(self) -> str:
        return SPEC.name

    @property
    def bot_key(self) -> str:
        return BOT

    @property
    def ready(self) -> bool:
        """Whether the gateway runs (requests can be handed over)."""
        return self._sink is not None and not self._stopping.is_set()

    async def run(self, sink: InboundSink) -> None:
        """Take requests until `stop()`: the HTTP server calls `submit` meanwhile."""
        self._sink = sink
        try:
            await self._stopping.wait()
        finally:
            self._sink = None

    async def deliver(self, outbound: Outbound) -> None:
        """Pass `outbound` to the watchers of its conversation, else to the live feed."""
        watchers = self._watchers.get(outbound.address.chat, set())
        for queue in watchers:
            queue.put_nowait(outbound)
        if not watchers or outbound.kind == "notification":
            for queue in self._feed:
                queue.put_nowait(outbound)

    async def stop(self) -> None:
        """Stop taking requests; `run()` returns."""
        self._stopping.set()

    def address(self, conversation: str) -> Address:
        """The address of a web conversation."""
        return Address(platform=SPEC.name, bot=BOT, chat=conversation)

    def inbound(self, conversation: str, text: str) -> Inbound:
        """The operator's message (or `/command`) in a conversation."""
        word = text[1:].split(maxsplit=1)[0].lower() if text.startswith("/") and text[1:] else ""
        return Inbound(
            kind="command" if word in self._commands else "message",
            command=word if word in self._commands else None,
            address=self.address(conversation),
            text=text,
            user_id=USER,
            user_name=USER,
            is_direct=True,
        )

    def answer(self, conversation: str, question: str, allowed: bool) -> Inbound | None:
        """The operator's press of a question's Yes or No button, read like every platform's
        buttons (`core/confirm.py`); None when `question` is not an id one of ours carries."""
        return answer_inbound(
            button_value(question, allowed),
            address=self.address(conversation),
            user_id=USER,
            user_name=USER,
            press_id=new_id(),
            is_direct=True,
        )

    def cancel(self, conversation: str) -> Inbound:
        """A request to cancel the conversation's running turn."""
        return Inbound(kind="cancel", address=self.address(conversation), user_id=USER)

    async def submit(self, inbound: Inbound) -> None:
        """Hand `inbound` to the gateway's sink; `ChannelError` when the gateway does not run."""
        sink = self._sink
        if sink is None or self._stopping.is_set():
            raise ChannelError("the web channel is not running")
        await sink(inbound)

    @contextlib.contextmanager
    def watch(self, conversation: str) -> Iterator[asyncio.Queue[Outbound]]:
        """Deliveries to `conversation`, for as long as the block runs."""
        queue: asyncio.Queue[Outbound] = asyncio.Queue()
        watchers = self._watchers.setdefault(conversation, set())
        watchers.add(queue)
        try:
            yield queue
        finally:
            watchers.discard(queue)
            if not watchers:
                self._watchers.pop(conversation, None)

    @contextlib.contextmanager
    def feed(self) -> Iterator[asyncio.Queue[Outbound]]:
        """Deliveries nobody watches (and every notification), while the block runs."""
        queue: asyncio.Queue[Outbound] = asyncio.Queue()
        self._feed.add(queue)
        try:
            yield queue
        finally:
            self._feed.discard(queue)
