"""What a log line is about: the process role, platform, session and run, where known.

Code that knows (a process at start, the worker handling a turn) wraps its work in
`log_context(...)`; `LogContextFilter` copies the fields into every record made inside, for
the text and JSON formatters. Context variables follow asyncio tasks, so a field set around a
turn stays with every line that turn logs, and with nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType

__all__ = [
    "LOG_FIELDS",
    "LogContextFilter",
    "bind_log_context",
    "current_log_context",
    "log_context",
    "no_log_context",
]

# The fields, in the order the text format shows them.
LOG_FIELDS = ("role", "platform", "session", "run")

_EMPTY: Mapping[str, str] = MappingProxyType({})
_fields: ContextVar[Mapping[str, str]] = ContextVar("switchboard_log_fields", default=_EMPTY)


@contextmanager
def log_context(**fields: str | None) -> Iterator[None]:
    """Add `fields` (None and "" are left out) to every log record made inside the block."""
    given = {name: value for name, value in fields.items() if value}
    token = _fields.set(MappingProxyType({**_fields.get(), **given}))
    try:
        yield
    finally:
        _fields.reset(token)


def bind_log_context(**fields: str | None) -> None:
    """Add `fields` for the rest of this context (a process's role, set once at its start;
    tasks created later inherit it)."""
    given = {name: value for name, value in fields.items() if value}
    _fields.set(MappingProxyType({**_fields.get(), **given}))


@contextmanager
def no_log_context() -> Iterator[None]:
    """Run the block with no fields in force, as a new process starts (and undo any that a
    command run inside it bound)."""
    token = _fields.set(_EMPTY)
    try:
        yield
    finally:
        _fields.reset(token)


def current_log_context() -> Mapping[str, str]:
    """The fields in force here."""
    return _fields.get()


class LogContextFilter(logging.Filter):
    """Puts the fields in force into `record.context` (a dict), for the formatters."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.context = dict(_fields.get())
        return True
