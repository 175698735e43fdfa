"""The `AccessRecords` of `SqliteStore`: a row per pairing request and per approval.

Each row keeps the record's JSON (`body`) beside the columns that are queried; times are
fixed-width UTC text, so comparing the text compares the times.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from core.errors import StoreError
from core.store._shared import check_aware, utc_text
from core.store._sqlite_base import SqliteBase
from core.store.access import Approval, PairingAnswer, PairingRequest

__all__ = ["MIGRATION", "SqliteAccess"]

MIGRATION: Final = (
    """
    CREATE TABLE pairing_requests (
        platform TEXT NOT NULL,
        user_id TEXT NOT NULL,
        code TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (platform, user_id)
    )
    """,
    "CREATE UNIQUE INDEX pairing_requests_by_code ON pairing_requests (platform, code)",
    """
    CREATE TABLE approvals (
        platform TEXT NOT NULL,
        user_id TEXT NOT NULL,
        approved_at TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (platform, user_id)
    )
    """,
)


class SqliteAccess(SqliteBase):
    """The `AccessRecords` of `SqliteStore`."""

    async def request_pairing(
        self, request: PairingRequest, *, now: datetime, max_pending: int
    ) -> PairingAnswer:
        """File `request` unless its person has a live one or the code is in use; drops expired
        requests first, and the oldest pending ones past `max_pending` - 1."""
        check_aware(request, "the pairing request")
        at = _utc(now)
        async with self._write(f"file a pairing request of {request.platform}:{request.user_id}"):
            await self._db.execute(
                "DELETE FROM pairing_requests WHERE platform = ? AND expires_at <= ?",
                (request.platform, at),
            )
            rows = await self._db.execute_fetchall(
                "SELECT body FROM pairing_requests WHERE platform = ? AND user_id = ?",
                (request.platform, request.user_id),
            )
            if mine := next(iter(rows), None):
                return PairingAnswer(
                    outcome="exists", request=PairingRequest.model_validate_json(str(mine[0]))
                )
            rows = await self._db.execute_fetchall(
                "SELECT 1 FROM pairing_requests WHERE platform = ? AND code = ?",
                (request.platform, request.code),
            )
            if next(iter(rows), None) is not None:
                return PairingAnswer(outcome="code_taken")
            # A full list: the pending requests that expire first give way.
            rows = await self._db.execute_fetchall(
                "SELECT user_id, body FROM pairing_requests"
                " WHERE platform = ? AND status = 'pending'"
                " ORDER BY expires_at DESC, user_id DESC LIMIT -1 OFFSET ?",
                (request.platform, max(max_pending - 1, 0)),
            )
            gave_way = [PairingRequest.model_validate_json(str(body)) for _, body in rows]
            await self._db.executemany(
                "DELETE FROM pairing_requests WHERE platform = ? AND user_id = ?",
                [(request.platform, str(user)) for user, _ in rows],
            )
            await self._db.execute(
                "INSERT INTO pairing_requests"
                " (platform, user_id, code, status, created_at, expires_at, body)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    request.platform,
                    request.user_id,
                    request.code,
                    request.status,
                    utc_text(request.created_at),
                    utc_text(request.expires_at),
                    request.model_dump_json(),
                ),
            )
        return PairingAnswer(outcome="created", request=request, gave_way=gave_way)

    async def pairing_requests(
        self, platform: str | None, *, now: datetime
    ) -> list[PairingRequest]:
        """The live pending requests of one platform (None: every one), oldest first."""
        async with self._read("list the pairing requests"):
            rows = await self._db.execute_fetchall(
                "SELECT body FROM pairing_requests WHERE status = 'pending' AND expires_at > ?"
                " AND (? IS NULL OR platform = ?) ORDER BY created_at, platform, user_id",
                (_utc(now), platform, platform),
            )
            return [PairingRequest.model_validate_json(str(body)) for (body,) in rows]

    async def approve_pairing(
        self, platform: str, code: str, *, now: datetime, admin: bool, by: str
    ) -> Approval | None:
        """Turn the live pending request with `code` into an approval; None if there is none."""
        async with self._write(f"approve the pairing code of {platform}"):
            request = await self._live_pending(platform, code, now)
            if request is None:
                return None
            approval = Approval(
                platform=platform,
                user_id=request.user_id,
                user_name=request.user_name,
                admin=admin,
                approved_at=now,
                approved_by=by,
            )
            await self._db.execute(
                "DELETE FROM pairing_requests WHERE platform = ? AND user_id = ?",
                (platform, request.user_id),
            )
            await self._db.execute(
                "INSERT OR REPLACE INTO approvals (platform, user_id, approved_at, body)"
                " VALUES (?, ?, ?, ?)",
                (platform, request.user_id, _utc(now), approval.model_dump_json()),
            )
        return approval

    async def deny_pairing(
        self, platform: str, code: str, *, now: datetime
    ) -> PairingRequest | None:
        """Mark the live pending request with `code` denied; the request as it was, or None."""
        async with self._write(f"deny the pairing code of {platform}"):
            request = await self._live_pending(platform, code, now)
            if request is None:
                return None
            denied = request.model_copy(update={"status": "denied"})
            await self._db.execute(
                "UPDATE pairing_requests SET status = 'denied', body = ?"
                " WHERE platform = ? AND user_id = ?",
                (denied.model_dump_json(), platform, request.user_id),
            )
        return request

    async def approval(self, platform: str, user_id: str) -> Approval | None:
        """This person's approval on `platform`, or None."""
        async with self._read(f"read the approval of {platform}:{user_id}"):
            rows = await self._db.execute_fetchall(
                "SELECT body FROM approvals WHERE platform = ? AND user_id = ?",
                (platform, user_id),
            )
            found = next(iter(rows), None)
            return None if found is None else Approval.model_validate_json(str(found[0]))

    async def approvals(self, platform: str | None) -> list[Approval]:
        """Every approval of one platform (None: every one), by platform, oldest first."""
        async with self._read("list the approvals"):
            rows = await self._db.execute_fetchall(
                "SELECT body FROM approvals WHERE ? IS NULL OR platform = ?"
                " ORDER BY platform, approved_at, user_id",
                (platform, platform),
            )
            return [Approval.model_validate_json(str(body)) for (body,) in rows]

    async def revoke_approval(self, platform: str, user_id: str) -> bool:
        """Take this person's approval back; whether there was one."""
        async with self._write(f"revoke the approval of {platform}:{user_id}"):
            cursor = await self._db.execute(
                "DELETE FROM approvals WHERE platform = ? AND user_id = ?", (platform, user_id)
            )
            return cursor.rowcount == 1

    async def _live_pending(self, platform: str, code: str, now: datetime) -> PairingRequest | None:
        """The pending, unexpired request with `code` (inside a transaction)."""
        rows = await self._db.execute_fetchall(
            "SELECT body FROM pairing_requests WHERE platform = ? AND code = ?"
            " AND status = 'pending' AND expires_at > ?",
            (platform, code, _utc(now)),
        )
        found = next(iter(rows), None)
        return None if found is None else PairingRequest.model_validate_json(str(found[0]))


def _utc(now: datetime) -> str:
    """`now` as stored time text; a naive `now` has no instant and is refused."""
    if now.utcoffset() is None:
        raise StoreError("the access records were given a naive `now`; it must be aware")
    return utc_text(now)
