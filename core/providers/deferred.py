"""`DeferredProvider`: a provider built (and its SDK imported) on its first call.

Importing a vendor SDK takes a few hundred milliseconds (the `openai` package loads every one
of its type modules). A process that builds its provider at start-up, like `switchboard chat`,
would make a person wait for that before it can read their first line. Deferred, the import
runs in a thread when the first call comes, so the event loop keeps serving meanwhile, and
a process that never calls the model never pays for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from core.events import ModelEvent
from core.providers.base import ModelRequest, Provider

__all__ = ["DeferredProvider"]


class DeferredProvider:
    """Stands for the provider `build` makes, building it once, when it is first used."""

    def __init__(self, name: str, build: Callable[[], Provider]) -> None:
        self._name = name
        self._build = build
        self._provider: Provider | None = None
        self._building: asyncio.Future[Provider] | None = None

    @property
    def name(self) -> str:
        return self._name

    async def provider(self) -> Provider:
        """The real provider, built on the first call; concurrent first calls share one build."""
        if self._provider is not None:
            return self._provider
        if self._building is None:
            self._building = asyncio.ensure_future(asyncio.to_thread(self._build))
        try:
            # Shielded: one caller being cancelled must not cancel the build the others await.
            built = await asyncio.shield(self._building)
        except BaseException:
            if self._building.done() and (
                self._building.cancelled() or self._building.exception() is not None
            ):
                self._building = None  # a failed build is tried again on the next call
            raise
        self._provider = built
        return built

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """The real provider's stream (built first if need be)."""
        provider = await self.provider()
        async for event in provider.stream(request):
            yield event

    async def aclose(self) -> None:
        """Close the real provider if it was ever built."""
        if self._building is not None and self._provider is None:
            # A build still running is waited for, so its client's connections are closed.
            try:
                self._provider = await self._building
            except Exception:
                return
        if self._provider is not None:
            await self._provider.aclose()
