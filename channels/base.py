"""The channel adapter contract.

A `ChannelAdapter` turns a platform's updates into `Inbound` work and shows `Outbound`
deliveries in the platform's chats. It knows nothing of workers, stores or deployments: the
`Gateway` connects it to the bus. Every platform (terminal, web, Telegram, Slack, Discord)
implements the same four members, so adding one never changes `core/`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from core.envelopes import Address, Inbound, Outbound

__all__ = ["Address", "ChannelAdapter", "Inbound", "InboundSink", "Outbound"]

InboundSink = Callable[[Inbound], Awaitable[None]]


class ChannelAdapter(Protocol):
    """One chat platform, seen from Switchboard."""

    @property
    def platform(self) -> str:
        """The platform key: the first part of session keys and of `outbound.<platform>`."""
        ...

    async def run(self, sink: InboundSink) -> None:
        """Receive the platform's updates and hand each over to `sink` as `Inbound`.

        Returns when `stop()` was called or the platform's input ended.
        """
        ...

    async def deliver(self, outbound: Outbound) -> None:
        """Show an `Outbound` in its chat.

        Raises `ChannelError` (with `retry_after` when the platform said when) if the platform
        refused; the gateway then tries again later.
        """
        ...

    async def stop(self) -> None:
        """Stop receiving; `run()` returns soon after."""
        ...
