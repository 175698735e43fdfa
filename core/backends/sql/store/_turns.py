"""The `TurnRecords` of `SqlStore`: a turn's look-up, its opening and its closes, each one
transaction made of the same statements the single-concern calls use."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection

from core.backends.sql.store import _checkpoints, _ledger, _log, _marks, _takeovers
from core.backends.sql.store._checkpoints import SqlCheckpoints
from core.backends.sql.store._dialect import lock_for_transaction
from core.errors import StoreError
from core.fencing import Fence
from core.messages import Message
from core.store.log import SessionRecord
from core.store.turns import TurnClose, TurnOpening, TurnStanding, TurnStart

__all__ = ["SqlTurns"]


class SqlTurns(SqlCheckpoints):
    """The `TurnRecords` of `SqlStore`."""

    async def turn_standing(
        self, run_key: str, session_key: str, *, chat: str | None = None
    ) -> TurnStanding:
        """The processed mark and checkpoint of `run_key`, the current session of the key,
        the chat's running takeover."""
        now = self._now()
        async with self._read(f"look up {run_key!r}") as db:
            return TurnStanding(
                processed=await _marks.marked(db, run_key),
                checkpoint=await _checkpoints.read(db, run_key),
                session=await _log.current_of(db, session_key),
                takeover=None if chat is None else await _takeovers.running_of(db, chat, now),
            )

    async def open_turn(self, opening: TurnOpening, *, fence: Fence | None = None) -> TurnStart:
        """Find or make the session, save the checkpoint, store the message, read the rest."""
        now = self._now()
        async with self._begin(f"open a turn in session {opening.session_id!r}") as db:
            if fence is not None:
                await _log.check_fence(db, self._dialect, fence)
            session = await _log.session_of(db, opening.session_id)
            if session is None:
                session = await self._made(db, opening)
            checkpoint = opening.checkpoint
            if checkpoint is not None:
                if checkpoint.session_id != session.id:
                    checkpoint = checkpoint.model_copy(update={"session_id": session.id})
                await _checkpoints.save(db, self._dialect, checkpoint)
            summary = await _log.summary_of(db, session.id)
            read_after = max(opening.after_seq, summary.up_to_seq if summary else 0)
            asked = opening.message
            before = await _log.newest_asked(db, session.id) if asked.source else None
            resumed = before is not None and before.source == asked.source
            if before is not None and resumed:
                message = before
            else:
                message = await _log.append(db, session.id, asked, now)
            history = await _log.messages_after(db, session.id, read_after, None)
        return TurnStart(
            session=session,
            summary=summary,
            messages=history,
            read_after=read_after,
            message=message,
            resumed=resumed,
            checkpoint=checkpoint,
        )

    async def close_turn(self, closing: TurnClose, *, fence: Fence | None = None) -> list[Message]:
        """Append the messages, record the costs, save or finish the checkpoint, mark done."""
        now = self._now()
        stored: list[Message] = []
        async with self._begin(f"close a step of session {closing.session_id!r}") as db:
            if fence is not None:
                await _log.check_fence(db, self._dialect, fence)
            for message in closing.messages:
                stored.append(await _log.append(db, closing.session_id, message, now))
            for entry in closing.costs:
                await _ledger.record(db, self._dialect, entry)
            if closing.checkpoint is not None:
                await _checkpoints.save(db, self._dialect, closing.checkpoint)
            if closing.finished is not None:
                await _checkpoints.finish(db, closing.finished, "completed", now, running=True)
                await _marks.mark(db, self._dialect, closing.finished, now)
        if closing.finished is not None:
            await self._prune_finished(now)
        return stored

    async def _made(self, db: AsyncConnection, opening: TurnOpening) -> SessionRecord:
        """The key's current session, made under the opening's id if it has none."""
        if not opening.session_key:
            raise StoreError(f"cannot open a turn: no session has id {opening.session_id!r}")
        key = opening.session_key
        # Two callers opening the first turn of a key at once make one session, not two.
        await lock_for_transaction(self._dialect, db, f"session:{key}")
        found = await _log.current_of(db, key)
        if found is not None:
            return found
        return await _log.insert_session(
            db, key, opening.session_id, self._now(), direct_with=opening.direct_with
        )
