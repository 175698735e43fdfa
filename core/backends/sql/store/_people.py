"""The `PersonalRecords` of `SqlStore`: one person's data, exported or erased
(`core/store/people.py` says what is theirs and what erasing does).

Erasing is one transaction (with SQLite's `secure_delete` on, so freed pages are zeroed), then
the database is compacted outside any transaction: on SQLite the full-text index is merged
(FTS5 keeps deleted terms in its segments until then), the file is vacuumed and its
write-ahead log checkpointed and truncated (the log holds earlier copies of the pages); on
PostgreSQL the touched tables get a `VACUUM FULL`, which rewrites each table and its indexes
(a plain `VACUUM` only marks dead rows' space reusable, their bytes stay in the pages) and
holds each table's exclusive lock while it does (docs/decisions/0017-erasing-a-person.md).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from sqlalchemy import and_, delete, or_, select, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from core.backends.sql.store import _log
from core.backends.sql.store._base import SqlBase
from core.backends.sql.store._inline import compact
from core.backends.sql.store._ledger import entry_of
from core.backends.sql.store._tables import (
    approvals,
    checkpoints,
    costs,
    fences,
    images,
    memory_facts,
    messages,
    pairing_requests,
    reopened,
    reply_records,
    schedule_runs,
    schedules,
    seen,
    sessions,
    summaries,
    tool_outputs,
)
from core.facts import MemoryFact
from core.messages import Message, TextPart, ToolCall
from core.scheduling.models import Schedule, ScheduleRun
from core.store._shared import from_utc_text
from core.store.access import Approval, PairingRequest
from core.store.people import TOMBSTONE, Conversation, Erasure, Person, PersonalData

__all__ = ["SqlPeople"]

log = logging.getLogger(__name__)

# Every table erasing may touch, rewritten (`VACUUM FULL`) on PostgreSQL afterwards.
_TOUCHED: Final = (
    sessions,
    messages,
    summaries,
    reopened,
    fences,
    images,
    tool_outputs,
    seen,
    reply_records,
    memory_facts,
    schedules,
    schedule_runs,
    pairing_requests,
    approvals,
    checkpoints,
    costs,
)


@dataclass
class _Found:
    """Where one person's data is."""

    # Sessions wholly theirs (direct conversations, their schedules' sessions): id → key.
    own: dict[str, str] = field(default_factory=dict)
    # Their messages in other sessions: (session id, key, message with its seq).
    written: list[tuple[str, str, Message]] = field(default_factory=list)
    scopes: list[str] = field(default_factory=list)
    schedule_ids: list[str] = field(default_factory=list)
    # Their turns' checkpoints: run key → the inbound it holds.
    turns: dict[str, dict[str, Any]] = field(default_factory=dict)


class SqlPeople(SqlBase):
    """The `PersonalRecords` of `SqlStore`."""

    async def personal_data(self, person: Person) -> PersonalData:
        """Everything kept about `person`."""
        who = str(person)
        async with self._read(f"read the data of {who}") as db:
            found = await _find(db, person)
            own = [
                Conversation(
                    session_id=sid,
                    key=key,
                    messages=await _log.with_image_bytes(
                        db, sid, await _log.messages_after(db, sid, 0, None)
                    ),
                )
                for sid, key in found.own.items()
            ]
            groups: dict[str, Conversation] = {}
            for sid, key, message in found.written:
                held = groups.setdefault(sid, Conversation(session_id=sid, key=key))
                held.messages.extend(await _log.with_image_bytes(db, sid, [message]))
            return PersonalData(
                person=who,
                direct_conversations=own,
                group_messages=list(groups.values()),
                facts=await _facts(db, found.scopes),
                schedules=[
                    Schedule.model_validate_json(body)
                    for body in await db.scalars(
                        select(schedules.c.body)
                        .where(schedules.c.id.in_(found.schedule_ids))
                        .order_by(schedules.c.created_at, schedules.c.id)
                    )
                ],
                schedule_runs=[
                    ScheduleRun.model_validate_json(body)
                    for body in await db.scalars(
                        select(schedule_runs.c.body)
                        .where(schedule_runs.c.schedule_id.in_(found.schedule_ids))
                        .order_by(schedule_runs.c.started_at, schedule_runs.c.id)
                    )
                ],
                pairing_requests=[
                    PairingRequest.model_validate_json(body)
                    for body in await db.scalars(
                        select(pairing_requests.c.body).where(_access_of(pairing_requests, person))
                    )
                ],
                approvals=[
                    Approval.model_validate_json(body)
                    for body in await db.scalars(
                        select(approvals.c.body).where(_access_of(approvals, person))
                    )
                ],
                turn_records=list(found.turns.values()),
                costs=[
                    entry_of(row)
                    for row in await db.execute(
                        select(costs).where(_costs_of(who, found)).order_by(costs.c.number)
                    )
                ],
            )

    async def erase_person(self, person: Person) -> Erasure:
        """Erase `person`, then compact the database."""
        who = str(person)
        async with self._begin(f"erase the data of {who}") as db:
            if self._dialect == "sqlite":
                # Pages freed from now on are overwritten with zeros, not left as they were.
                await db.exec_driver_sql("PRAGMA secure_delete = ON")
            found = await _find(db, person)
            counts = await _erase(db, person, found)
        compacted = await self._compact()
        return counts.model_copy(update={"compacted": compacted})

    async def _compact(self) -> bool:
        """Give the freed bytes back; whether it all went through (the erasure itself is
        committed either way: a busy database is told, not raised)."""
        try:
            return await self._compacted()
        except (DBAPIError, OSError, sqlite3.Error):
            log.warning("could not compact the database after an erasure", exc_info=True)
            return False

    async def _compacted(self) -> bool:
        async with self._engine.connect() as connection:
            if self._dialect != "postgresql":
                return await compact(connection)  # SQLite: in a thread, off the loop
            db = await connection.execution_options(isolation_level="AUTOCOMMIT")
            for table in _TOUCHED:
                await db.exec_driver_sql(f"VACUUM FULL {table.name}")
            return True


async def _find(db: AsyncConnection, person: Person) -> _Found:
    """Where `person`'s data is, in the transaction of `db`."""
    who = str(person)
    s, m = sessions.c, messages.c
    found = _Found()
    rows = await db.execute(
        select(s.id, s.key, s.direct_with).where(
            or_(
                s.direct_with == who,
                and_(s.direct_with.is_(None), s.key.startswith(f"{person.platform}:")),
            )
        )
    )
    found.own = {
        sid: key for sid, key, direct_with in rows if direct_with == who or person.owns_key(key)
    }
    found.schedule_ids = list(
        await db.scalars(
            select(schedules.c.id).where(schedules.c.owner == who).order_by(schedules.c.id)
        )
    )
    scheduled = [f"scheduled:{schedule_id}" for schedule_id in found.schedule_ids]
    for sid, key in await db.execute(select(s.id, s.key).where(s.key.in_(scheduled))):
        found.own[sid] = key
    found.turns = await _turns_of(db, person)
    asked = set(found.turns)
    # Their messages elsewhere: written with their name, or the message of one of their turns
    # (messages from before `author` was kept); and what answered them (a person's message
    # begins a turn, whose answers run to the next person's message).
    # A fork's copies of their turns are theirs too: its sessions forked from those, at any depth.
    turn_sessions = await _with_forks(
        db, {turn["session_id"] for turn in found.turns.values() if turn["session_id"]}
    )
    authored = select(m.session_id).where(m.author == who).distinct()
    groups = await db.execute(
        select(s.id, s.key)
        .where(or_(s.id.in_(authored), s.id.in_(turn_sessions)), s.id.not_in(list(found.own)))
        .order_by(s.number)
    )
    for sid, key in groups.all():
        turns = await _turns_in(db, sid, who, asked)
        found.written.extend((sid, key, message) for message in turns)
    found.scopes = [
        scope
        for scope in await db.scalars(select(memory_facts.c.scope).distinct())
        if person.owns_scope(scope)
    ]
    return found


async def _with_forks(db: AsyncConnection, session_ids: set[str]) -> set[str]:
    """`session_ids` and every session forked from one of them, however many forks down."""
    found = set(session_ids)
    frontier = set(session_ids)
    while frontier:
        forks = await db.scalars(select(sessions.c.id).where(sessions.c.forked_from.in_(frontier)))
        frontier = set(forks) - found
        found |= frontier
    return found


async def _turns_in(
    db: AsyncConnection, session_id: str, who: str, asked: set[str]
) -> list[Message]:
    """The messages of `who`'s turns in a group's session: theirs and the answers to them."""
    theirs: list[Message] = []
    mine = False
    for message in await _log.messages_after(db, session_id, 0, None):
        if message.role == "user":
            mine = message.author == who or (message.source is not None and message.source in asked)
        if mine:
            theirs.append(message)
    return theirs


async def _turns_of(db: AsyncConnection, person: Person) -> dict[str, dict[str, Any]]:
    """The checkpoints of `person`'s turns and of their schedules' runs: run key → a record
    of the turn (its session and the inbound it holds)."""
    who = str(person)
    found: dict[str, dict[str, Any]] = {}
    c = checkpoints.c
    for run_key, body in await db.execute(select(c.run_key, c.body).order_by(c.started_at)):
        record = json.loads(body)
        inbound = record.get("inbound") or {}
        address = inbound.get("address") or {}
        mine = (
            inbound.get("origin", "user") == "user"
            and address.get("platform") == person.platform
            and inbound.get("user_id") == person.user_id
        ) or (inbound.get("origin") == "scheduled" and inbound.get("owner") == who)
        if mine:
            found[run_key] = {"session_id": record.get("session_id"), "inbound": inbound}
    return found


async def _facts(db: AsyncConnection, scopes: list[str]) -> list[MemoryFact]:
    f = memory_facts.c
    rows = await db.execute(
        select(f.id, f.scope, f.text, f.created_at, f.source_session, f.source)
        .where(f.scope.in_(scopes))
        .order_by(f.created_at, f.id)
    )
    return [
        MemoryFact(
            id=fact_id,
            scope=scope,
            text=fact_text,
            created_at=from_utc_text(created_at),
            source_session=source_session,
            source=source,
        )
        for fact_id, scope, fact_text, created_at, source_session, source in rows
    ]


def _access_of(table: Any, person: Person) -> Any:
    return and_(table.c.platform == person.platform, table.c.user_id == person.user_id)


def _costs_of(who: str, found: _Found) -> Any:
    return or_(costs.c.user_key == who, costs.c.session_id.in_(list(found.own)))


def _chats(keys: Iterable[str]) -> set[tuple[str, str, str]]:
    """(platform, bot, chat) of each session key of a chat (not a schedule's)."""
    chats = set()
    for key in keys:
        parts = key.split(":")
        if len(parts) >= 3 and parts[0] != "scheduled":
            chats.add((parts[0], parts[1], parts[2]))
    return chats


async def _erase(db: AsyncConnection, person: Person, found: _Found) -> Erasure:
    """Delete, tombstone and anonymise what `found` says, in the transaction of `db`."""
    who = str(person)
    own = list(found.own)
    # A DM's chat is the person too; a schedule's runs answered in a chat that stays.
    direct = [sid for sid, key in found.own.items() if not key.startswith("scheduled:")]
    anonymised = await db.execute(
        update(costs).where(costs.c.session_id.in_(direct)).values(user_key=None, chat_key=None)
    )
    anonymised_too = await db.execute(
        update(costs).where(costs.c.user_key == who).values(user_key=None)
    )
    for table in (messages, summaries, reopened, tool_outputs, images):
        await db.execute(delete(table).where(table.c.session_id.in_(own)))
    deleted_sessions = await db.execute(delete(sessions).where(sessions.c.id.in_(own)))
    await db.execute(delete(fences).where(fences.c.session_key.in_(list(found.own.values()))))
    await _forget_chats(db, found)
    touched = await _tombstone_written(db, found)
    # A summary of a group's history may repeat their words; the history is read in full
    # again (and summarised anew) instead, also by a process that holds it (`revision`).
    await db.execute(delete(summaries).where(summaries.c.session_id.in_(touched)))
    await db.execute(
        update(sessions).where(sessions.c.id.in_(touched)).values(revision=sessions.c.revision + 1)
    )
    facts = await db.execute(delete(memory_facts).where(memory_facts.c.scope.in_(found.scopes)))
    await db.execute(
        delete(schedule_runs).where(schedule_runs.c.schedule_id.in_(found.schedule_ids))
    )
    deleted_schedules = await db.execute(
        delete(schedules).where(schedules.c.id.in_(found.schedule_ids))
    )
    access = 0
    for table in (pairing_requests, approvals):
        access += (await db.execute(delete(table).where(_access_of(table, person)))).rowcount
    turns = list(found.turns)
    # What the platform was shown of the answers to them (keyed by the message answered).
    answered = {m.source for _sid, _key, m in found.written if m.source} | set(turns)
    await db.execute(delete(reply_records).where(reply_records.c.key.in_(answered)))
    deleted_turns = await db.execute(delete(checkpoints).where(checkpoints.c.run_key.in_(turns)))
    return Erasure(
        sessions_deleted=deleted_sessions.rowcount,
        messages_tombstoned=len(found.written),
        facts_deleted=facts.rowcount,
        schedules_deleted=deleted_schedules.rowcount,
        access_records_deleted=access,
        checkpoints_deleted=deleted_turns.rowcount,
        costs_anonymised=anonymised.rowcount + anonymised_too.rowcount,
    )


async def _forget_chats(db: AsyncConnection, found: _Found) -> None:
    """Forget the chats of the person's own sessions: what was seen there and the records
    of the replies sent there."""
    for platform, bot, chat in _chats(found.own.values()):
        await db.execute(
            delete(seen).where(seen.c.platform == platform, seen.c.bot == bot, seen.c.chat == chat)
        )
        prefix = f"{platform}:{bot}:{chat}:"
        await db.execute(delete(reply_records).where(reply_records.c.key.startswith(prefix)))


async def _tombstone_written(db: AsyncConnection, found: _Found) -> set[str]:
    """Tombstone what the person wrote in sessions that stay, and drop the whole text of
    their turns' tool results; the sessions touched."""
    touched: set[str] = set()
    for sid, _key, message in found.written:
        await db.execute(
            update(messages)
            .where(messages.c.session_id == sid, messages.c.seq == message.seq)
            .values(
                body=_tombstone(message).model_dump_json(exclude={"seq", "created_at"}),
                author=None,
            )
        )
        touched.add(sid)
        # The images they sent there, kept apart from the message.
        digests = [image.ref for image in message.images if image.ref]
        if digests:
            await db.execute(
                delete(images).where(images.c.session_id == sid, images.c.digest.in_(digests))
            )
        # The whole text of a tool result of their turn that the model was shown cut.
        calls = [call.id for call in message.tool_calls]
        calls += [message.tool_call_id] if message.tool_call_id else []
        if calls:
            await db.execute(
                delete(tool_outputs).where(
                    tool_outputs.c.session_id == sid, tool_outputs.c.call_id.in_(calls)
                )
            )
    return touched


def _tombstone(message: Message) -> Message:
    """What stands in for `message` of a forgotten person's turn: the same role, ids and
    tool calls (so calls and results still pair up), none of the words."""
    said = [TextPart(text=TOMBSTONE)] if message.content or message.role != "assistant" else []
    return Message(
        role=message.role,
        content=said,
        tool_calls=[ToolCall(id=call.id, name=call.name) for call in message.tool_calls],
        tool_call_id=message.tool_call_id,
        name=message.name,
        is_error=message.is_error,
        usage=message.usage,
        source=message.source,
        id=message.id,
    )
