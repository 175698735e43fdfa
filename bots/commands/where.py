"""Where a command's data lives, said the same way by every command that reads the store."""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

from bots.settings import Settings

__all__ = ["STORE_EPILOG", "describe_store"]

STORE_EPILOG: Final = (
    "Reads the store at $SWITCHBOARD_DATA_DIR/switchboard.db (default ./data), or Redis when "
    "REDIS_URL is set."
)
"""The `--help` epilog of commands that read the store."""


def describe_store(settings: Settings) -> str:
    """`data/switchboard.db`, or `Redis at host:6379 (bot default)`: never a password."""
    if settings.redis_url is None:
        return str(settings.database_path)
    parts = urlsplit(settings.redis_url)
    where = parts.hostname or "localhost"
    if parts.port:
        where = f"{where}:{parts.port}"
    return f"Redis at {where} (bot {settings.bot_id})"
