"""Seen marks: per conversation, the newest platform message a gateway handed over.

A gateway that was down reads each conversation's history from its mark on (catch-up after
downtime, `docs/discord.md`, `docs/slack.md`), so a mark is only moved forward: a late or
concurrent write of an older message never takes it back.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["LastSeen", "SeenMarks"]


class LastSeen(BaseModel):
    """The newest message seen in one conversation of one bot."""

    model_config = ConfigDict(frozen=True)

    platform: str = Field(min_length=1)
    bot: str = Field(min_length=1)
    # The platform's conversation the history is read from (a channel, DM or thread id).
    chat: str = Field(min_length=1)
    # The platform's message id (a Discord snowflake, a Slack `ts`).
    message_id: str = Field(min_length=1)
    # Orders the messages of the conversation (the snowflake; the `ts` in microseconds).
    position: int = Field(ge=0, lt=2**63)
    # When the message was sent (aware).
    at: datetime


class SeenMarks(Protocol):
    """Where each conversation's catch-up starts."""

    async def mark_seen(self, mark: LastSeen) -> bool:
        """Keep `mark` unless the conversation's mark is as new or newer; whether it was kept."""
        ...

    async def last_seen(self, platform: str, bot: str) -> list[LastSeen]:
        """Every conversation's mark of one bot, newest message first."""
        ...
