"""Secret scrubbing for logs, events and tool output.

The runtime never lets a configured secret (an API key, a bot token) reach the model, a log
line or a bus event: every such text passes through a `Redactor`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

__all__ = ["REDACTED", "RedactingFilter", "Redactor"]

REDACTED = "[redacted]"

# Shapes of well-known credentials, caught even when they were not configured here.
_PATTERNS = (
    re.compile(r"sk-ant-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"sk-(?:proj-)?[A-Za-z0-9_\-]{20,}"),
    re.compile(r"xox[abposr]-[A-Za-z0-9\-]{10,}"),
    re.compile(r"xapp-[A-Za-z0-9\-]{10,}"),
    # A Telegram bot token, also inside Bot API URLs (".../bot<token>/getUpdates").
    re.compile(r"(?<!\d)\d{6,12}:[A-Za-z0-9_\-]{30,}"),
)


class Redactor:
    """Replaces known secret values and credential-shaped strings with `[redacted]`."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Short values would shred ordinary text; real secrets are long.
        values = sorted({s for s in secrets if s and len(s) >= 8}, key=len, reverse=True)
        self._exact = re.compile("|".join(re.escape(v) for v in values)) if values else None

    def __call__(self, text: str) -> str:
        if self._exact is not None:
            text = self._exact.sub(REDACTED, text)
        for pattern in _PATTERNS:
            text = pattern.sub(REDACTED, text)
        return text


class RedactingFilter(logging.Filter):
    """A logging filter that scrubs the fully formatted message of every record."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self._redact = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = self._redact(message)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._redact(record.exc_text)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        return True
