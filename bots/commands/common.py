"""What the command modules share: settings from the context, consoles, signals."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import click
from rich.console import Console

from bots.logs import configure_logging
from bots.settings import Settings, load_settings
from core.errors import ConfigError
from core.logcontext import bind_log_context

__all__ = ["LOG", "on_signals", "require_redis", "settings_from", "stdout"]

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
    """A console for tables: the terminal's width, or wide enough not to cut when piped."""
    return Console(highlight=False, width=None if sys.stdout.isatty() else 200)


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
