"""The playbook: sequences of tool calls that ended a turn well, per bot (core/playbook.py).

A record is one (bot, tool sequence, keyword) with how many successful turns it was seen in.
Keywords are kept as digests (`core.playbook.digest`), never as words, so the records hold no
person's text (decision 0026).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict

__all__ = ["PlaybookEntry", "PlaybookRecords", "PlaybookSequence"]


class PlaybookEntry(BaseModel):
    """A tool sequence that worked, as found for a request."""

    model_config = ConfigDict(frozen=True)

    # The tools' names in the order they were called.
    tools: tuple[str, ...]
    # How many of the request's keywords it was recorded with.
    matched: int
    # The most successful turns it was seen in with one of those keywords.
    successes: int


class PlaybookSequence(BaseModel):
    """A tool sequence of a bot's playbook as an operator lists it."""

    model_config = ConfigDict(frozen=True)

    tools: tuple[str, ...]
    # How many keyword digests it is recorded with.
    keywords: int
    # The most successful turns it was seen in with one keyword.
    successes: int
    # When a turn last recorded it.
    updated_at: datetime


class PlaybookRecords(Protocol):
    """The playbook's records; one transaction per call."""

    async def record_sequence(
        self, bot: str, tools: Sequence[str], keywords: Sequence[str], *, keep: int | None = None
    ) -> None:
        """Count one more successful turn of `tools` for each of `keywords` (digests).

        With `keep`, in the same transaction, the bot's rows beyond `keep` go: the fewest
        successes first, of those the least recently recorded; never the rows this call wrote.
        """
        ...

    async def find_sequences(
        self, bot: str, keywords: Sequence[str], *, limit: int, proven: int | None = None
    ) -> list[PlaybookEntry]:
        """The bot's sequences recorded with any of `keywords`: with `proven`, those that
        worked at least that many times first; then those sharing the most keywords, then the
        most successful, then the most recently recorded; at most `limit`."""
        ...

    async def list_sequences(self, bot: str, *, limit: int) -> list[PlaybookSequence]:
        """The bot's sequences, the most successful first, then the most recently recorded;
        at most `limit`."""
        ...

    async def clear_playbook(self, bot: str) -> int:
        """Delete every record of the bot's playbook; how many rows went."""
        ...
