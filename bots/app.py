"""Wiring: settings and profile in, a ready store, bus, runtime and worker out."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from bots.settings import Settings
from channels import terminal
from core.bus.base import Bus
from core.bus.memory import MemoryBus
from core.dispatch import Worker
from core.modes import ModeCatalog
from core.policy import ChannelPolicy
from core.profile import Profile
from core.prompt import SystemPrompt
from core.providers.demo import DemoProvider
from core.providers.registry import ProviderEntry, ProviderRegistry, Resolved
from core.redact import RedactingFilter, Redactor
from core.runtime import AgentRuntime, RuntimeLimits
from core.store.base import Store
from core.store.sqlite import SqliteStore
from core.tools.base import ToolRegistry
from core.tools.builtin import builtin_tools

__all__ = ["PROMPT_HINTS", "Components", "build_registry", "configure_logging", "embedded"]

# Each platform's formatting rules for the system prompt, keyed by platform.
PROMPT_HINTS: dict[str, str] = {"terminal": terminal.PROMPT_HINT}


@dataclass
class Components:
    """The parts of one process, built from settings and a profile."""

    settings: Settings
    profile: Profile
    store: Store
    bus: Bus
    resolved: Resolved
    runtime: AgentRuntime
    worker: Worker


def configure_logging(level: str, redactor: Redactor) -> None:
    """Log lines to stderr, scrubbed of secrets."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter(redactor))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def build_registry(settings: Settings) -> ProviderRegistry:
    """The providers this build knows, in fallback order; `demo` is always available."""
    return ProviderRegistry(
        [ProviderEntry(name="demo", default_model="demo-1", build=DemoProvider)]
    )


@asynccontextmanager
async def embedded(settings: Settings, profile: Profile) -> AsyncIterator[Components]:
    """The one-process deployment: SQLite store, in-memory bus, one worker."""
    redactor = Redactor(settings.secrets())
    options = profile.settings
    modes = ModeCatalog()
    for mode in {*options.modes.values(), *options.chat_modes.values()}:
        modes.get(mode)  # unknown mode names fail here, at start, not on the first message
    resolved = build_registry(settings).resolve(
        settings.provider or options.provider, settings.model or options.model
    )
    store = await SqliteStore.open(settings.database_path)
    bus = MemoryBus()
    try:
        runtime = AgentRuntime(
            provider=resolved.provider,
            model=resolved.model,
            tools=ToolRegistry(builtin_tools()),
            store=store,
            limits=RuntimeLimits(
                max_steps=options.max_steps,
                provider_timeout=options.provider_timeout,
                tool_timeout=options.tool_timeout,
                max_tokens=options.max_tokens,
            ),
            prompt=SystemPrompt(identity=profile.identity),
            temperature=options.temperature,
            redactor=redactor,
        )
        worker = Worker(
            bus=bus,
            store=store,
            runtime=runtime,
            modes=modes,
            policy=ChannelPolicy(
                modes=options.modes,
                chat_modes=options.chat_modes,
                max_input_chars=options.max_input_chars,
            ),
            prompt_hints=PROMPT_HINTS,
            concurrency=options.concurrency,
        )
        yield Components(settings, profile, store, bus, resolved, runtime, worker)
    finally:
        await bus.close()
        await store.close()
