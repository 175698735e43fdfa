"""`switchboard doctor`: check the settings, keys, provider, platforms and Redis, and audit
the bot's posture; one line per finding with its fix, exit 1 on a critical one."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click

from bots.commands.common import settings_from
from bots.doctor import Finding, diagnose
from bots.profiles import load_profile
from bots.settings import Settings
from core.errors import ConfigError

__all__ = ["doctor"]


@click.command()
@click.option(
    "--offline",
    is_flag=True,
    help="Only audit settings and files; do not reach the provider, platforms or Redis.",
)
@click.pass_context
def doctor(ctx: click.Context, offline: bool) -> None:
    """Check that this bot can run and is safe to put in front of strangers.

    Reaches the model provider (a one-token request), each configured platform and Redis
    (and asks whether it persists), each within 10 seconds, and audits open DM policies,
    webhook secrets, the listeners' tokens (as `serve` checks them) and which listen beyond
    this machine, admins, budgets, rate limits, secrets inside profile files and the data
    folder's permissions. Prints one line per finding with its fix; exits 1 when any finding
    is critical.
    """
    try:
        settings = settings_from(ctx)
        profile = load_profile(settings.profiles_dir, settings.profile)
    except ConfigError as exc:
        _report([Finding("critical", "settings", str(exc), "correct it and run doctor again")])
        sys.exit(1)
    findings = asyncio.run(
        diagnose(settings, profile, _profile_folder(settings), reach=not offline)
    )
    if _report(findings):
        sys.exit(1)


def _profile_folder(settings: Settings) -> Path | None:
    """The profile's folder on disk (None for the packaged default, which holds no secrets)."""
    folder = settings.profiles_dir / settings.profile
    return folder if folder.is_dir() else None


def _report(findings: list[Finding]) -> int:
    """Print the findings, worst first, and a summary; return how many are critical."""
    order = {"critical": 0, "warning": 1, "ok": 2}
    for finding in sorted(findings, key=lambda f: order[f.severity]):
        click.echo(finding.line())
    critical = sum(f.severity == "critical" for f in findings)
    warnings = sum(f.severity == "warning" for f in findings)
    click.echo(f"{critical} critical, {warnings} warning(s).")
    return critical
