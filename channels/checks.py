"""What `switchboard doctor` asks of a platform: `PlatformChecks`, part of its `ChannelSpec`.

`bots/doctor.py` runs the checks of every registered platform the environment configures and
knows no platform by name. A platform's checks live in its package beside its adapter (the
variables they read are its own), so a new platform is checked as soon as its spec says how.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import httpx

__all__ = ["Finding", "PlatformChecks", "Severity", "json_object", "listening"]

Severity = Literal["ok", "warning", "critical"]


@dataclass(frozen=True)
class Finding:
    """One line of the report: how bad, about what, what was found, and how to fix it."""

    severity: Severity
    area: str
    text: str
    fix: str = ""

    def line(self) -> str:
        """The report line: `critical  telegram: ... Fix: ...`."""
        fix = f" Fix: {self.fix}" if self.fix else ""
        return f"{self.severity:<9} {self.area}: {self.text}{fix}"


def _no_findings(env: Mapping[str, str]) -> list[Finding]:
    return []


@dataclass(frozen=True)
class PlatformChecks:
    """A platform's doctor checks; each is given the environment, and only runs when the
    environment configures the platform."""

    # Whether its credentials work: one cheap call to the platform. Doctor bounds it in time
    # and reports a failure to connect (OSError, httpx.HTTPError). None: nothing to reach.
    reach: Callable[[Mapping[str, str]], Awaitable[Finding]] | None = None
    # Settings that leave the bot open to anyone (a webhook without its secret): critical.
    exposure: Callable[[Mapping[str, str]], list[Finding]] = field(default=_no_findings)
    # Servers its adapter opens to other machines (a webhook endpoint): warnings.
    listeners: Callable[[Mapping[str, str]], list[Finding]] = field(default=_no_findings)


def listening(
    area: str, what: str, host: str, port: int | str, risk: str, fix: str = ""
) -> Finding:
    """A warning: `what` listens on `host:port`, which other machines can reach."""
    return Finding(
        "warning",
        area,
        f"{what} listens on {host}:{port}, reachable from other machines: {risk}",
        fix or "bind it to 127.0.0.1 and reach it through an SSH tunnel or a TLS reverse proxy",
    )


def json_object(response: httpx.Response) -> dict[str, Any]:
    """The response's JSON object; empty when the body is not one."""
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
