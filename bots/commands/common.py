"""What the command modules share: settings from the context, consoles, signals."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import click
from rich.console import Console
from rich.table import Column, Table

from bots.logs import configure_logging
from bots.settings import Settings, load_settings
from core.errors import ConfigError
from core.logcontext import bind_log_context

__all__ = [
    "AS_JSON",
    "LOG",
    "echo_json",
    "listing",
    "on_signals",
    "require_redis",
    "settings_from",
    "stdout",
    "whole",
    "wrapped",
]

LOG = logging.getLogger("switchboard")


def settings_from(ctx: click.Context, **overrides: object) -> Settings:
    """Settings from the environment and flags; logging configured to match."""
    settings = load_settings(**overrides)
    level = (ctx.find_root().obj or {}).get("log_level") or settings.log_level
    configure_logging(level, settings.redactor(), fmt=settings.log_format)
    # The command (`serve`, `worker`, `gateway`...) is the process's role in every log line.
    words = ctx.command_path.split()
    bind_log_context(role=words[1] if len(words) > 1 else words[0])
    return settings


def stdout() -> Console:
    """A console for tables: the terminal's width (or COLUMNS), else wide enough not to wrap
    when piped."""
    sized = sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit()
    # No markup: table cells hold stored text (a prompt may contain "[/b]"), shown as it is.
    return Console(highlight=False, markup=False, width=None if sized else 200)


def whole(header: str) -> Column:
    """A column of ids, dates and numbers: never wrapped nor cut, since the next command
    needs them as they are; the text columns give way instead (see `listing`)."""
    return Column(header, no_wrap=True)


def wrapped(header: str) -> Column:
    """A column of text that wraps to leave room for the `whole` ones (a long word is folded
    onto the next line, never cut with an ellipsis)."""
    return Column(header, overflow="fold")


def listing(*columns: Column) -> Table:
    """The table of a list command: no borders, one space between columns."""
    return Table(*columns, box=None, pad_edge=False, padding=(0, 1, 0, 0), collapse_padding=True)


AS_JSON = click.option(
    "--json", "as_json", is_flag=True, help="Print machine-readable JSON instead of a table."
)
"""The `--json` flag of every list command."""


def echo_json(data: object) -> None:
    """`data` as indented JSON on stdout (dates as ISO 8601 strings, UTC)."""
    click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))


def on_signals(stop: Callable[[], list[Coroutine[Any, Any, None]]]) -> None:
    """SIGINT/SIGTERM run `stop`'s coroutines (once) so the process winds down gracefully."""
    loop = asyncio.get_running_loop()
    stopping: set[asyncio.Task[None]] = set()

    def handle() -> None:
        if stopping:
            return
        LOG.warning("stopping: finishing the work in progress")
        for coro in stop():
            stopping.add(loop.create_task(coro))

    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, handle)


def require_redis(settings: Settings, command: str) -> str:
    """`REDIS_URL`, or a `ConfigError` saying the command needs it."""
    if settings.redis_url is None:
        raise ConfigError(
            f"`switchboard {command}` needs REDIS_URL (the distributed deployment); "
            "use `switchboard serve` to run everything in one process"
        )
    return settings.redis_url
