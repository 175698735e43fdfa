"""The access-records contract (`AccessRecords`): pairing requests and approvals.

Run against every implementation by the `store` fixture of `tests/contract/conftest.py`.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from core.errors import StoreError
from core.store import AccessRecords, PairingRequest

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def request(
    user: str, code: str, *, platform: str = "telegram", at: datetime = T0
) -> PairingRequest:
    return PairingRequest(
        platform=platform,
        user_id=user,
        user_name=f"name of {user}",
        code=code,
        created_at=at,
        expires_at=at + HOUR,
    )


async def test_a_request_is_filed_once_per_person(store: AccessRecords) -> None:
    first = await store.request_pairing(request("u1", "ABCD2345"), now=T0, max_pending=3)
    again = await store.request_pairing(
        request("u1", "WXYZ6789"), now=T0 + timedelta(minutes=5), max_pending=3
    )

    assert first.outcome == "created"
    assert first.request == request("u1", "ABCD2345")
    # The same person asking again gets their live request back: no second code.
    assert again.outcome == "exists"
    assert again.request == request("u1", "ABCD2345")
    assert await store.pairing_requests("telegram", now=T0) == [request("u1", "ABCD2345")]


async def test_pending_requests_are_limited_per_platform_and_the_oldest_gives_way(
    store: AccessRecords,
) -> None:
    for n, code in enumerate(("AAAAAAA2", "AAAAAAA3", "AAAAAAA4")):
        at = T0 + timedelta(seconds=n)
        answer = await store.request_pairing(request(f"u{n}", code, at=at), now=at, max_pending=3)
        assert answer.outcome == "created"
        assert answer.gave_way == []
    # u1 is denied: a denied request holds no pending place and never gives way.
    await store.deny_pairing("telegram", "AAAAAAA3", now=T0)
    later = T0 + timedelta(seconds=5)
    fourth = await store.request_pairing(
        request("u8", "AAAAAAA6", at=later), now=later, max_pending=3
    )
    assert (fourth.outcome, fourth.gave_way) == ("created", [])

    latest = T0 + timedelta(seconds=9)
    fifth = await store.request_pairing(
        request("u9", "AAAAAAA5", at=latest), now=latest, max_pending=3
    )
    elsewhere = await store.request_pairing(
        request("u9", "AAAAAAA5", platform="slack", at=latest), now=latest, max_pending=3
    )

    assert fifth.outcome == "created"
    assert fifth.request == request("u9", "AAAAAAA5", at=latest)
    assert fifth.gave_way == [request("u0", "AAAAAAA2")]
    assert elsewhere.outcome == "created"
    assert [r.user_id for r in await store.pairing_requests("telegram", now=latest)] == [
        "u2",
        "u8",
        "u9",
    ]
    # The code of the one that gave way is free again, and approves nobody.
    assert (
        await store.approve_pairing("telegram", "AAAAAAA2", now=latest, admin=False, by="cli")
        is None
    )
    reused = await store.request_pairing(
        request("u7", "AAAAAAA2", at=latest), now=latest, max_pending=4
    )
    assert reused.outcome == "created"
    # The denied request stays until it expires.
    again = await store.request_pairing(request("u1", "AAAAAAA7"), now=latest, max_pending=4)
    assert again.outcome == "exists"
    # Oldest first; equal times by platform.
    assert [r.platform for r in await store.pairing_requests(None, now=latest)] == [
        "telegram",
        "telegram",
        "slack",
        "telegram",
        "telegram",
    ]


async def test_a_code_in_use_is_refused(store: AccessRecords) -> None:
    await store.request_pairing(request("u1", "ABCD2345"), now=T0, max_pending=3)

    taken = await store.request_pairing(request("u2", "ABCD2345"), now=T0, max_pending=3)

    assert taken.outcome == "code_taken"
    assert [r.user_id for r in await store.pairing_requests(None, now=T0)] == ["u1"]


async def test_expired_requests_are_gone_and_free_their_slot(store: AccessRecords) -> None:
    await store.request_pairing(request("u1", "ABCD2345"), now=T0, max_pending=1)
    later = T0 + HOUR

    assert await store.pairing_requests("telegram", now=later) == []
    assert (
        await store.approve_pairing("telegram", "ABCD2345", now=later, admin=False, by="cli")
        is None
    )
    renewed = await store.request_pairing(
        request("u1", "ABCD2345", at=later), now=later, max_pending=1
    )
    assert renewed.outcome == "created"
    assert renewed.request is not None and renewed.request.created_at == later


async def test_approving_turns_a_request_into_an_approval(store: AccessRecords) -> None:
    await store.request_pairing(request("u1", "ABCD2345"), now=T0, max_pending=3)
    # A name the store must carry as it is (quotes, a slash, non-ASCII).
    await store.request_pairing(
        request("u2", "WXYZ6789").model_copy(update={"user_name": 'Zoë "Z" / 北京'}),
        now=T0,
        max_pending=3,
    )
    at = T0 + timedelta(minutes=1)

    assert (
        await store.approve_pairing("telegram", "WRONG234", now=at, admin=False, by="cli") is None
    )
    assert await store.approve_pairing("slack", "ABCD2345", now=at, admin=False, by="cli") is None
    approval = await store.approve_pairing("telegram", "ABCD2345", now=at, admin=True, by="cli")

    assert approval is not None
    assert (approval.platform, approval.user_id, approval.user_name) == (
        "telegram",
        "u1",
        "name of u1",
    )
    assert (approval.admin, approval.approved_by, approval.approved_at) == (True, "cli", at)
    assert await store.approval("telegram", "u1") == approval
    assert await store.approval("slack", "u1") is None
    assert [r.user_id for r in await store.pairing_requests(None, now=at)] == ["u2"]
    other = await store.approve_pairing("telegram", "WXYZ6789", now=at, admin=False, by="x")
    assert other is not None and other.user_name == 'Zoë "Z" / 北京'
    assert other.admin is False
    # A code works once.
    assert (
        await store.approve_pairing("telegram", "ABCD2345", now=at, admin=False, by="cli") is None
    )


async def test_two_approvals_of_one_code_give_one(store: AccessRecords) -> None:
    await store.request_pairing(request("u1", "ABCD2345"), now=T0, max_pending=3)

    results = await asyncio.gather(
        *(
            store.approve_pairing("telegram", "ABCD2345", now=T0, admin=False, by=f"b{n}")
            for n in range(4)
        )
    )

    assert len([r for r in results if r is not None]) == 1


async def test_a_denied_request_stays_until_it_expires(store: AccessRecords) -> None:
    await store.request_pairing(request("u1", "ABCD2345"), now=T0, max_pending=1)

    denied = await store.deny_pairing("telegram", "ABCD2345", now=T0)

    assert denied == request("u1", "ABCD2345")
    assert await store.deny_pairing("telegram", "ABCD2345", now=T0) is None
    assert await store.pairing_requests("telegram", now=T0) == []
    assert (
        await store.approve_pairing("telegram", "ABCD2345", now=T0, admin=False, by="cli") is None
    )
    # The person cannot ask again until it expires; a denied request takes no pending slot.
    again = await store.request_pairing(request("u1", "WXYZ6789"), now=T0, max_pending=1)
    assert again.outcome == "exists"
    assert again.request is not None and again.request.status == "denied"
    other = await store.request_pairing(request("u2", "WXYZ6789"), now=T0, max_pending=1)
    assert other.outcome == "created"


async def test_approvals_are_listed_and_revoked(store: AccessRecords) -> None:
    for n, (platform, user) in enumerate((("telegram", "u2"), ("slack", "U1"), ("telegram", "u1"))):
        code = f"ABCDEFG{n + 2}"
        at = T0 + timedelta(minutes=n)
        await store.request_pairing(
            request(user, code, platform=platform, at=at), now=at, max_pending=3
        )
        await store.approve_pairing(platform, code, now=at, admin=False, by="cli")

    assert [(a.platform, a.user_id) for a in await store.approvals(None)] == [
        ("slack", "U1"),
        ("telegram", "u2"),
        ("telegram", "u1"),
    ]
    assert [a.user_id for a in await store.approvals("telegram")] == ["u2", "u1"]

    assert await store.revoke_approval("telegram", "u2") is True
    assert await store.revoke_approval("telegram", "u2") is False
    assert await store.approval("telegram", "u2") is None
    assert [a.user_id for a in await store.approvals("telegram")] == ["u1"]


async def test_a_naive_now_is_refused(store: AccessRecords) -> None:
    naive = datetime(2026, 3, 1, 12, 0)  # noqa: DTZ001

    with pytest.raises(StoreError):
        await store.request_pairing(request("u1", "ABCD2345"), now=naive, max_pending=3)
    with pytest.raises(StoreError):
        await store.pairing_requests(None, now=naive)
