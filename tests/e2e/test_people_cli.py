"""`switchboard people` as an operator runs it, on what a served Telegram bot stored.

A person writes to the bot in a DM (the model remembers a fact about them) and in a group
beside someone else; the bot is stopped; then `people export` shows it all, `people forget`
erases it, and afterwards `people export` shows nothing of them, no file of the data folder
holds their words, and `cost --by day` prints what it printed before.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.backends.sql.store import SqlStore, sqlite_url
from core.facts import MemoryFact
from tests.e2e.processes import open_profiles
from tests.e2e.served import serve
from tests.fakes import FakeOpenAI, Text
from tests.fakes.llm_script import ToolUse
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.telegram_helpers import reply_containing

pytestmark = pytest.mark.e2e

SWITCHBOARD = Path(sys.executable).with_name("switchboard")
ANN = 555
BOB = 7
GROUP = -100123
START_PATIENCE = 20.0
STOP_PATIENCE = 5.0
# Words only Ann wrote (or the bot repeated to her): none may be left after she is forgotten.
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
WORDS = ("zanzibarflamingo", "xylophonewombat", "quixoticpelican")


@pytest.fixture
def env(fake_telegram: FakeTelegram, fake_openai: FakeOpenAI, tmp_path: Path) -> dict[str, str]:
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_TOKEN", "_BASE_URL"))
        and not k.startswith(("SWITCHBOARD_", "TELEGRAM_"))
    }
    keep.update(
        SWITCHBOARD_DATA_DIR=str(tmp_path / "data"),
        SWITCHBOARD_PROFILES_DIR=str(open_profiles(tmp_path)),
        TELEGRAM_BOT_TOKEN=fake_telegram.token,
        TELEGRAM_API_URL=fake_telegram.url,
        SWITCHBOARD_PROVIDER="openai",
        SWITCHBOARD_MODEL="gpt-4o-mini",
        OPENAI_API_KEY=fake_openai.api_key,
        OPENAI_BASE_URL=fake_openai.url,
    )
    return keep


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SWITCHBOARD), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=40,
        check=False,
    )


async def test_a_forgotten_person_leaves_no_words_and_the_same_totals(
    fake_telegram: FakeTelegram, fake_openai: FakeOpenAI, env: dict[str, str], tmp_path: Path
) -> None:
    fake = fake_telegram
    fake_openai.script(
        ToolUse([("call-1", "remember", {"text": "Keeps a xylophonewombat"})]),
        Text("Noted, your zanzibarflamingo."),
        Text("Hello Bob."),
        Text("About quixoticpelican: yes."),
        Text("Bye Bob."),
    )
    async with serve(env, tmp_path) as served:
        await served.until_ready(fake.wait_idle_poll(timeout=START_PATIENCE))
        fake.private_text(ANN, "my zanzibarflamingo keeps a xylophonewombat")
        await reply_containing(fake, ANN, "Noted, your zanzibarflamingo.")
        fake.group_text(GROUP, "hello bot", user_id=BOB, mention=True)
        await reply_containing(fake, GROUP, "Hello Bob.")
        fake.group_text(GROUP, "what of the quixoticpelican", user_id=ANN, mention=True)
        await reply_containing(fake, GROUP, "About quixoticpelican: yes.")
        # The chat's next answer: the one to Ann is done with (acked off the outbound queue;
        # what still waits for delivery is not a record `people forget` erases).
        fake.group_text(GROUP, "bye bot", user_id=BOB, mention=True)
        await reply_containing(fake, GROUP, "Bye Bob.")
        assert await served.terminate(STOP_PATIENCE) == 0
    assert "Traceback" not in served.log, served.log

    days = run(["cost", "--by", "day"], env, tmp_path)
    assert days.returncode == 0, days.stderr
    exported = run(["people", "export", f"telegram:{ANN}"], env, tmp_path)
    assert exported.returncode == 0, exported.stderr
    data = json.loads(exported.stdout)
    assert len(data["direct_conversations"]) == 1
    [group] = data["group_messages"]
    assert "what of the quixoticpelican" in json.dumps(group)
    assert "hello bot" not in json.dumps(group)  # Bob's
    assert [fact["text"] for fact in data["facts"]] == ["Keeps a xylophonewombat"]
    assert len(data["costs"]) == 3  # two calls in the DM, one in the group
    before = _files_holding(tmp_path / "data")
    assert before, "the words were never stored: nothing to erase"

    unconfirmed = run(["people", "forget", f"telegram:{ANN}"], env, tmp_path)
    assert unconfirmed.returncode == 1
    assert unconfirmed.stderr.strip().count("\n") == 0
    assert "--yes" in unconfirmed.stderr
    malformed = run(["people", "forget", "telegram", "--yes"], env, tmp_path)
    assert malformed.returncode == 2
    assert malformed.stderr.strip().count("\n") == 0
    assert "PLATFORM:USER_ID" in malformed.stderr

    forgot = run(["people", "forget", f"telegram:{ANN}", "--yes"], env, tmp_path)
    assert forgot.returncode == 0, forgot.stderr
    assert "1 conversation(s) deleted, 2 group message(s) replaced" in forgot.stdout

    after = run(["people", "export", f"telegram:{ANN}"], env, tmp_path)
    assert after.returncode == 0, after.stderr
    emptied = json.loads(after.stdout)
    assert all(not value for name, value in emptied.items() if name != "person")
    assert _files_holding(tmp_path / "data") == []
    assert run(["cost", "--by", "day"], env, tmp_path).stdout == days.stdout
    bob = json.loads(run(["people", "export", f"telegram:{BOB}"], env, tmp_path).stdout)
    assert "hello bot" in json.dumps(bob["group_messages"])


def _files_holding(folder: Path) -> list[str]:
    """The files under `folder` (the database, its write-ahead log...) whose raw bytes hold
    any of Ann's words."""
    return sorted(
        str(path.relative_to(folder))
        for path in folder.rglob("*")
        if path.is_file() and any(word.encode() in path.read_bytes() for word in WORDS)
    )


def test_forget_at_a_terminal_asks_and_a_no_erases_nothing(tmp_path: Path) -> None:
    """At a terminal (a pseudo-terminal here) `people forget` without --yes asks; "n" keeps
    everything."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    env["SWITCHBOARD_DATA_DIR"] = str(tmp_path / "data")
    asyncio.run(_a_fact_of_ann(tmp_path / "data" / "switchboard.db"))
    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen(
            [str(SWITCHBOARD), "people", "forget", f"telegram:{ANN}"],
            stdin=terminal,
            stdout=terminal,
            stderr=subprocess.PIPE,
            env=env,
            cwd=tmp_path,
        )
        os.write(controller, b"n\n")
        try:
            _, stderr = process.communicate(timeout=40)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        shown = _read_all(controller)
    finally:
        os.close(controller)
        os.close(terminal)
    assert process.returncode == 0, stderr
    # The question goes where the interpreter's line reading puts a prompt (stderr, with
    # readline); the answer's echo and the outcome to the terminal.
    assert f"Erase everything kept about telegram:{ANN}?" in shown + stderr.decode(), stderr
    assert "Nothing erased." in shown
    exported = run(["people", "export", f"telegram:{ANN}"], env, tmp_path)
    assert [f["text"] for f in json.loads(exported.stdout)["facts"]] == ["Keeps a xylophonewombat"]


async def _a_fact_of_ann(path: Path) -> None:
    store = await SqlStore.open(sqlite_url(path))
    try:
        fact = MemoryFact.new(f"default:telegram:{ANN}", "Keeps a xylophonewombat", now=T0)
        await store.remember_fact(fact)
    finally:
        await store.close()


def _read_all(fd: int) -> str:
    """What the process wrote to the terminal (it has exited: nothing more will come)."""
    chunks = []
    while select.select([fd], [], [], 0)[0]:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")
