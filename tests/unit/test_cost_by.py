"""`switchboard cost --by user|chat|day|model` (issue 17, point 5), in process over a SQLite
store in a temporary data folder."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bots.cli import main
from core.backends.sql.store import SqlStore
from core.messages import Usage
from core.store.ledger import CostEntry


async def _fill(path: Path) -> None:
    store = await SqlStore.open(f"sqlite:///{path}")
    try:
        session = await store.create_session("telegram:b:42")
        for user, cost, day in (("telegram:7", 0.5, 1), ("telegram:8", 1.25, 2), (None, 0.25, 2)):
            await store.record_cost(
                CostEntry(
                    session_id=session.id,
                    run_id="r",
                    provider="anthropic",
                    model="claude-haiku-4-5",
                    usage=Usage(input_tokens=1000, output_tokens=10),
                    cost_usd=cost,
                    at=datetime(2025, 3, day, 9, tzinfo=UTC),
                    user=user,
                    chat=None if user is None else "telegram:b:42",
                )
            )
    finally:
        await store.close()


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_cost_by_each_grouping(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SWITCHBOARD_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("REDIS_URL", raising=False)
    asyncio.run(_fill(tmp_path / "data" / "switchboard.db"))

    code, out, _ = _run(["cost", "--by", "user"], capsys)
    lines = [line.split() for line in out.splitlines()]
    assert code == 0
    assert lines[0][0] == "person"
    assert [line[0] for line in lines[1:5]] == ["telegram:8", "telegram:7", "(none)", "total"]
    assert lines[1][-1] == "$1.25" and lines[4][-1] == "$2.00"

    code, out, _ = _run(["cost", "--by", "day"], capsys)
    assert [line.split()[0] for line in out.splitlines()[1:3]] == ["2025-03-02", "2025-03-01"]

    code, out, _ = _run(["cost", "--by", "model"], capsys)
    assert "claude-haiku-4-5" in out and "3,000" in out

    code, _, err = _run(["cost", "--by", "planet"], capsys)
    assert code == 2 and "Invalid value for '--by'" in err
    code, _, err = _run(["cost", "--by", "chat", "--session", "abc"], capsys)
    assert code == 2 and "--by and --session do not go together" in err
