"""Every Redis key Switchboard uses, spelled once. All keys start with `sb:`.

Payloads are msgpack of pydantic models (bus) or JSON of pydantic models (store); never pickle.
"""

from __future__ import annotations

__all__ = [
    "CONSUMER_GROUP",
    "PREFIX",
    "all_cost_totals",
    "checkpoint",
    "cost_order",
    "cost_totals",
    "costs",
    "dead_letters",
    "due_schedules",
    "enqueued",
    "lease",
    "mailbox",
    "mailboxes",
    "memory_fact_terms",
    "memory_facts",
    "memory_order",
    "memory_term",
    "memory_vocabulary",
    "message_seq",
    "messages",
    "processed",
    "queue_stream",
    "running_checkpoints",
    "schedule",
    "schedule_run_order",
    "schedule_runs",
    "schedules",
    "schedules_by_owner",
    "session",
    "session_order",
    "sessions_by_key",
    "sessions_by_update",
    "sessions_with_costs",
    "summaries",
    "summary_order",
    "topic_channel",
    "write_receipt",
]

PREFIX = "sb:"

# --- bus -----------------------------------------------------------------------------------

# The one consumer group of every work queue: consumers compete for entries.
CONSUMER_GROUP = "switchboard"


def queue_stream(queue: str) -> str:
    """The stream holding a work queue (`inbound`, `outbound.telegram`)."""
    return f"{PREFIX}q:{queue}"


def dead_letters(queue: str) -> str:
    """The stream of entries given up after too many deliveries."""
    return f"{PREFIX}dlq:{queue}"


def enqueued(dedupe_id: str) -> str:
    """Marker that an envelope with this dedupe id was enqueued (expires after a day)."""
    return f"{PREFIX}enqueued:{dedupe_id}"


def topic_channel(topic: str) -> str:
    """The pub/sub channel of a fan-out topic (`events`)."""
    return f"{PREFIX}t:{topic}"


# --- store ---------------------------------------------------------------------------------


def session(session_id: str) -> str:
    """Hash: id, key, created_at, updated_at."""
    return f"{PREFIX}session:{session_id}"


def sessions_by_key(key: str) -> str:
    """Sorted set of the session ids of one conversation key, scored by creation order."""
    return f"{PREFIX}sessions:key:{key}"


def sessions_by_update() -> str:
    """Sorted set of every session, scored by last update time (epoch microseconds).

    Members are `<creation order, 20 digits>:<session id>`, so equal times list the session
    created last first.
    """
    return f"{PREFIX}sessions:updated"


def messages(session_id: str) -> str:
    """List of the session's messages (JSON), in `seq` order."""
    return f"{PREFIX}messages:{session_id}"


def message_seq(session_id: str) -> str:
    """Counter giving out the session's `seq` numbers."""
    return f"{PREFIX}seq:{session_id}"


def summaries(session_id: str) -> str:
    """Hash of the session's compaction summaries: `up_to_seq` → the summary's JSON."""
    return f"{PREFIX}summaries:{session_id}"


def summary_order(session_id: str) -> str:
    """Sorted set of the `up_to_seq` markers of the session's summaries, scored by them."""
    return f"{PREFIX}summary-order:{session_id}"


def checkpoint(run_key: str) -> str:
    """Hash of a turn's checkpoint: `body` → the checkpoint's JSON."""
    return f"{PREFIX}checkpoint:{run_key}"


def running_checkpoints() -> str:
    """Sorted set of the run keys of `running` checkpoints, scored by `updated_at` (epoch µs)."""
    return f"{PREFIX}checkpoints-running"


def processed(key: str) -> str:
    """Marker that an inbound message (or a refusal) was handled."""
    return f"{PREFIX}processed:{key}"


def costs(session_id: str) -> str:
    """List of the session's cost ledger entries (JSON)."""
    return f"{PREFIX}costs:{session_id}"


def sessions_with_costs() -> str:
    """Sorted set of the sessions with ledger entries, scored by the latest entry's `at`.

    Members are `<ledger order of the session's last recorded entry, 20 digits>:<session id>`,
    so on equal times the session charged last comes first.
    """
    return f"{PREFIX}costs:sessions"


def cost_totals(session_id: str) -> str:
    """Hash of the session's running ledger totals (calls, tokens, cost, unpriced calls)."""
    return f"{PREFIX}cost-totals:{session_id}"


def all_cost_totals() -> str:
    """Hash of the running ledger totals of every session together."""
    return f"{PREFIX}cost-totals"


def session_order() -> str:
    """Counter numbering sessions in creation order (ties of time are broken by it)."""
    return f"{PREFIX}sessions:order"


def cost_order() -> str:
    """Counter numbering ledger entries in the order they were recorded."""
    return f"{PREFIX}cost-order"


def write_receipt(token: str) -> str:
    """The reply of one store write, kept briefly so that a retried write is not applied twice."""
    return f"{PREFIX}receipt:{token}"


# --- schedules -----------------------------------------------------------------------------


def schedule(schedule_id: str) -> str:
    """Hash: the schedule's JSON `body`, its `owner` and its `due_schedules` member, if any."""
    return f"{PREFIX}schedule:{schedule_id}"


def schedules() -> str:
    """Set of every schedule id."""
    return f"{PREFIX}schedules"


def schedules_by_owner(owner: str) -> str:
    """Set of the ids of one owner's schedules."""
    return f"{PREFIX}schedules:owner:{owner}"


def due_schedules() -> str:
    """Sorted set of the active schedules with a next run, scored by `next_run_at` (epoch µs).

    Members are `<created_at, epoch µs, 20 digits>:<schedule id>`, so equal due times list the
    oldest schedule first.
    """
    return f"{PREFIX}schedules:due"


def schedule_runs(schedule_id: str) -> str:
    """Hash of a schedule's runs: run id → the run's JSON."""
    return f"{PREFIX}schedule-runs:{schedule_id}"


def schedule_run_order(schedule_id: str) -> str:
    """Sorted set of a schedule's run ids, scored by `started_at` (epoch microseconds)."""
    return f"{PREFIX}schedule-run-order:{schedule_id}"


# --- memory --------------------------------------------------------------------------------
# One person's facts with one bot form a scope (`profile:platform:user_id`, see core/facts.py).
# The kind of key comes before the scope, and terms hold no colon, so no two keys can meet.


def memory_facts(scope: str) -> str:
    """Hash of a scope's facts: fact id → the fact's JSON."""
    return f"{PREFIX}memory:facts:{scope}"


def memory_fact_terms(scope: str) -> str:
    """Hash of a scope's indexed terms per fact: fact id → its terms, space-separated."""
    return f"{PREFIX}memory:fact-terms:{scope}"


def memory_order(scope: str) -> str:
    """Sorted set of a scope's fact ids, scored by `created_at` (epoch microseconds)."""
    return f"{PREFIX}memory:order:{scope}"


def memory_term(scope: str, term: str) -> str:
    """Set of the ids of a scope's facts that contain `term` (the inverted index)."""
    return f"{PREFIX}memory:term:{scope}:{term}"


def memory_vocabulary(scope: str) -> str:
    """Sorted set (all scores 0, so ordered by text) of a scope's indexed terms, for prefixes."""
    return f"{PREFIX}memory:vocabulary:{scope}"


# --- coordination --------------------------------------------------------------------------


def mailbox(session_key: str) -> str:
    """Sorted set of a session's waiting `Inbound`s, scored by arrival time."""
    return f"{PREFIX}mailbox:{session_key}"


def mailboxes() -> str:
    """Set of the session keys whose mailboxes may hold work."""
    return f"{PREFIX}mailboxes"


def lease(name: str) -> str:
    """A lease (`SET NX PX` with a fencing token): a session's turn, a poller's leadership."""
    return f"{PREFIX}lease:{name}"
