"""Choosing and building the model providers from settings and the profile."""

from __future__ import annotations

import logging

from bots.settings import Settings
from core.errors import ConfigError, SwitchboardError
from core.model_choice import ModelChoices
from core.profile import Profile
from core.providers.base import Provider
from core.providers.defaults import DEFAULT_MODELS
from core.providers.deferred import DeferredProvider
from core.providers.demo import DemoProvider
from core.providers.registry import ProviderEntry, ProviderRegistry, Resolved
from core.providers.reliable import FallbackProvider, ReliableProvider, RetryPolicy

__all__ = ["PROVIDER_NAMES", "build_model_choices", "build_provider", "build_registry"]

# The providers this build knows, in default order (`provider` and `fallback` in a profile).
PROVIDER_NAMES = ("anthropic", "openai", "demo")

log = logging.getLogger(__name__)


def build_registry(settings: Settings, *, stream_idle_timeout: float = 0) -> ProviderRegistry:
    """The providers this build knows, in default order: the first with a key wins, else demo.
    `stream_idle_timeout`: the profile's, seconds a stream may go silent (0: no limit)."""
    idle = stream_idle_timeout or None
    anthropic_key = settings.anthropic_api_key
    openai_key = settings.openai_api_key

    # The vendor SDKs are imported only when their provider is used: they are slow to load.
    def anthropic() -> Provider:
        from core.providers.anthropic import AnthropicProvider

        assert anthropic_key is not None
        return AnthropicProvider(
            api_key=anthropic_key.get_secret_value(),
            base_url=settings.anthropic_base_url,
            stream_idle_timeout=idle,
        )

    def openai() -> Provider:
        from core.providers.openai import OpenAIProvider

        # Local OpenAI-compatible servers (Ollama, llama.cpp) take any key.
        key = openai_key.get_secret_value() if openai_key else "no-key"
        return OpenAIProvider(
            api_key=key, base_url=settings.openai_base_url, stream_idle_timeout=idle
        )

    return ProviderRegistry(
        [
            ProviderEntry(
                name="anthropic",
                default_model=DEFAULT_MODELS["anthropic"],
                # Built on the first call, in a thread: the SDK is slow to import and a
                # process (`switchboard chat`) is ready for input sooner without it.
                build=lambda: DeferredProvider("anthropic", anthropic),
                available=anthropic_key is not None,
                unavailable_reason="ANTHROPIC_API_KEY is not set",
            ),
            ProviderEntry(
                name="openai",
                default_model=DEFAULT_MODELS["openai"],
                build=lambda: DeferredProvider("openai", openai),
                available=openai_key is not None or settings.openai_base_url is not None,
                unavailable_reason="OPENAI_API_KEY (or OPENAI_BASE_URL) is not set",
            ),
            ProviderEntry(name="demo", default_model=DEFAULT_MODELS["demo"], build=DemoProvider),
        ]
    )


def build_provider(settings: Settings, profile: Profile) -> tuple[Provider, Resolved]:
    """The configured provider with retries and a breaker, then its fallbacks, as one chain."""
    options = profile.settings
    registry = build_registry(settings, stream_idle_timeout=options.stream_idle_timeout)
    for name in options.fallback:
        if name not in registry.names():
            raise ConfigError(
                f"profile {profile.name}: fallback: unknown provider {name!r} "
                f"(known: {', '.join(registry.names())})"
            )
    primary = registry.resolve(
        settings.provider or options.provider, settings.model or options.model
    )
    policy = RetryPolicy(
        max_attempts=options.retry_attempts,
        max_seconds=options.retry_seconds,
        call_timeout=options.provider_timeout,
    )
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


def build_model_choices(
    settings: Settings, profile: Profile, provider: Provider, resolved: Resolved
) -> ModelChoices:
    """What `/model` may switch a chat to: the profile's `[models] allowed`, each provider
    built once (the default chain for the default's provider) when its key is set. An
    unknown provider name stops the start; a provider without its key is only refused when a
    chat asks for one of its models."""
    options = profile.settings
    registry = build_registry(settings, stream_idle_timeout=options.stream_idle_timeout)
    policy = RetryPolicy(
        max_attempts=options.retry_attempts,
        max_seconds=options.retry_seconds,
        call_timeout=options.provider_timeout,
    )
    providers: dict[str, Provider] = {}
    unavailable: dict[str, str] = {}
    for name in dict.fromkeys(option.provider for option in options.models.allowed):
        if name not in registry.names():
            raise ConfigError(
                f"profile {profile.name}: models.allowed: unknown provider {name!r} "
                f"(known: {', '.join(registry.names())})"
            )
        if name == resolved.provider.name:
            providers[name] = provider
            continue
        try:
            registry.require(name)
        except ConfigError as exc:
            unavailable[name] = str(exc)
            continue
        providers[name] = ReliableProvider(registry.resolve(name).provider, policy=policy)
    choices = ModelChoices(
        default_provider=provider,
        default_model=resolved.model,
        allowed=tuple(options.models.allowed),
        providers=providers,
        unavailable=unavailable,
    )
    _check_degrade_model(profile, choices)
    return choices


def _check_degrade_model(profile: Profile, choices: ModelChoices) -> None:
    """`[budgets] degrade_model` must be one the profile can reach: its default model, or an
    entry of `[models] allowed` whose provider has its key (a turn cannot ask then)."""
    name = profile.settings.budgets.degrade_model
    if name is None or choices.reach(name) is not None:
        return
    option = choices.find(name)
    if option is None:
        raise ConfigError(
            f"profile {profile.name}: budgets.degrade_model {name!r} is neither the default "
            f"model ({choices.default_model}) nor in [models] allowed"
        )
    raise ConfigError(
        f"profile {profile.name}: budgets.degrade_model {name!r}: "
        f"{choices.unavailable.get(option.provider, 'its provider is not available')}"
    )
