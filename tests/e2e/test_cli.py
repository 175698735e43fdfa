"""The `switchboard` command as a user runs it: a subprocess with piped stdin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SWITCHBOARD = Path(sys.executable).with_name("switchboard")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A clean environment: own data dir, the repo's profiles, no API keys, no .env."""
    keep = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN"))}
    keep = {k: v for k, v in keep.items() if not k.startswith("SWITCHBOARD_")}
    keep.update(
        SWITCHBOARD_DATA_DIR=str(tmp_path / "data"),
        SWITCHBOARD_PROFILES_DIR=str(REPO / "profiles"),
    )
    return keep


def run(
    args: list[str], env: dict[str, str], cwd: Path, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SWITCHBOARD), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        # Below the test's own timeout: an overrun fails here, the process killed and reaped.
        timeout=40,
        check=False,
    )


def test_piped_arithmetic_is_answered_with_the_calculator(
    env: dict[str, str], tmp_path: Path
) -> None:
    result = run(["chat"], env, tmp_path, stdin="what is 17*23?\n")
    assert result.returncode == 0, result.stderr
    assert "391" in result.stdout
    assert "calculator" in result.stdout
    assert "Traceback" not in result.stderr

    listed = run(["sessions", "list"], env, tmp_path)
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()[1:] if line.strip()]
    assert len(rows) == 1
    session_id, key, count = rows[0][0], rows[0][1], rows[0][2]
    assert key.startswith("terminal:local:")
    assert count == "4"  # user, assistant tool call, tool result, final answer

    shown = run(["sessions", "show", session_id], env, tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "tool calculator: 17*23 = 391" in shown.stdout
    assert "→ calculator({'expression': '17*23'})" in shown.stdout


def test_each_piped_line_is_one_turn_answered_in_order(env: dict[str, str], tmp_path: Path) -> None:
    result = run(["chat"], env, tmp_path, stdin="hello there\n\nwhat is 2+2\nbye now\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert (
        out.index("You said: hello there")
        < out.index("The answer is 4")
        < out.index("You said: bye now")
    )
    assert out.count("Demo mode") == 1  # said once per session


def test_session_resumes_by_name_and_by_id(env: dict[str, str], tmp_path: Path) -> None:
    first = run(["chat", "--session", "notes"], env, tmp_path, stdin="remember me\n")
    assert first.returncode == 0, first.stderr
    assert "Demo mode" in first.stdout
    again = run(["chat", "--session", "notes"], env, tmp_path, stdin="second visit\n")
    assert again.returncode == 0, again.stderr
    assert "Demo mode" not in again.stdout  # same session: the notice was already given
    assert "You said: second visit" in again.stdout

    listed = run(["sessions", "list"], env, tmp_path).stdout.splitlines()[1:]
    assert len(listed) == 1
    session_id = listed[0].split()[0]
    by_id = run(["chat", "--session", session_id], env, tmp_path, stdin="third\n")
    assert by_id.returncode == 0, by_id.stderr
    shown = run(["sessions", "show", session_id], env, tmp_path).stdout
    assert "user: third" in shown and "user: remember me" in shown


def test_sessions_commands_take_the_name_chat_session_takes(
    env: dict[str, str], tmp_path: Path
) -> None:
    first = run(["chat", "--session", "alpha"], env, tmp_path, stdin="hello alpha\n")
    assert first.returncode == 0, first.stderr

    shown = run(["sessions", "show", "alpha"], env, tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "terminal:local:alpha" in shown.stdout and "hello alpha" in shown.stdout
    by_key = run(["sessions", "show", "terminal:local:alpha"], env, tmp_path)
    assert by_key.stdout == shown.stdout
    exported = run(["sessions", "export", "alpha"], env, tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["session"]["key"] == "terminal:local:alpha"
    spent = run(["cost", "--session", "alpha"], env, tmp_path)
    assert spent.returncode == 0, spent.stderr
    deleted = run(["sessions", "delete", "--yes", "alpha"], env, tmp_path)
    assert deleted.returncode == 0, deleted.stderr
    assert "(terminal:local:alpha, 2 messages)" in deleted.stdout
    gone = run(["sessions", "show", "alpha"], env, tmp_path)
    assert gone.returncode == 1
    assert "no session 'alpha'" in gone.stderr


def test_new_command_starts_a_fresh_session(env: dict[str, str], tmp_path: Path) -> None:
    result = run(["chat", "--session", "t"], env, tmp_path, stdin="one\n/new\ntwo\n")
    assert result.returncode == 0, result.stderr
    assert "Started a new conversation." in result.stdout
    assert result.stdout.count("Demo mode") == 2  # once in each session
    rows = run(["sessions", "list"], env, tmp_path).stdout.splitlines()[1:]
    assert [r.split()[1] for r in rows] == ["terminal:local:t", "terminal:local:t"]


@pytest.mark.parametrize(
    ("args", "extra_env", "expected"),
    [
        (["chat", "--no-such-flag"], {}, "No such option"),
        (["chat"], {"SWITCHBOARD_PROVIDER": "nope"}, "unknown provider 'nope'"),
        (["chat", "--profile", "missing"], {}, "profile 'missing' not found"),
        (["chat", "--session", "a:b"], {}, "--session"),
        (["sessions", "show", "nope"], {}, "no data folder at "),
        (["frobnicate"], {}, "No such command"),
        (["--log-level", "loud", "chat"], {}, "--log-level"),
    ],
)
def test_bad_input_is_one_clear_line_and_nonzero_exit(
    env: dict[str, str], tmp_path: Path, args: list[str], extra_env: dict[str, str], expected: str
) -> None:
    result = run(args, env | extra_env, tmp_path, stdin="hi\n")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert expected in lines[0]
    assert "Traceback" not in result.stderr


def test_invalid_profile_names_file_and_key(env: dict[str, str], tmp_path: Path) -> None:
    profile = tmp_path / "profiles" / "broken"
    profile.mkdir(parents=True)
    (profile / "profile.toml").write_text("max_stepz = 3\n")
    env = env | {"SWITCHBOARD_PROFILES_DIR": str(tmp_path / "profiles")}
    result = run(["chat", "--profile", "broken"], env, tmp_path, stdin="hi\n")
    assert result.returncode == 1
    assert "profile.toml: max_stepz: Extra inputs are not permitted" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args", [[], ["chat"], ["serve"], ["sessions"], ["sessions", "list"], ["sessions", "show"]]
)
def test_every_command_has_help(env: dict[str, str], tmp_path: Path, args: list[str]) -> None:
    result = run([*args, "--help"], env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Usage: switchboard" in result.stdout


def test_an_explicit_provider_without_its_key_is_an_error(
    env: dict[str, str], tmp_path: Path
) -> None:
    result = run(["chat", "--provider", "anthropic"], env, tmp_path, stdin="hello\n")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.strip() == (
        "switchboard: error: provider anthropic: ANTHROPIC_API_KEY is not set"
    )


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'OPENAI_API_KEY="sk-abc\n', ".env line 1: cannot parse the value of OPENAI_API_KEY"),
        (b"SWITCHBOARD_PROFILE=default\nnot a setting\n", ".env line 2: cannot parse this line"),
        (b"SWITCHBOARD_PROFILE=caf\xe9\n", ".env line 1: not UTF-8 text"),
    ],
)
def test_a_broken_env_file_is_one_line_naming_the_file_and_line(
    env: dict[str, str], tmp_path: Path, content: bytes, expected: str
) -> None:
    (tmp_path / ".env").write_bytes(content)
    result = run(["chat"], env, tmp_path, stdin="hello\n")
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"switchboard: error: {expected}")
    assert "sk-abc" not in result.stderr  # the line may hold a secret: never echoed


@pytest.mark.parametrize("prompt", ["", "   "])
def test_an_empty_schedule_prompt_is_one_line(
    env: dict[str, str], tmp_path: Path, prompt: str
) -> None:
    result = run(
        ["schedule", "add", "--every", "5m", "--prompt", prompt, "--deliver-to", "terminal"],
        env,
        tmp_path,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "switchboard: error: --prompt: the prompt is empty; say what to ask at each run"
    )


def test_the_demo_model_shows_what_the_tools_can_do(env: dict[str, str], tmp_path: Path) -> None:
    first = run(
        ["chat"],
        env,
        tmp_path,
        stdin="hello, what can you do?\nremember that my favourite colour is green\n",
    )
    assert first.returncode == 0, first.stderr
    assert "set ANTHROPIC_API_KEY or OPENAI_API_KEY" in first.stdout
    assert "remember that my favourite colour is green" in first.stdout  # the listed example
    assert "I will remember that: my favourite colour is green" in first.stdout

    # Remembered facts belong to the person, so a new conversation still knows them.
    second = run(["chat"], env, tmp_path, stdin="what is my favourite colour?\n")
    assert second.returncode == 0, second.stderr
    assert "Here is what I remember:" in second.stdout
    assert "my favourite colour is green" in second.stdout


def test_session_resumes_the_conversation_it_names_even_after_new(
    env: dict[str, str], tmp_path: Path
) -> None:
    first = run(["chat", "--session", "myc"], env, tmp_path, stdin="hello one\n/new\nhello two\n")
    assert first.returncode == 0, first.stderr
    assert first.stderr.strip() == (
        "No conversation 'myc' yet: starting a new one by that name "
        "(`switchboard sessions list` shows the stored ones)."
    )
    listed = run(["sessions", "list"], env, tmp_path).stdout.splitlines()[1:]
    rows = {line.split()[0]: int(line.split()[2]) for line in listed if line.strip()}
    assert sorted(rows.values()) == [2, 2]
    older = next(
        session_id
        for session_id in rows
        if "hello one" in run(["sessions", "show", session_id], env, tmp_path).stdout
    )

    again = run(["chat", "--session", older], env, tmp_path, stdin="hello three\n")

    assert again.returncode == 0, again.stderr
    assert again.stderr == ""
    shown = run(["sessions", "show", older], env, tmp_path).stdout
    assert "hello one" in shown and "hello three" in shown
    newer = next(session_id for session_id in rows if session_id != older)
    assert "hello three" not in run(["sessions", "show", newer], env, tmp_path).stdout


def test_an_unknown_command_lists_the_terminals_own_commands_too(
    env: dict[str, str], tmp_path: Path
) -> None:
    result = run(["chat"], env, tmp_path, stdin="/frobnicate\n")

    assert result.returncode == 0, result.stderr
    [line] = result.stdout.strip().splitlines()
    assert line.startswith("Unknown command /frobnicate. Commands: /new (start a fresh")
    assert "/quit leaves" in line


# Two tests of a few commands each rather than one of nine: every command is a process that
# starts Python and imports the CLI, which takes seconds on a busy machine.
def test_session_export_as_json_and_markdown(env: dict[str, str], tmp_path: Path) -> None:
    chat = run(["chat"], env, tmp_path, stdin="remember that my favourite colour is green\n")
    assert chat.returncode == 0, chat.stderr

    session_id = run(["sessions", "list"], env, tmp_path).stdout.splitlines()[1].split()[0]
    exported = run(["sessions", "export", session_id], env, tmp_path)
    assert exported.returncode == 0, exported.stderr
    document = json.loads(exported.stdout)
    assert document["session"]["id"] == session_id
    assert [m["role"] for m in document["messages"]] == ["user", "assistant", "tool", "assistant"]
    transcript = run(["sessions", "export", session_id, "--format", "markdown"], env, tmp_path)
    assert "## tool remember" in transcript.stdout


def test_memory_list_and_forget(env: dict[str, str], tmp_path: Path) -> None:
    chat = run(["chat"], env, tmp_path, stdin="remember that my favourite colour is green\n")
    assert chat.returncode == 0, chat.stderr

    listed = run(["memory", "list", "terminal:local"], env, tmp_path)
    assert listed.returncode == 0, listed.stderr
    [row] = [line for line in listed.stdout.splitlines()[1:] if line.strip()]
    fact_id = row.split()[0]
    assert row.endswith("my favourite colour is green")
    # Where it came from: the model's `remember` call (not consolidation).
    assert "from" in listed.stdout.splitlines()[0]
    assert row.split()[3] == "tool"

    forgotten = run(["memory", "forget", "terminal:local", fact_id], env, tmp_path)
    assert (forgotten.returncode, forgotten.stdout.strip()) == (0, f"Forgot {fact_id}.")
    empty = run(["memory", "list", "terminal:local"], env, tmp_path)
    assert empty.stdout.startswith("Nothing remembered for default:terminal:local")
    again = run(["memory", "forget", "terminal:local", fact_id], env, tmp_path)
    assert again.returncode == 1
    assert again.stderr.strip() == (
        f"switchboard: error: no fact {fact_id!r} for default:terminal:local "
        "(see `switchboard memory list`)"
    )
