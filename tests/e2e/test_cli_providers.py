"""`switchboard chat` and `switchboard cost` against the Anthropic and OpenAI API fakes.

The command runs as a subprocess with the real SDKs; the fake runs in the test's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import sys
from pathlib import Path

import pytest

from tests.e2e import processes
from tests.fakes import Error, FakeAnthropic, FakeOpenAI, Text, ToolUse

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
KEY = "test-key"


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    # `extra` goes on last, as `processes.clean_env` would put it; passed on as `**extra`,
    # mypy could not rule out a key naming its `telegram` or `openai` parameter.
    env = processes.clean_env(tmp_path, redis_url=None)
    env.update(extra)
    return env


CALC = ("call_calc_1", "calculator", {"expression": "17*23"})
FINAL = "Seventeen times twenty-three is 391."


async def test_anthropic_overloaded_then_tool_use_then_text(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.script(
        Error(529, "overloaded_error", "Overloaded"),
        ToolUse([CALC], input_tokens=1200, output_tokens=20),
        Text(FINAL, input_tokens=1300, output_tokens=12, cache_read=1000, cache_write=200),
    )
    env = clean_env(
        tmp_path,
        SWITCHBOARD_PROVIDER="anthropic",
        ANTHROPIC_API_KEY=KEY,
        ANTHROPIC_BASE_URL=fake_anthropic.url,
    )

    code, out, err = await processes.run_once(["chat"], env, tmp_path, "what is 17*23?\n")

    assert code == 0, err
    assert out.strip() == FINAL
    assert KEY not in out + err
    assert len(fake_anthropic.requests) == 3
    follow_up = fake_anthropic.requests[2].json["messages"]
    results = [
        block
        for turn in follow_up
        if turn["role"] == "user"
        for block in turn["content"]
        if block["type"] == "tool_result"
    ]
    assert [r["tool_use_id"] for r in results] == ["call_calc_1"]
    assert "391" in results[0]["content"]

    code, out, err = await processes.run_once(["cost"], env, tmp_path)
    assert code == 0, err
    total = next(line for line in out.splitlines() if line.startswith("total"))
    # claude-sonnet-4-6 (the default): $3 in, $15 out, $0.30 cache read, $3.75 write per million.
    expected = (2500 * 3 + 32 * 15 + 1000 * 0.30 + 200 * 3.75) / 1e6
    assert f"${expected:.6f}".rstrip("0") in total
    assert " 2 " in total  # two successful model calls in the ledger


async def test_openai_server_error_then_tool_call_then_text(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script(
        Error(500, "server_error", "The server had an error"),
        ToolUse([CALC]),
        Text(FINAL),
    )
    env = clean_env(
        tmp_path,
        SWITCHBOARD_PROVIDER="openai",
        SWITCHBOARD_MODEL="gpt-4.1-mini",
        OPENAI_API_KEY=KEY,
        OPENAI_BASE_URL=fake_openai.url,
    )

    code, out, err = await processes.run_once(["chat"], env, tmp_path, "what is 17*23?\n")

    assert code == 0, err
    assert out.strip() == FINAL
    follow_up = fake_openai.requests[2].json
    assert follow_up["model"] == "gpt-4.1-mini"
    tool_messages = [m for m in follow_up["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_calc_1"]
    assert "391" in tool_messages[0]["content"]

    code, out, err = await processes.run_once(["cost"], env, tmp_path)
    assert code == 0, err
    assert "terminal:local:" in out
    total = next(line for line in out.splitlines() if line.startswith("total"))
    # gpt-4.1-mini: $0.40 in, $1.60 out per million; the fake reported 2 x 10 in, 5 + 9 out.
    assert "$0.00003" in total  # $0.0000304
    assert " 2 " in total


def _entries_ever_queued(path: Path) -> int:
    """How many entries were ever put on the bus of the queue file at `path`: its table's
    AUTOINCREMENT counter, which acks and takes leave alone."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        row = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'bus_entries'").fetchone()
    return int(row[0]) if row else 0


async def test_a_piped_chat_turn_puts_only_its_answer_on_the_chats_queue_file(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.script(ToolUse([CALC]), Text(FINAL))
    env = clean_env(
        tmp_path,
        SWITCHBOARD_PROVIDER="openai",
        OPENAI_API_KEY=KEY,
        OPENAI_BASE_URL=fake_openai.url,
    )

    code, out, err = await processes.run_once(["chat"], env, tmp_path, "what is 17*23?\n")

    assert code == 0, err
    assert out.strip() == FINAL
    # Typing, the calculator's progress line and the streamed pieces were shown straight
    # (decision 0016); only the final answer went through `chat-queues.db`.
    queued = await asyncio.to_thread(_entries_ever_queued, tmp_path / "data" / "chat-queues.db")
    assert queued == 1


async def test_a_rejected_key_is_one_clear_sentence_naming_the_variable(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    wrong = "sk-ant-wrong-key-0123456789abcdef"
    env = clean_env(
        tmp_path,
        SWITCHBOARD_PROVIDER="anthropic",
        ANTHROPIC_API_KEY=wrong,
        ANTHROPIC_BASE_URL=fake_anthropic.url,
    )

    code, out, err = await processes.run_once(["chat"], env, tmp_path, "hello\n")

    # The apology goes to stderr and the exit code says the turn failed: a script can tell.
    assert code == 1
    assert out.strip() == ""
    assert "setup problem" in err
    assert (
        err.strip().splitlines()[-1]
        == "switchboard: error: 1 turn could not be answered (see above)"
    )
    assert "ANTHROPIC_API_KEY" in err
    assert wrong not in out + err
    assert "Traceback" not in err
    assert len(fake_anthropic.requests) == 1  # auth failures are not retried


async def test_a_profiles_mcp_server_is_offered_and_called(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """`[mcp.calc]` in profile.toml: the server starts with the chat, its tool is offered as
    `calc__add` with its schema, and the model's call reaches it."""
    profile = tmp_path / "profiles" / "withmcp"
    profile.mkdir(parents=True)
    command = [sys.executable, "-m", "tests.fakes.mcp_servers", "stdio"]
    (profile / "profile.toml").write_text(
        f"[mcp.calc]\ncommand = {json.dumps(command)}\ncwd = {json.dumps(str(REPO))}\n"
        'tier = "read_only"\ninclude = ["add"]\n',
        encoding="utf-8",
    )
    fake_openai.script(ToolUse([("call_add_1", "calc__add", {"a": 2, "b": 3})]), Text("Five."))
    env = clean_env(
        tmp_path,
        SWITCHBOARD_PROVIDER="openai",
        OPENAI_API_KEY=KEY,
        OPENAI_BASE_URL=fake_openai.url,
        SWITCHBOARD_PROFILES_DIR=str(tmp_path / "profiles"),
        SWITCHBOARD_PROFILE="withmcp",
    )

    code, out, err = await processes.run_once(["chat"], env, tmp_path, "what is 2 plus 3?\n")

    assert code == 0, err
    assert out.strip() == "Five."
    first, second = (r.json for r in fake_openai.requests)
    offered = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert "calc__echo" not in offered  # include = ["add"]
    assert offered["calc__add"]["parameters"]["required"] == ["a", "b"]
    [result] = [m for m in second["messages"] if m["role"] == "tool"]
    assert result["tool_call_id"] == "call_add_1"
    assert "5" in result["content"]


async def test_a_profiles_prices_price_a_model_the_table_lacks(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    profile = tmp_path / "profiles" / "priced"
    profile.mkdir(parents=True)
    (profile / "profile.toml").write_text(
        '[prices."house-model"]\ninput = 2.0\noutput = 4.0\ncache_read = 0.0\ncache_write = 0.0\n',
        encoding="utf-8",
    )
    fake_openai.script(Text("Priced.", input_tokens=1000, output_tokens=500))
    env = clean_env(
        tmp_path,
        SWITCHBOARD_PROVIDER="openai",
        SWITCHBOARD_MODEL="house-model",
        OPENAI_API_KEY=KEY,
        OPENAI_BASE_URL=fake_openai.url,
        SWITCHBOARD_PROFILES_DIR=str(tmp_path / "profiles"),
        SWITCHBOARD_PROFILE="priced",
    )

    code, out, err = await processes.run_once(["chat"], env, tmp_path, "hello\n")
    assert code == 0, err
    code, out, err = await processes.run_once(["cost"], env, tmp_path)

    assert code == 0, err
    total = next(line for line in out.splitlines() if line.startswith("total"))
    assert "$0.004" in total  # 1,000 x $2 + 500 x $4 per million
    assert "unknown" not in total


async def test_a_profiles_tool_hook_blocks_a_call_and_a_bad_one_stops_the_start(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """`[hooks] before_tool` in profile.toml: the hook is imported at start and blocks the
    calculator, whose follow-up request carries the hook's reason; a path that does not
    import stops `chat` with one line."""
    profile = tmp_path / "profiles" / "hooked"
    profile.mkdir(parents=True)
    toml = profile / "profile.toml"
    toml.write_text(
        '[hooks]\nbefore_tool = "tests.hook_modules.policy:deny_calculator"\n', encoding="utf-8"
    )
    fake_openai.script(ToolUse([CALC]), Text("I cannot calculate right now."))
    env = clean_env(
        tmp_path,
        SWITCHBOARD_PROVIDER="openai",
        OPENAI_API_KEY=KEY,
        OPENAI_BASE_URL=fake_openai.url,
        SWITCHBOARD_PROFILES_DIR=str(tmp_path / "profiles"),
        SWITCHBOARD_PROFILE="hooked",
        PYTHONPATH=str(REPO),
    )

    code, out, err = await processes.run_once(["chat"], env, tmp_path, "what is 17*23?\n")

    assert code == 0, err
    assert out.strip() == "I cannot calculate right now."
    [result] = [m for m in fake_openai.requests[1].json["messages"] if m["role"] == "tool"]
    assert result["content"] == "The calculator is off; work it out in your head."

    toml.write_text('[hooks]\nbefore_tool = "tests.hook_modules.nope:check"\n', encoding="utf-8")
    code, out, err = await processes.run_once(["chat"], env, tmp_path, "hi\n")

    assert code != 0
    assert "Traceback" not in err
    [line] = [line for line in err.splitlines() if line.strip()]
    assert "[hooks] before_tool: 'tests.hook_modules.nope:check': cannot import" in line
