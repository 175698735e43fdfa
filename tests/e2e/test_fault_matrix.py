"""The fault matrix's rows no other end-to-end test covers, against the real processes.

Each runs a small load (`tests/e2e/faults.py`; `python -m bench faults` runs the issue's load
and prints the whole matrix) and asserts every message answered exactly once. The other rows
are covered where they were built: a worker SIGKILLed (`test_distributed.py`), Redis
restarted with AOF or empty (`test_redis_faults.py`), `switchboard serve` SIGKILLed
(`test_serve_killed.py`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.faults import Load, run_fault
from tests.fakes import FakeOpenAI, FakeTelegram

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(60)
async def test_no_fault_answers_every_message_once(
    fake_telegram: FakeTelegram, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    load = Load(chats=5, per_chat=2, latency=0.2, fault_after_calls=1)
    row = await run_fault("none", load, tmp_path, fake_telegram, fake_openai)
    print(row)
    assert (row.sent, row.answered, row.duplicated, row.lost) == (10, 10, 0, 0), row
    assert row.notes == [], row.notes


@pytest.mark.timeout(60)
async def test_a_gateway_stopped_mid_load_and_replaced_answers_every_message_once(
    fake_telegram: FakeTelegram, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    # Stopped while answers are being streamed: it finishes what it holds and lets go of the
    # poller lease; the new one reads on from Telegram's offset and shows the rest.
    load = Load(chats=6, per_chat=2, latency=0.3, fault_after_calls=4)
    row = await run_fault("gateway-term", load, tmp_path, fake_telegram, fake_openai)
    print(row)
    assert (row.sent, row.answered, row.duplicated, row.lost) == (12, 12, 0, 0), row


@pytest.mark.timeout(90)
async def test_a_gateway_killed_mid_load_and_replaced_answers_every_message_once(
    fake_telegram: FakeTelegram, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    # Killed holding deliveries: the new gateway waits out the poller lease (15 s) and the
    # deliveries' bus lease (30 s), then shows each answer once, guided by the reply records.
    load = Load(chats=4, per_chat=2, latency=0.3, fault_after_calls=3)
    row = await run_fault("gateway-kill", load, tmp_path, fake_telegram, fake_openai)
    print(row)
    assert (row.sent, row.answered, row.duplicated, row.lost) == (8, 8, 0, 0), row
