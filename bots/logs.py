"""Where log lines go and what they look like: stderr, text or JSON, scrubbed of secrets.

`SWITCHBOARD_LOG_LEVEL` (or `--log-level`) is a level for Switchboard's own loggers, then
optional `NAME=LEVEL` pairs: `debug`, `info,telegram=debug`, `debug,libraries=info`.
Third-party libraries (`libraries`) stay at `warning` unless asked for: their debug output is
mostly SQL statements and HTTP chatter. Level names are case-insensitive.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, Literal

from core.errors import ConfigError
from core.logcontext import LOG_FIELDS, LogContextFilter
from core.redact import RedactingFilter, Redactor

__all__ = ["LEVELS", "LogFormat", "LogLevels", "configure_logging"]

LogFormat = Literal["text", "json"]
LEVELS: Final = ("debug", "info", "warning", "error")
# The loggers that are Switchboard's own; everything else counts as a library.
_OWN: Final = ("core", "channels", "bots", "switchboard", "bench")
_LIBRARIES: Final = "libraries"
# `bots.commands.where.STARTUP_LOGGER`; spelled here too so logging does not import commands.
_STARTUP: Final = "switchboard.startup"


@dataclass(frozen=True)
class LogLevels:
    """Switchboard's level, the libraries' level, and levels for single loggers."""

    own: int = logging.WARNING
    libraries: int = logging.WARNING
    loggers: dict[str, int] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> LogLevels:
        """`LEVEL[,NAME=LEVEL...]` (the first level may be left out: `warning`); `ConfigError`
        saying what is wrong."""
        own = logging.WARNING
        libraries = logging.WARNING
        loggers: dict[str, int] = {}
        for position, part in enumerate(p.strip() for p in text.split(",")):
            name, equals, level_text = part.rpartition("=")
            if not equals and position == 0:
                own = _level(part, text)
            elif equals and name.strip() == _LIBRARIES:
                libraries = _level(level_text, text)
            elif equals and name.strip():
                loggers[name.strip()] = _level(level_text, text)
            else:
                raise ConfigError(
                    f"log level {text!r}: give a level first, then NAME=LEVEL pairs, "
                    "e.g. 'debug' or 'info,telegram=debug'"
                )
        return cls(own=own, libraries=libraries, loggers=loggers)


def _level(name: str, whole: str) -> int:
    cleaned = name.strip().lower()
    if cleaned not in LEVELS:
        raise ConfigError(
            f"log level {whole!r}: {name.strip()!r} is not one of {', '.join(LEVELS)}"
        )
    return int(logging.getLevelName(cleaned.upper()))


class TextFormatter(logging.Formatter):
    """`time LEVEL logger: message [role=... session=...]`."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        context: dict[str, str] = getattr(record, "context", {})
        fields = " ".join(f"{name}={context[name]}" for name in LOG_FIELDS if name in context)
        if not fields:
            return line
        head, newline, rest = line.partition("\n")  # keep a traceback below the line
        return f"{head} [{fields}]{newline}{rest}"


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (UTC), level, logger, message, the context fields, and
    the exception's traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(getattr(record, "context", {}))
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False)


class _KnownNoise(logging.Filter):
    """Drops warnings a library gives about how we call it on purpose.

    slack-bolt reads SLACK_BOT_TOKEN from the environment by itself and, since our adapter
    hands it a ready client and an `authorize` function instead, warns on every start that
    the token will be unused. python-telegram-bot's rate limiter logs every flood-control
    error it passes on with a traceback, though the gateway waits it out.
    """

    _NOISE: Final = (
        ("slack_bolt", "As you gave `client` as well, `token` will be unused"),
        ("slack_bolt", "As `installation_store` or `authorize` has been used"),
        # The Telegram adapter leaves flood control to the gateway, which logs the wait.
        ("telegram.ext.AIORateLimiter", "Rate limit hit after maximum of"),
    )

    def filter(self, record: logging.LogRecord) -> bool:
        return not any(
            record.name.startswith(logger) and str(record.msg).startswith(text)
            for logger, text in self._NOISE
        )


def configure_logging(levels: str, redactor: Redactor, *, fmt: LogFormat = "text") -> None:
    """Log lines to stderr in `fmt`, scrubbed of secrets, at the levels `levels` names."""
    parsed = LogLevels.parse(levels)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    # Context first, then scrubbing: the scrubbed message is what every formatter shows.
    handler.addFilter(_KnownNoise())
    handler.addFilter(LogContextFilter())
    handler.addFilter(RedactingFilter(redactor))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(parsed.libraries)
    for name in _OWN:
        logging.getLogger(name).setLevel(parsed.own)
    # The start-up line shows at the default level too (a `serve` that works says so), unless
    # only errors were asked for.
    startup = logging.INFO if parsed.own < logging.ERROR else parsed.own
    logging.getLogger(_STARTUP).setLevel(startup)
    for name, level in parsed.loggers.items():
        logging.getLogger(name).setLevel(level)
