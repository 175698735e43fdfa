"""`switchboard prompt`: the assembled system prompt, run as a user runs it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bots.app import PROMPT_HINTS
from bots.profiles import load_profile
from core.clock import utc_now
from core.modes import DISCORD, FULL, NO_TOOLS, SAFE_CHAT

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SWITCHBOARD = Path(sys.executable).with_name("switchboard")
FOOTER = re.compile(r"Today is [A-Z][a-z]+day \d\d [A-Z][a-z]+ \d{4} \(UTC\)\. Session: (.+)\.")


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


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SWITCHBOARD), "prompt", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
        check=False,
    )


def split_footer(text: str) -> tuple[str, str]:
    """The prompt without its footer line, and the session id the footer names."""
    head, _, footer = text.rstrip("\n").rpartition("\n\n")
    match = FOOTER.fullmatch(footer)
    assert match, footer
    return head, match.group(1)


def test_telegram_shows_the_telegram_hint_and_the_safe_chat_rules(
    env: dict[str, str], tmp_path: Path
) -> None:
    result = run(["--channel", "telegram"], env, tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("You are Switchboard")
    assert f"## Capabilities\n{SAFE_CHAT.prompt_rules}\n\n" in out
    assert f"## Formatting\n{PROMPT_HINTS['telegram']}\n\n" in out
    assert FULL.prompt_rules not in out
    assert "- summarize — " in out  # the default profile's example skill
    assert split_footer(out)[1] == "<session>"


def test_the_output_is_what_a_turn_on_that_channel_sends(
    env: dict[str, str], tmp_path: Path
) -> None:
    profile = load_profile(REPO / "profiles", "default")

    def expected() -> str:
        return profile.system_prompt().build(
            mode=SAFE_CHAT, platform_hint=PROMPT_HINTS["slack"], session_id="S-42", now=utc_now()
        )

    # Built before and after: the date may turn over while the command runs.
    before = expected()
    result = run(["--channel", "slack", "--session", "S-42"], env, tmp_path)
    after = expected()
    assert result.returncode == 0, result.stderr
    assert result.stdout in {before + "\n", after + "\n"}


def test_terminal_shows_the_full_mode(env: dict[str, str], tmp_path: Path) -> None:
    result = run(["--channel", "terminal"], env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"## Capabilities\n{FULL.prompt_rules}\n\n" in result.stdout
    assert f"## Formatting\n{PROMPT_HINTS['terminal']}\n\n" in result.stdout
    assert SAFE_CHAT.prompt_rules not in result.stdout


def test_discord_uses_its_own_mode(env: dict[str, str], tmp_path: Path) -> None:
    result = run(["--channel", "discord"], env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"## Capabilities\n{DISCORD.prompt_rules}\n\n" in result.stdout


def test_an_unknown_channel_is_one_line_and_exit_2(env: dict[str, str], tmp_path: Path) -> None:
    result = run(["--channel", "irc"], env, tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "'irc' is not one of" in lines[0]
    assert "telegram" in lines[0]


def test_a_profile_with_every_part_and_a_chat_mode(env: dict[str, str], tmp_path: Path) -> None:
    profiles = tmp_path / "profiles"
    bot = profiles / "helper"
    (bot / "skills" / "sql").mkdir(parents=True)
    (bot / "profile.toml").write_text(
        '[chat_modes]\n"telegram:123:-100500" = "no-tools"\n', encoding="utf-8"
    )
    (bot / "SOUL.md").write_text("I am Soul.\n", encoding="utf-8")
    (bot / "SYSTEM.md").write_text("You are a SQL helper.\n", encoding="utf-8")
    (bot / "MEMORY.md").write_text("The database is Postgres 16.\n", encoding="utf-8")
    (bot / "USER.md").write_text("Ana is a data analyst.\n", encoding="utf-8")
    (bot / "skills" / "sql" / "SKILL.md").write_text(
        "---\nname: sql\ndescription: Writing SQL.\n---\nUse CTEs.\n", encoding="utf-8"
    )
    env = {**env, "SWITCHBOARD_PROFILES_DIR": str(profiles)}

    group = run(
        ["--profile", "helper", "--channel", "telegram", "--chat", "-100500"], env, tmp_path
    )
    assert group.returncode == 0, group.stderr
    head, _ = split_footer(group.stdout)
    assert head == (
        "You are a SQL helper.\n\n"
        f"## Capabilities\n{NO_TOOLS.prompt_rules}\n\n"
        f"## Formatting\n{PROMPT_HINTS['telegram']}\n\n"
        "## Memory\nThe database is Postgres 16.\n\n"
        "## About the user\nAna is a data analyst."
    )  # no skills index: no tool in no-tools can read them

    other = run(["--profile", "helper", "--channel", "telegram", "--chat", "42"], env, tmp_path)
    assert other.returncode == 0, other.stderr
    assert f"## Capabilities\n{SAFE_CHAT.prompt_rules}\n\n" in other.stdout
    assert "## Skills\n" in other.stdout
    assert "- sql — Writing SQL." in other.stdout


def test_an_invalid_profile_is_one_line_naming_file_and_key(
    env: dict[str, str], tmp_path: Path
) -> None:
    profiles = tmp_path / "profiles"
    (profiles / "broken").mkdir(parents=True)
    (profiles / "broken" / "profile.toml").write_text("max_steps = 0\n", encoding="utf-8")
    env = {**env, "SWITCHBOARD_PROFILES_DIR": str(profiles)}
    result = run(["--profile", "broken"], env, tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"{profiles / 'broken' / 'profile.toml'}: max_steps: " in lines[0]
    assert "Traceback" not in result.stderr


def test_run_from_another_folder_the_shipped_default_profile_is_used(
    env: dict[str, str], tmp_path: Path
) -> None:
    """No profiles/ folder where the command runs: the default persona and skills still apply."""
    elsewhere = {k: v for k, v in env.items() if k != "SWITCHBOARD_PROFILES_DIR"}
    assert not (tmp_path / "profiles").exists()

    result = run([], elsewhere, tmp_path)

    assert result.returncode == 0, result.stderr
    shipped = (REPO / "profiles" / "default" / "SOUL.md").read_text(encoding="utf-8").strip()
    assert result.stdout.startswith(shipped.splitlines()[0])
    assert "- summarize — " in result.stdout


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        (
            'admins = ["bob"]\n',
            "admins: 'bob' is not <platform>:<user id> (platforms: ",
        ),
        ('[allow.whatsapp]\nusers = ["1"]\n', "allow.whatsapp: unknown platform (known: "),
        ('[modes]\ntelegram = "godmode"\n', "modes.telegram: unknown mode 'godmode' (known: "),
        ('provider = "gemini"\n', "provider: unknown provider 'gemini' (known: anthropic, "),
        ('fallback = ["gemini"]\n', "fallback: unknown provider 'gemini'"),
    ],
)
def test_names_a_profile_gets_wrong_are_one_line_naming_the_file(
    env: dict[str, str], tmp_path: Path, toml: str, message: str
) -> None:
    profiles = tmp_path / "profiles"
    (profiles / "typo").mkdir(parents=True)
    (profiles / "typo" / "profile.toml").write_text(toml, encoding="utf-8")
    env = {**env, "SWITCHBOARD_PROFILES_DIR": str(profiles)}

    result = run(["--profile", "typo"], env, tmp_path)

    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(
        f"switchboard: error: {profiles / 'typo' / 'profile.toml'}: {message}"
    ), lines[0]
