"""`switchboard notify`: the real CLI queues onto the embedded deployment's SQLite bus."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bots.cli import main
from core.backends.sql.bus import SqliteBus
from core.backends.sql.mailboxes import SqliteMailboxes
from core.bus.base import BusPayload
from core.bus.names import outbound_queue
from core.envelopes import Address, Outbound
from tests.workers import take_waiting


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SWITCHBOARD_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("REDIS_URL", raising=False)
    return tmp_path / "data"


async def _switchboard(*args: str) -> int:
    def run() -> int:
        try:
            main(list(args))
        except SystemExit as exc:
            return int(exc.code or 0)
        return 0

    return await asyncio.to_thread(run)


async def _taken(path: Path, queue: str) -> list[BusPayload]:
    bus = await SqliteBus.open(path)
    try:
        found: list[BusPayload] = []
        while (delivery := await bus.receive(queue, consumer="t", timeout=0)) is not None:
            found.append(delivery.envelope)
            await delivery.ack()
        return found
    finally:
        await bus.close()


async def test_notify_queues_a_text_and_a_prompt(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await _switchboard("notify", "telegram:-100123", "Backup done.", "--key", "b1") == 0
    assert await _switchboard("notify", "telegram:-100123", "Backup done.", "--key", "b1") == 0
    assert (
        await _switchboard(
            "notify", "slack:C0123", "--prompt", "Summarize CI", "--policy", "conditional"
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "Queued the notification for telegram:-100123" in out
    assert "session notify:cli" in out

    path = data_dir / "switchboard.db"
    [text] = await _taken(path, outbound_queue("telegram"))
    assert isinstance(text, Outbound)
    assert (text.address, text.text) == (
        Address(platform="telegram", chat="-100123"),
        "Backup done.",
    )
    assert text.source is not None and text.source.kind == "cli"
    # The prompt waits in its session's mailbox in the data file, for a `serve`'s worker.
    mailboxes = await SqliteMailboxes.open(path)
    try:
        [prompt] = await take_waiting(mailboxes)
    finally:
        await mailboxes.aclose()
    assert (prompt.origin, prompt.session_key, prompt.notify) == (
        "external",
        "notify:cli",
        "conditional",
    )
    assert prompt.text == "Summarize CI"


async def test_notify_refuses_bad_arguments_in_one_line(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await _switchboard("notify", "telegram:abc", "hi") == 2
    assert await _switchboard("notify", "telegram:1", "hi", "--prompt", "also") == 2
    assert await _switchboard("notify", "telegram:1") == 2
    assert await _switchboard("notify", "terminal", "nobody would see this") == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 4
    assert "terminal cannot be reached from outside" in errors[3]
    assert "is not a telegram address" in errors[0]
    assert "either TEXT or --prompt" in errors[1]
