"""Every Redis key Switchboard uses, spelled once, under one bot's namespace.

Redis holds coordination only: work queues and their dead letters, mailboxes and the wakes of
workers, turn leases and
fencing epochs, leader leases, holds on replies, rate-limit counters, heartbeats and pub/sub
topics. Records (history, costs, schedules, facts, access, reply records) are in the SQL
database (`core/backends/sql/store/`), so emptying Redis loses work in flight at most.

Several bots (deployments with their own profile and tokens) may share one Redis: each builds
its keys with `RedisKeys(bot_id)`, and every key starts with `sb:<bot id>:`, e.g.
`sb:default:q:{q:receipts}`, `sb:support:lease:turn:{s:<session key>}`. A bot id holds no
colon, so no bot's keys can fall inside another's namespace. Nothing here is global:
`RedisBus`, `RedisMailboxes`, `RedisReplyHolds` and `Leadership` each take their `RedisKeys`.

Hash tags (Redis Cluster): the keys of one queue carry `{q:<queue>}`, the keys of one
session's coordination `{s:<session key>}` and a reply's hold `{r:<reply key>}`, so each
script and each transaction touches keys of one cluster slot only. Redis hashes a key by the
text between its first `{` and the next `}`: a session key holding a `}` cuts its tag short,
but the same way in every key of that session, so they still share a slot; the tag never comes
out empty (it starts `q:`/`s:`/`r:`). A key that gathers many sessions (the set of mailboxes
with work) or belongs to no session (a leader lease, the heartbeats) is only ever touched on
its own.

Payloads are msgpack of pydantic models; never pickle.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["CONSUMER_GROUP", "DEFAULT_BOT_ID", "PREFIX", "RedisKeys", "check_bot_id"]

# The root of every key; the bot id comes next.
PREFIX: Final = "sb:"

# The namespace of a deployment that names no bot (`SWITCHBOARD_BOT_ID` unset).
DEFAULT_BOT_ID: Final = "default"

# The one consumer group of every work queue: consumers compete for entries.
CONSUMER_GROUP: Final = "switchboard"

_BOT_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def check_bot_id(bot_id: str) -> str:
    """`bot_id` if it can name a namespace (letters, digits, `_`, `.`, `-`; no colon), else
    `ValueError`."""
    if not _BOT_ID.fullmatch(bot_id):
        raise ValueError(
            f"bot id {bot_id!r}: use 1-64 letters, digits, '_', '.' or '-', starting with a"
            " letter or digit"
        )
    return bot_id


def _queue_tag(queue: str) -> str:
    """The hash tag of a queue's keys: they all hash to one cluster slot."""
    return f"{{q:{queue}}}"


def _reply_tag(reply_key: str) -> str:
    """The hash tag of a reply's hold."""
    return f"{{r:{reply_key}}}"


def _session_tag(session_key: str) -> str:
    """The hash tag of a session's coordination keys (mailbox, turn lease, epoch counter)."""
    return f"{{s:{session_key}}}"


class RedisKeys:
    """The keys of one bot's namespace, `sb:<bot id>:`."""

    def __init__(self, bot_id: str = DEFAULT_BOT_ID) -> None:
        """Keys under `bot_id`'s namespace; `ValueError` for an id that cannot be one."""
        self.bot_id = check_bot_id(bot_id)
        self.prefix = f"{PREFIX}{bot_id}:"

    # --- bus -------------------------------------------------------------------------------

    def queue_stream(self, queue: str) -> str:
        """The stream holding a work queue (`outbound.<platform>`, `receipts`)."""
        return f"{self.prefix}q:{_queue_tag(queue)}"

    def dead_letters(self, queue: str) -> str:
        """The stream of entries given up after too many deliveries (the queue's slot)."""
        return f"{self.prefix}dlq:{_queue_tag(queue)}"

    def enqueued(self, queue: str, dedupe_id: str) -> str:
        """Marker that an envelope with this dedupe id was enqueued on `queue` (expires after a
        day; in the queue's slot, as the script that sets it also adds to the queue)."""
        return f"{self.prefix}enqueued:{_queue_tag(queue)}:{dedupe_id}"

    def topic_channel(self, topic: str) -> str:
        """The pub/sub channel of a fan-out topic (`events`)."""
        return f"{self.prefix}t:{topic}"

    # --- coordination --------------------------------------------------------------------------

    def mailbox(self, session_key: str) -> str:
        """Sorted set of a session's waiting `Inbound`s, scored by arrival time."""
        return f"{self.prefix}mailbox:{_session_tag(session_key)}"

    def mailboxes(self) -> str:
        """Set of the session keys whose mailboxes may hold work (touched only on its own: it
        gathers every session, so it shares a slot with none of theirs)."""
        return f"{self.prefix}mailboxes"

    def wakes(self) -> str:
        """List of session keys work was put for, each popped by one worker (touched only on
        its own, like `mailboxes`)."""
        return f"{self.prefix}wakes"

    def lease(self, name: str) -> str:
        """A lease (`SET NX PX` with a fencing token) of one role: a poller's leadership."""
        return f"{self.prefix}lease:{name}"

    def turn_lease(self, session_key: str) -> str:
        """The lease of the worker running the session's turns (the session's slot)."""
        return f"{self.prefix}lease:turn:{_session_tag(session_key)}"

    def claim_epoch(self, session_key: str) -> str:
        """Counter of the fencing epochs the mailboxes gave the session's claims."""
        return f"{self.prefix}claim-epoch:{_session_tag(session_key)}"

    def reply_hold(self, reply_key: str) -> str:
        """The lease of the gateway showing a piece of the reply now (`replies_hold.py`)."""
        return f"{self.prefix}reply-hold:{_reply_tag(reply_key)}"

    def rate_limits(self) -> str:
        """The prefix of the rate-limit counters (the `limits` package names the rest)."""
        return f"{self.prefix}limits"

    def processes(self) -> str:
        """Hash of the running processes' heartbeats (`core/heartbeat.py`), by process id."""
        return f"{self.prefix}processes"
