"""`ProviderRegistry`: resolves the configured provider, or the first available one."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from core.errors import ConfigError, ProviderError
from core.providers.base import Provider

__all__ = ["ProviderEntry", "ProviderRegistry", "Resolved"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProviderEntry:
    """A provider the deployment knows: how to build it and whether it can be used now."""

    name: str
    default_model: str
    build: Callable[[], Provider]
    available: bool = True
    # Why it cannot be used, for the log and for errors ("ANTHROPIC_API_KEY is not set").
    unavailable_reason: str = ""


@dataclass(frozen=True)
class Resolved:
    """The provider chosen for a process, with the model it will use."""

    provider: Provider
    model: str
    fell_back_from: str | None = None


class ProviderRegistry:
    """Known providers, in order of preference for the fallback."""

    def __init__(self, entries: Iterable[ProviderEntry]) -> None:
        self._entries = {e.name: e for e in entries}

    def names(self) -> list[str]:
        """Known provider names, in preference order."""
        return list(self._entries)

    def require(self, name: str) -> None:
        """`ConfigError` unless `name` is a known provider that can be used now."""
        if name not in self._entries:
            known = ", ".join(self._entries) or "none"
            raise ConfigError(f"unknown provider {name!r} (known: {known})")
        entry = self._entries[name]
        if not entry.available:
            raise ConfigError(f"provider {name}: {entry.unavailable_reason or 'unavailable'}")

    def resolve(self, preferred: str | None = None, model: str | None = None) -> Resolved:
        """The preferred provider when it is available, else the first available one.

        An unknown name is a `ConfigError`; nothing available is a `ProviderError`.
        """
        if preferred is not None and preferred not in self._entries:
            known = ", ".join(self._entries) or "none"
            raise ConfigError(f"unknown provider {preferred!r} (known: {known})")
        if preferred is not None and self._entries[preferred].available:
            entry = self._entries[preferred]
            return Resolved(entry.build(), model or entry.default_model)
        for entry in self._entries.values():
            if entry.available:
                if preferred is not None:
                    reason = self._entries[preferred].unavailable_reason or "unavailable"
                    log.warning(
                        "provider %s is unavailable (%s); using %s", preferred, reason, entry.name
                    )
                # A model named for another provider means nothing to this one.
                chosen_model = model if preferred is None and model else entry.default_model
                return Resolved(entry.build(), chosen_model, fell_back_from=preferred)
        raise ProviderError("unavailable", "no model provider is available", provider="")
