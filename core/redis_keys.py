"""Every Redis key Switchboard uses, spelled once, under one bot's namespace.

Several bots (deployments with their own profile and tokens) may share one Redis: each builds
its keys with `RedisKeys(bot_id)`, and every key (queue streams, dead letters, topics, the
store's records, mailboxes, leases, fencing epochs) starts with `sb:<bot id>:`, e.g.
`sb:default:q:{q:inbound}`, `sb:support:session:3f2a9c01b7d4`,
`sb:support:lease:turn:{s:<session key>}`. A bot id holds no colon, so no bot's keys can fall
inside another's namespace. Nothing here is global: `RedisBus`, `RedisStore`, `RedisMailboxes`
and `Leadership` each take their `RedisKeys`.

Hash tags (Redis Cluster): the keys of one queue carry `{q:<queue>}` and the keys of one
session's coordination carry `{s:<session key>}`, so each script and each transaction touches
keys of one cluster slot only. Redis hashes a key by the text between its first `{` and the
next `}`: a session key holding a `}` cuts its tag short, but the same way in every key of
that session, so they still share a slot; the tag never comes out empty (it starts `q:`/`s:`).
A key that gathers many sessions (the set of mailboxes with work) is only ever touched on its
own.

Payloads are msgpack of pydantic models (bus) or JSON of pydantic models (store); never pickle.
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
        """The stream holding a work queue (`inbound`, `outbound.<platform>`)."""
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

    # --- store -----------------------------------------------------------------------------

    def session(self, session_id: str) -> str:
        """Hash: id, key, created_at, updated_at."""
        return f"{self.prefix}session:{session_id}"

    def sessions_by_key(self, key: str) -> str:
        """Sorted set of the session ids of one conversation key, scored by creation order."""
        return f"{self.prefix}sessions:key:{key}"

    def sessions_by_update(self) -> str:
        """Sorted set of every session, scored by last update time (epoch microseconds).

        Members are `<creation order, 20 digits>:<session id>`, so equal times list the session
        created last first.
        """
        return f"{self.prefix}sessions:updated"

    def messages(self, session_id: str) -> str:
        """List of the session's messages (JSON), in `seq` order."""
        return f"{self.prefix}messages:{session_id}"

    def message_seq(self, session_id: str) -> str:
        """Counter giving out the session's `seq` numbers."""
        return f"{self.prefix}seq:{session_id}"

    def summaries(self, session_id: str) -> str:
        """Hash of the session's compaction summaries: `up_to_seq` → the summary's JSON."""
        return f"{self.prefix}summaries:{session_id}"

    def summary_order(self, session_id: str) -> str:
        """Sorted set of the `up_to_seq` markers of the session's summaries, scored by them."""
        return f"{self.prefix}summary-order:{session_id}"

    def checkpoint(self, run_key: str) -> str:
        """Hash of a turn's checkpoint: `body` → the checkpoint's JSON."""
        return f"{self.prefix}checkpoint:{run_key}"

    def reply_record(self, key: str) -> str:
        """What a streamed reply shows: its pieces' sequence and message ids (msgpack)."""
        return f"{self.prefix}reply:{key}"

    def reply_hold(self, key: str) -> str:
        """The lease of the gateway working on a reply now."""
        return f"{self.prefix}reply-hold:{key}"

    def running_checkpoints(self) -> str:
        """Sorted set of the run keys of `running` checkpoints, scored by `updated_at` (µs)."""
        return f"{self.prefix}checkpoints-running"

    def processed(self, key: str) -> str:
        """Marker that an inbound message (or a refusal) was handled."""
        return f"{self.prefix}processed:{key}"

    def seen(self, platform: str, bot: str) -> str:
        """Hash of one bot's seen marks: conversation → `<position, 20 digits> <mark JSON>`."""
        return f"{self.prefix}seen:{platform}:{bot}"

    def costs(self, session_id: str) -> str:
        """List of the session's cost ledger entries (JSON)."""
        return f"{self.prefix}costs:{session_id}"

    def sessions_with_costs(self) -> str:
        """Sorted set of the sessions with ledger entries, scored by the latest entry's `at`.

        Members are `<ledger order of the session's last recorded entry, 20 digits>:<session id>`,
        so on equal times the session charged last comes first.
        """
        return f"{self.prefix}costs:sessions"

    def cost_totals(self, session_id: str) -> str:
        """Hash of the session's running ledger totals (calls, tokens, cost, unpriced calls)."""
        return f"{self.prefix}cost-totals:{session_id}"

    def all_cost_totals(self) -> str:
        """Hash of the running ledger totals of every session together."""
        return f"{self.prefix}cost-totals"

    def cost_group_totals(self, by: str, key: str) -> str:
        """Hash of the running ledger totals of one person, chat, UTC day or model (`by`)."""
        return f"{self.prefix}cost-group:{by}:{key}"

    def cost_groups(self, by: str) -> str:
        """Set of the people, chats, UTC days or models (`by`) with ledger entries."""
        return f"{self.prefix}cost-groups:{by}"

    def daily_spend(self, day: str) -> str:
        """Hash of one UTC day's known spend in USD: `all`, `user:<user>` and `chat:<chat>`.

        Kept for a week: the daily budgets read only today's.
        """
        return f"{self.prefix}cost-daily:{day}"

    def rate_limits(self) -> str:
        """The prefix of the rate-limit counters (the `limits` package names the rest)."""
        return f"{self.prefix}limits"

    def session_order(self) -> str:
        """Counter numbering sessions in creation order (ties of time are broken by it)."""
        return f"{self.prefix}sessions:order"

    def cost_order(self) -> str:
        """Counter numbering ledger entries in the order they were recorded."""
        return f"{self.prefix}cost-order"

    def write_receipt(self, token: str) -> str:
        """The reply of one store write, kept briefly so that a retried write is not redone."""
        return f"{self.prefix}receipt:{token}"

    # --- schedules -----------------------------------------------------------------------------

    def schedule(self, schedule_id: str) -> str:
        """Hash: the schedule's JSON `body`, its `owner` and its `due_schedules` member, if any."""
        return f"{self.prefix}schedule:{schedule_id}"

    def schedules(self) -> str:
        """Set of every schedule id."""
        return f"{self.prefix}schedules"

    def schedules_by_owner(self, owner: str) -> str:
        """Set of the ids of one owner's schedules."""
        return f"{self.prefix}schedules:owner:{owner}"

    def due_schedules(self) -> str:
        """Sorted set of the active schedules with a next run, scored by `next_run_at` (epoch µs).

        Members are `<created_at, epoch µs, 20 digits>:<schedule id>`, so equal due times list the
        oldest schedule first.
        """
        return f"{self.prefix}schedules:due"

    def schedule_runs(self, schedule_id: str) -> str:
        """Hash of a schedule's runs: run id → the run's JSON."""
        return f"{self.prefix}schedule-runs:{schedule_id}"

    def schedule_run_order(self, schedule_id: str) -> str:
        """Sorted set of a schedule's run ids, scored by `started_at` (epoch microseconds)."""
        return f"{self.prefix}schedule-run-order:{schedule_id}"

    # --- remembered facts ------------------------------------------------------------
    # One person's facts with one bot form a scope (`profile:platform:user_id`, see core/facts.py).
    # The kind of key comes before the scope, and terms hold no colon, so no two keys can meet.

    def facts(self, scope: str) -> str:
        """Hash of a scope's facts: fact id → the fact's JSON."""
        return f"{self.prefix}memory:facts:{scope}"

    def fact_terms(self, scope: str) -> str:
        """Hash of a scope's indexed terms per fact: fact id → its terms, space-separated."""
        return f"{self.prefix}memory:fact-terms:{scope}"

    def fact_order(self, scope: str) -> str:
        """Sorted set of a scope's fact ids, scored by `created_at` (epoch microseconds)."""
        return f"{self.prefix}memory:order:{scope}"

    def fact_term(self, scope: str, term: str) -> str:
        """Set of the ids of a scope's facts that contain `term` (the inverted index)."""
        return f"{self.prefix}memory:term:{scope}:{term}"

    def fact_vocabulary(self, scope: str) -> str:
        """Sorted set (all scores 0, so ordered by text) of a scope's terms, for prefixes."""
        return f"{self.prefix}memory:vocabulary:{scope}"

    # --- coordination --------------------------------------------------------------------------

    def mailbox(self, session_key: str) -> str:
        """Sorted set of a session's waiting `Inbound`s, scored by arrival time."""
        return f"{self.prefix}mailbox:{_session_tag(session_key)}"

    def mailboxes(self) -> str:
        """Set of the session keys whose mailboxes may hold work (touched only on its own: it
        gathers every session, so it shares a slot with none of theirs)."""
        return f"{self.prefix}mailboxes"

    def lease(self, name: str) -> str:
        """A lease (`SET NX PX` with a fencing token) of one role: a poller's leadership."""
        return f"{self.prefix}lease:{name}"

    def turn_lease(self, session_key: str) -> str:
        """The lease of the worker running the session's turns (the session's slot)."""
        return f"{self.prefix}lease:turn:{_session_tag(session_key)}"

    def claim_epoch(self, session_key: str) -> str:
        """Counter of the fencing epochs the mailboxes gave the session's claims."""
        return f"{self.prefix}claim-epoch:{_session_tag(session_key)}"

    def fence(self, session_key: str) -> str:
        """The highest fencing epoch the store saw on a write for the session (the store's
        side of the fence; a store elsewhere keeps it there)."""
        return f"{self.prefix}fence:{session_key}"

    # --- access (pairing requests and approvals) -----------------------------------------------

    def pairing_requests(self, platform: str) -> str:
        """Hash of one platform's pairing requests: user id → `<expires_at, epoch µs, 20
        digits> <request JSON>`."""
        return f"{self.prefix}pairing:{platform}"

    def pairing_codes(self, platform: str) -> str:
        """Hash of one platform's live pairing codes: code → user id."""
        return f"{self.prefix}pairing-codes:{platform}"

    def pairing_platforms(self) -> str:
        """Set of the platforms that had pairing requests (for listing them all)."""
        return f"{self.prefix}pairing-platforms"

    def approvals(self, platform: str) -> str:
        """Hash of one platform's approvals: user id → the approval's JSON."""
        return f"{self.prefix}approvals:{platform}"

    def approval_platforms(self) -> str:
        """Set of the platforms that had approvals (for listing them all)."""
        return f"{self.prefix}approval-platforms"

    def processes(self) -> str:
        """Hash of the running processes' heartbeats (`core/heartbeat.py`), by process id."""
        return f"{self.prefix}processes"
