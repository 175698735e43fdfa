"""`switchboard recover` as an operator runs it after a crash, against the real SQLite store.

The crash state is written the way a process killed mid-tool-round leaves it: the user message
(its `source` the inbound's dedupe key), the assistant's tool call without a result, and the
turn's `running` checkpoint. The demo provider finishes the turn from there.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.backends.sql.store import SqlStore
from core.checkpoints import Checkpoint
from core.envelopes import Address, Inbound
from core.messages import Message, ToolCall
from tests.e2e.test_cli import env, run

pytestmark = pytest.mark.e2e

__all__ = ["env"]

STARTED = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


async def _crash_state(database: Path, text: str) -> tuple[str, str]:
    """The store a turn killed while its calculator ran leaves; its run key and session id."""
    inbound = Inbound(
        address=Address(platform="terminal", bot="local", chat="crash"),
        user_id="local",
        text=text,
        is_direct=True,
        received_at=STARTED,
    )
    store = await SqlStore.open(f"sqlite:///{database}")
    try:
        session = await store.current_session(inbound.session_key)
        await store.append_message(session.id, Message.user(text, source=inbound.dedupe_key))
        call = ToolCall(id="c1", name="calculator", arguments={"expression": "17*23"})
        await store.append_message(session.id, Message.assistant("", [call]))
        await store.save_checkpoint(
            Checkpoint(
                run_key=inbound.dedupe_key,
                session_id=session.id,
                inbound=inbound,
                tool_rounds=0,
                started_at=STARTED,
                updated_at=STARTED,
            )
        )
    finally:
        await store.close()
    return inbound.dedupe_key, session.id


def crash_state(env: dict[str, str], text: str = "what is 17*23?") -> tuple[str, str]:
    database = Path(env["SWITCHBOARD_DATA_DIR"]) / "switchboard.db"
    database.parent.mkdir(parents=True, exist_ok=True)
    return asyncio.run(_crash_state(database, text))


def test_recover_lists_a_turn_cut_off_mid_tool_round_and_resume_completes_it(
    env: dict[str, str], tmp_path: Path
) -> None:
    run_key, session_id = crash_state(env)

    listed = run(["recover"], env, tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert run_key in listed.stdout
    assert "terminal:local:crash" in listed.stdout
    assert "what is 17*23?" in listed.stdout

    resumed = run(["recover", "--resume", run_key, "--provider", "demo"], env, tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "The calculator tool reported a problem" in resumed.stdout
    assert "Traceback" not in resumed.stderr

    again = run(["recover"], env, tmp_path)
    assert again.returncode == 0, again.stderr
    assert "No unfinished turns." in again.stdout

    shown = run(["sessions", "show", session_id], env, tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.count("what is 17*23?") == 1
    assert "→ calculator({'expression': '17*23'})" in shown.stdout
    assert "4 messages" in shown.stdout
    assert "[3] " in shown.stdout and " tool calculator (error): " in shown.stdout
    assert "[4] " in shown.stdout and "The calculator tool reported a problem" in shown.stdout


def test_resume_of_an_unknown_turn_is_one_line_and_exit_1(
    env: dict[str, str], tmp_path: Path
) -> None:
    crash_state(env)  # a store with another unfinished turn
    result = run(["recover", "--resume", "terminal:local:crash:nope"], env, tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0
    assert "no turn" in result.stderr


def test_abandon_all_marks_every_unfinished_turn_and_says_nobody_was_told(
    env: dict[str, str], tmp_path: Path
) -> None:
    run_key, _ = crash_state(env)

    result = run(["recover", "--abandon-all"], env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Abandoned 1 unfinished turn." in result.stdout
    assert "not told" in result.stdout

    listed = run(["recover"], env, tmp_path)
    assert "No unfinished turns." in listed.stdout
    resumed = run(["recover", "--resume", run_key], env, tmp_path)
    assert resumed.returncode == 1
    assert "abandoned" in resumed.stderr
