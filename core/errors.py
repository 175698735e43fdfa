"""The exception tree of Switchboard.

::

    SwitchboardError
    ├── ConfigError          bad settings, profile or flags: one clear line for the user
    ├── ProviderError        a model call failed; `kind` says how (see ProviderErrorKind)
    ├── ToolError            a tool refused or failed; the message goes back to the model
    │   └── ToolNotAllowed   the tool is outside the turn's capability mode
    ├── ChannelError         a platform refused a delivery; `retry_after` when it said so
    ├── StoreError           the store could not read or write
    │   └── StoreUnavailable the store is away for now (Redis unreachable or loading, the disk
    │                        full): also an `Unavailable`
    ├── BusError             the bus could not enqueue, receive or publish
    │   └── BusUnavailable   the bus is away for now: also an `Unavailable`
    ├── Unavailable          the store or the bus is away for now; the same call may succeed
    │                        once it is back (`core/outages.py` waits for it)
    └── BudgetExceeded       a turn ran out of steps, money, time or context window

Errors carry messages fit for a log line. What the *user* sees is decided by the dispatcher
and is never a traceback.
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "RETRYABLE_PROVIDER_ERRORS",
    "BudgetExceeded",
    "BusError",
    "BusUnavailable",
    "ChannelError",
    "ConfigError",
    "ProviderError",
    "ProviderErrorKind",
    "StoreError",
    "StoreUnavailable",
    "SwitchboardError",
    "ToolError",
    "ToolNotAllowed",
    "Unavailable",
]


class SwitchboardError(Exception):
    """Base of every error Switchboard raises on purpose."""


class ConfigError(SwitchboardError):
    """Settings, a profile file or command-line flags are wrong."""


ProviderErrorKind = Literal[
    "rate_limit",
    "overloaded",
    "server",
    "timeout",
    "context_overflow",
    "auth",
    "billing",
    "model_not_found",
    "content_blocked",
    "bad_request",
    "unavailable",
]

RETRYABLE_PROVIDER_ERRORS: frozenset[str] = frozenset(
    {"rate_limit", "overloaded", "server", "timeout"}
)


class ProviderError(SwitchboardError):
    """A model call failed, classified by `kind`."""

    def __init__(
        self,
        kind: ProviderErrorKind,
        message: str,
        *,
        provider: str = "",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind: ProviderErrorKind = kind
        self.provider = provider
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        """Whether trying the same call again later may succeed."""
        return self.kind in RETRYABLE_PROVIDER_ERRORS


class ToolError(SwitchboardError):
    """A tool could not do what was asked; the message is shown to the model."""


class ToolNotAllowed(ToolError):
    """The tool exists but the capability mode of this turn does not allow it."""


class ChannelError(SwitchboardError):
    """A chat platform refused or failed a delivery."""

    def __init__(
        self, message: str, *, retry_after: float | None = None, permanent: bool = False
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        # Trying again cannot help (the bot was blocked, the chat is gone, the text refused).
        self.permanent = permanent


class StoreError(SwitchboardError):
    """The store could not complete a read or a write."""


class BusError(SwitchboardError):
    """The bus could not complete an operation."""


class Unavailable(SwitchboardError):
    """The store or the bus cannot be used for now (Redis restarting, the data disk full):
    nothing is wrong with the call, and the same call may succeed once it is back."""


class StoreUnavailable(StoreError, Unavailable):
    """The store is away for now: Redis unreachable or loading its data, the disk full."""


class BusUnavailable(BusError, Unavailable):
    """The bus (or the mailboxes) is away for now: Redis unreachable or loading, the disk
    full."""


class BudgetExceeded(SwitchboardError):
    """A turn used up a budget: steps, cost, time, or the model's context window."""

    def __init__(self, budget: Literal["steps", "cost", "time", "context"], message: str) -> None:
        super().__init__(message)
        self.budget = budget
