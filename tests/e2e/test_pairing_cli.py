"""`switchboard pairing` as an operator runs it: a subprocess on the data directory's store,
which the workers read on every message."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.access import Pairing
from core.backends.sql.store import SqlStore
from core.envelopes import Address, Inbound
from core.scheduling.book import ScheduleBook
from core.scheduling.models import CronCadence

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SWITCHBOARD = Path(sys.executable).with_name("switchboard")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A clean environment: own data dir, the repo's profiles, no keys, no Redis."""
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_TOKEN")) and not k.startswith("SWITCHBOARD_")
    }
    keep.pop("REDIS_URL", None)
    keep.update(
        SWITCHBOARD_DATA_DIR=str(tmp_path / "data"),
        SWITCHBOARD_PROFILES_DIR=str(REPO / "profiles"),
    )
    return keep


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SWITCHBOARD), "pairing", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=30,
        check=False,
    )


async def _ask(path: Path, users: list[str]) -> list[str]:
    """What a worker does for strangers' DMs: file their requests; their codes."""
    store = await SqlStore.open(f"sqlite:///{path}")
    try:
        pairing = Pairing(store)
        for user in users:
            address = Address(platform="telegram", bot="b", chat=user)
            await pairing.request(
                Inbound(address=address, user_id=user, user_name=f"Name{user}", is_direct=True)
            )
        return [r.code for r in await pairing.pending("telegram")]
    finally:
        await store.close()


async def _approvals(path: Path) -> list[tuple[str, bool]]:
    store = await SqlStore.open(f"sqlite:///{path}")
    try:
        return [(a.user_id, a.admin) for a in await Pairing(store).approvals()]
    finally:
        await store.close()


async def _schedules(path: Path, owners: list[str]) -> list[str]:
    """One daily schedule made in a chat by each of `owners`; their ids."""
    store = await SqlStore.open(f"sqlite:///{path}")
    try:
        book = ScheduleBook(store)
        made = [
            await book.create(
                cadence=CronCadence(expression="0 9 * * *"),
                prompt="morning digest",
                deliver_to=Address(platform="telegram", bot="b", chat="-100"),
                owner=owner,
            )
            for owner in owners
        ]
        return [schedule.id for schedule in made]
    finally:
        await store.close()


async def _statuses(path: Path) -> dict[str, str]:
    store = await SqlStore.open(f"sqlite:///{path}")
    try:
        return {s.id: s.status for s in await store.list_schedules()}
    finally:
        await store.close()


def test_list_approve_deny_and_revoke(env: dict[str, str], tmp_path: Path) -> None:
    db = tmp_path / "data" / "switchboard.db"
    first, second = asyncio.run(_ask(db, ["101", "102"]))

    listed = run(["list"], env, tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert first in listed.stdout and "Name101" in listed.stdout
    assert "Nobody approved yet." in listed.stdout

    approved = run(["approve", "Telegram", first.lower(), "--admin"], env, tmp_path)
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout == "Approved telegram user 101 (Name101) as an admin.\n"
    denied = run(["deny", "telegram", second], env, tmp_path)
    assert denied.stdout == "Denied the request of telegram user 102.\n"
    assert asyncio.run(_approvals(db)) == [("101", True)]

    listed = run(["list", "telegram"], env, tmp_path)
    assert "No pending requests." in listed.stdout
    assert "101" in listed.stdout and "yes" in listed.stdout

    mine, theirs = asyncio.run(_schedules(db, ["telegram:101", "telegram:7"]))
    revoked = run(["revoke", "telegram", "101"], env, tmp_path)
    assert revoked.stdout == (
        "Revoked the approval of telegram user 101.\n"
        f"Paused their schedules ({mine}); `switchboard schedule resume ID` resumes one.\n"
    )
    assert asyncio.run(_approvals(db)) == []
    # The revoked person's schedule no longer runs; someone else's does.
    assert asyncio.run(_statuses(db)) == {mine: "paused", theirs: "active"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["approve", "telegram", "ABCDEFGH"], "no pending pairing request on telegram"),
        (["deny", "pager", "ABCDEFGH"], "unknown platform 'pager'"),
        (["revoke", "slack", "U1"], "slack user U1 is not approved"),
    ],
)
def test_mistakes_are_one_line_and_exit_1(
    env: dict[str, str], tmp_path: Path, args: list[str], message: str
) -> None:
    asyncio.run(_ask(tmp_path / "data" / "switchboard.db", []))  # a bot's store, no requests
    done = run(args, env, tmp_path)

    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert message in done.stderr
