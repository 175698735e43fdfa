"""Wiring: settings and profile in, a ready store, bus, runtime and worker out."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from bots.settings import Settings
from channels import telegram, terminal
from core.bus.base import Bus
from core.bus.memory import MemoryBus
from core.dispatch import Worker
from core.errors import ConfigError, SwitchboardError
from core.modes import ModeCatalog
from core.policy import ChannelPolicy
from core.pricing import PriceBook
from core.profile import Profile
from core.prompt import SystemPrompt
from core.providers.base import Provider
from core.providers.defaults import DEFAULT_MODELS
from core.providers.demo import DemoProvider
from core.providers.registry import ProviderEntry, ProviderRegistry, Resolved
from core.providers.reliable import FallbackProvider, ReliableProvider, RetryPolicy
from core.redact import RedactingFilter, Redactor
from core.runtime import AgentRuntime, RuntimeLimits
from core.store.base import Store
from core.store.sqlite import SqliteStore
from core.tools.base import ToolRegistry
from core.tools.builtin import builtin_tools

__all__ = [
    "PROMPT_HINTS",
    "Components",
    "build_provider",
    "build_registry",
    "configure_logging",
    "embedded",
]

log = logging.getLogger(__name__)

# Each platform's formatting rules for the system prompt, keyed by platform.
PROMPT_HINTS: dict[str, str] = {
    "terminal": terminal.PROMPT_HINT,
    "telegram": telegram.PROMPT_HINT,
}


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
    """The providers this build knows, in default order: the first with a key wins, else demo."""
    anthropic_key = settings.anthropic_api_key
    openai_key = settings.openai_api_key

    # The vendor SDKs are imported only when their provider is used: they are slow to load.
    def anthropic() -> Provider:
        from core.providers.anthropic import AnthropicProvider

        assert anthropic_key is not None
        return AnthropicProvider(
            api_key=anthropic_key.get_secret_value(), base_url=settings.anthropic_base_url
        )

    def openai() -> Provider:
        from core.providers.openai import OpenAIProvider

        # Local OpenAI-compatible servers (Ollama, llama.cpp) take any key.
        key = openai_key.get_secret_value() if openai_key else "no-key"
        return OpenAIProvider(api_key=key, base_url=settings.openai_base_url)

    return ProviderRegistry(
        [
            ProviderEntry(
                name="anthropic",
                default_model=DEFAULT_MODELS["anthropic"],
                build=anthropic,
                available=anthropic_key is not None,
                unavailable_reason="ANTHROPIC_API_KEY is not set",
            ),
            ProviderEntry(
                name="openai",
                default_model=DEFAULT_MODELS["openai"],
                build=openai,
                available=openai_key is not None or settings.openai_base_url is not None,
                unavailable_reason="OPENAI_API_KEY (or OPENAI_BASE_URL) is not set",
            ),
            ProviderEntry(name="demo", default_model=DEFAULT_MODELS["demo"], build=DemoProvider),
        ]
    )


def build_provider(settings: Settings, profile: Profile) -> tuple[Provider, Resolved]:
    """The configured provider with retries and a breaker, then its fallbacks, as one chain."""
    options = profile.settings
    registry = build_registry(settings)
    for name in options.fallback:
        if name not in registry.names():
            raise ConfigError(
                f"profile {profile.name}: fallback: unknown provider {name!r} "
                f"(known: {', '.join(registry.names())})"
            )
    primary = registry.resolve(
        settings.provider or options.provider, settings.model or options.model
    )
    policy = RetryPolicy(max_attempts=options.retry_attempts, max_seconds=options.retry_seconds)
    chain: list[tuple[Provider, str]] = [
        (ReliableProvider(primary.provider, policy=policy), primary.model)
    ]
    for name in options.fallback:
        if name == primary.provider.name:
            continue
        try:
            extra = registry.resolve(name)
        except SwitchboardError:
            continue
        if extra.fell_back_from is not None:
            log.warning("fallback provider %s is not available; leaving it out", name)
            continue
        chain.append((ReliableProvider(extra.provider, policy=policy), extra.model))
    provider: Provider = chain[0][0] if len(chain) == 1 else FallbackProvider(chain)
    return provider, primary


@asynccontextmanager
async def embedded(settings: Settings, profile: Profile) -> AsyncIterator[Components]:
    """The one-process deployment: SQLite store, in-memory bus, one worker."""
    redactor = Redactor(settings.secrets())
    options = profile.settings
    modes = ModeCatalog()
    for mode in {*options.modes.values(), *options.chat_modes.values()}:
        modes.get(mode)  # unknown mode names fail here, at start, not on the first message
    provider, resolved = build_provider(settings, profile)
    store = await SqliteStore.open(settings.database_path)
    bus = MemoryBus()
    try:
        runtime = AgentRuntime(
            provider=provider,
            model=resolved.model,
            tools=ToolRegistry(builtin_tools()),
            store=store,
            limits=RuntimeLimits(
                max_steps=options.max_steps,
                provider_timeout=options.provider_timeout,
                tool_timeout=options.tool_timeout,
                max_tokens=options.max_tokens,
                max_spend_usd=options.max_spend_usd,
            ),
            cost=PriceBook().cost,
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
                allow=options.allow,
                group_replies=options.group_replies,
            ),
            prompt_hints=PROMPT_HINTS,
            concurrency=options.concurrency,
        )
        yield Components(settings, profile, store, bus, resolved, runtime, worker)
    finally:
        await provider.aclose()
        await bus.close()
        await store.close()
