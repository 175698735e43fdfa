"""The `AccessRecords` of `SqlStore`: a row per pairing request and per approval."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from core.backends.sql.store._base import SqlBase
from core.backends.sql.store._dialect import lock_for_transaction, upsert
from core.backends.sql.store._tables import approvals, pairing_requests
from core.errors import StoreError
from core.store._shared import check_aware, utc_text
from core.store.access import Approval, PairingAnswer, PairingRequest

__all__ = ["SqlAccess"]

p = pairing_requests.c
a = approvals.c


class SqlAccess(SqlBase):
    """The `AccessRecords` of `SqlStore`."""

    async def request_pairing(
        self, request: PairingRequest, *, now: datetime, max_pending: int
    ) -> PairingAnswer:
        """File `request` unless its person has a live one or the code is in use; drops expired
        requests first, and the oldest pending ones past `max_pending` - 1."""
        check_aware(request, "the pairing request")
        at = _utc(now)
        platform = request.platform
        async with self._begin(f"file a pairing request of {platform}:{request.user_id}") as db:
            # One platform's requests are filed one at a time (the limit counts them all).
            await lock_for_transaction(self._dialect, db, f"pairing:{platform}")
            await db.execute(
                delete(pairing_requests).where(p.platform == platform, p.expires_at <= at)
            )
            mine = (
                await db.execute(
                    select(p.body).where(p.platform == platform, p.user_id == request.user_id)
                )
            ).scalar()
            if mine is not None:
                return PairingAnswer(
                    outcome="exists", request=PairingRequest.model_validate_json(mine)
                )
            taken = await db.execute(
                select(p.user_id).where(p.platform == platform, p.code == request.code)
            )
            if taken.first() is not None:
                return PairingAnswer(outcome="code_taken")
            # A full list: the pending requests that expire first give way.
            rows = (
                await db.execute(
                    select(p.user_id, p.body)
                    .where(p.platform == platform, p.status == "pending")
                    .order_by(p.expires_at.desc(), p.user_id.desc())
                    .offset(max(max_pending - 1, 0))
                )
            ).all()
            gave_way = [PairingRequest.model_validate_json(body) for _, body in rows]
            if rows:
                await db.execute(
                    delete(pairing_requests).where(
                        p.platform == platform, p.user_id.in_([user for user, _ in rows])
                    )
                )
            await db.execute(
                insert(pairing_requests).values(
                    platform=platform,
                    user_id=request.user_id,
                    code=request.code,
                    status=request.status,
                    created_at=utc_text(request.created_at),
                    expires_at=utc_text(request.expires_at),
                    body=request.model_dump_json(),
                )
            )
        return PairingAnswer(outcome="created", request=request, gave_way=gave_way)

    async def pairing_requests(
        self, platform: str | None, *, now: datetime
    ) -> list[PairingRequest]:
        """The live pending requests of one platform (None: every one), oldest first."""
        query = (
            select(p.body)
            .where(p.status == "pending", p.expires_at > _utc(now))
            .order_by(p.created_at, p.platform, p.user_id)
        )
        if platform is not None:
            query = query.where(p.platform == platform)
        async with self._read("list the pairing requests") as db:
            return [PairingRequest.model_validate_json(body) for body in await db.scalars(query)]

    async def approve_pairing(
        self, platform: str, code: str, *, now: datetime, admin: bool, by: str
    ) -> Approval | None:
        """Turn the live pending request with `code` into an approval; None if there is none."""
        async with self._begin(f"approve the pairing code of {platform}") as db:
            request = await _live_pending(db, platform, code, now)
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
            await db.execute(
                delete(pairing_requests).where(p.platform == platform, p.user_id == request.user_id)
            )
            values = {
                "platform": platform,
                "user_id": request.user_id,
                "approved_at": _utc(now),
                "body": approval.model_dump_json(),
            }
            statement = upsert(
                self._dialect, approvals, tuple(values), keys=("platform", "user_id")
            )
            await db.execute(statement, values)
        return approval

    async def deny_pairing(
        self, platform: str, code: str, *, now: datetime
    ) -> PairingRequest | None:
        """Mark the live pending request with `code` denied; the request as it was, or None."""
        async with self._begin(f"deny the pairing code of {platform}") as db:
            request = await _live_pending(db, platform, code, now)
            if request is None:
                return None
            denied = request.model_copy(update={"status": "denied"})
            await db.execute(
                update(pairing_requests)
                .where(p.platform == platform, p.user_id == request.user_id)
                .values(status="denied", body=denied.model_dump_json())
            )
        return request

    async def approval(self, platform: str, user_id: str) -> Approval | None:
        """This person's approval on `platform`, or None."""
        async with self._read(f"read the approval of {platform}:{user_id}") as db:
            body = (
                await db.execute(select(a.body).where(a.platform == platform, a.user_id == user_id))
            ).scalar()
            return None if body is None else Approval.model_validate_json(body)

    async def approvals(self, platform: str | None) -> list[Approval]:
        """Every approval of one platform (None: every one), by platform, oldest first."""
        query = select(a.body).order_by(a.platform, a.approved_at, a.user_id)
        if platform is not None:
            query = query.where(a.platform == platform)
        async with self._read("list the approvals") as db:
            return [Approval.model_validate_json(body) for body in await db.scalars(query)]

    async def revoke_approval(self, platform: str, user_id: str) -> bool:
        """Take this person's approval back; whether there was one."""
        async with self._begin(f"revoke the approval of {platform}:{user_id}") as db:
            deleted = await db.execute(
                delete(approvals).where(a.platform == platform, a.user_id == user_id)
            )
            return deleted.rowcount == 1


async def _live_pending(
    db: AsyncConnection, platform: str, code: str, now: datetime
) -> PairingRequest | None:
    """The pending, unexpired request with `code`, locked for the rest of the transaction."""
    body = (
        await db.execute(
            select(p.body)
            .where(
                p.platform == platform,
                p.code == code,
                p.status == "pending",
                p.expires_at > _utc(now),
            )
            .with_for_update()
        )
    ).scalar()
    return None if body is None else PairingRequest.model_validate_json(body)


def _utc(now: datetime) -> str:
    """`now` as stored time text; a naive `now` has no instant and is refused."""
    if now.utcoffset() is None:
        raise StoreError("the access records were given a naive `now`; it must be aware")
    return utc_text(now)
