"""Where a command's data lives, said the same way by every command that reads the store."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final
from urllib.parse import urlsplit

from bots.settings import Settings
from core.backends.redis.urls import parse_redis_url
from core.errors import ConfigError

__all__ = [
    "STARTUP_LOGGER",
    "STORE_EPILOG",
    "describe_coordination",
    "describe_database",
    "describe_store",
    "log_startup",
    "require_data",
]

STARTUP_LOGGER: Final = "switchboard.startup"
_startup = logging.getLogger(STARTUP_LOGGER)

STORE_EPILOG: Final = (
    "Reads the store at DATABASE_URL, else $SWITCHBOARD_DATA_DIR/switchboard.db (default ./data)."
)
"""The `--help` epilog of commands that read the store."""


def describe_store(settings: Settings) -> str:
    """Where the records are: `data/switchboard.db` or `postgresql at host:5432/db`
    (DATABASE_URL); never a password."""
    if settings.database_url:
        return describe_database(settings.database_url)
    return str(settings.database_path)


def describe_coordination(settings: Settings) -> str:
    """Where the processes meet: `Redis at host:6379 (bot default)` with REDIS_URL (a cluster's
    or a Sentinel's first node, named so), else the store (`describe_store`); never a password."""
    if settings.redis_url is None:
        return describe_store(settings)
    location = parse_redis_url(settings.redis_url)  # checked when the settings were read
    if location.kind == "server":
        parts = urlsplit(settings.redis_url)
        where = parts.hostname or "localhost"
        if parts.port:
            where = f"{where}:{parts.port}"
        return f"Redis at {where} (bot {settings.bot_id})"
    host, port = location.nodes[0]
    more = f" and {len(location.nodes) - 1} more" if len(location.nodes) > 1 else ""
    what = "Redis Cluster" if location.kind == "cluster" else "Redis via Sentinel"
    return f"{what} at {host}:{port}{more} (bot {settings.bot_id})"


def describe_database(url: str) -> str:
    """A database URL without its user and password: `postgresql at host:5432/db`."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "the database of DATABASE_URL"
    scheme = parts.scheme.partition("+")[0]
    if scheme == "sqlite":
        return parts.path.removeprefix("/") or "sqlite"
    where = parts.hostname or "localhost"
    if port:
        where = f"{where}:{port}"
    return f"{scheme} at {where}{parts.path}"


def require_data(settings: Settings) -> None:
    """`ConfigError` when the embedded store's file is not there. Commands that only read or
    change what is stored call it first: opening the store would make an empty one, and a
    mistyped SWITCHBOARD_DATA_DIR would then look like a bot with nothing stored."""
    if settings.redis_url is not None or settings.database_url or settings.database_path.exists():
        return
    where = (
        f"no data folder at {settings.data_dir}"
        if not settings.data_dir.exists()
        else f"no store at {settings.database_path}"
    )
    raise ConfigError(
        f"{where}: check SWITCHBOARD_DATA_DIR, or start with `switchboard chat` "
        "(or `switchboard serve`), which make it"
    )


def log_startup(settings: Settings, role: str, platforms: Sequence[str] = ()) -> None:
    """One line when a long-running process starts: what it serves, its store, its port.

    Logged on `switchboard.startup`, which `bots.logs` shows at the default level too, so a
    `serve` that works says so.
    """
    parts = [f"switchboard {role} started"]
    if platforms:
        parts.append(f"serving {', '.join(platforms)}")
    parts.append(f"store {describe_store(settings)}")
    if settings.metrics_port is not None:
        parts.append(f"operations endpoints on {settings.metrics_host}:{settings.metrics_port}")
    _startup.info("%s", "; ".join(parts))
