"""`switchboard doctor` (issue 17, point 7): reachability against the protocol fakes and a
real redis-server, the posture audit over temporary folders, and the command's exit codes."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bots.cli import main
from bots.doctor import Finding, diagnose, posture
from bots.profiles import load_profile
from bots.settings import load_settings
from core.backends.sql.store import head_revision, upgrade_database
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.fixtures import TEST_API_KEY
from tests.fakes.llm_script import Text
from tests.fakes.search_api import FakeSearch, Hit
from tests.fakes.slack_api import FakeSlack
from tests.fakes.telegram_api import FakeTelegram
from tests.fixtures.sqlite_store_v12 import DB
from tests.redis_server import RedisServer

SAFE_PROFILE = """
admins = ["telegram:7"]
[budgets]
per_user_daily = 1.0
[allow.telegram]
users = ["7"]
[allow.slack]
users = ["U7"]
[allow.discord]
users = ["1"]
"""


def _setup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, profile: str, env: dict[str, str]
) -> Path:
    """A profile folder and a private data folder under `tmp_path`, and the environment."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "profiles" / "bot"
    folder.mkdir(parents=True)
    (folder / "profile.toml").write_text(profile, encoding="utf-8")
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    for name in list(os.environ):
        if name.startswith(
            ("TELEGRAM_", "SLACK_", "DISCORD_", "ANTHROPIC_", "OPENAI_", "BRAVE_", "SEARXNG_")
        ):
            monkeypatch.delenv(name)
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("SWITCHBOARD_PROVIDER", raising=False)
    monkeypatch.delenv("SWITCHBOARD_MODEL", raising=False)
    for name, value in {
        "SWITCHBOARD_DATA_DIR": str(data),
        "SWITCHBOARD_PROFILES_DIR": str(tmp_path / "profiles"),
        "SWITCHBOARD_PROFILE": "bot",
        **env,
    }.items():
        monkeypatch.setenv(name, value)
    return folder


@pytest.fixture
def persistent_redis(tmp_path: Path) -> Iterator[str]:
    """A redis-server of its own that appends every write to a file (appendonly yes)."""
    server = RedisServer(tmp_path / "redis", persistent=True)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


async def _diagnose() -> list[Finding]:
    settings = load_settings()
    profile = load_profile(settings.profiles_dir, settings.profile)
    return await diagnose(settings, profile, settings.profiles_dir / settings.profile)


def _by_area(findings: list[Finding]) -> dict[str, list[Finding]]:
    grouped: dict[str, list[Finding]] = {}
    for finding in findings:
        grouped.setdefault(finding.area, []).append(finding)
    return grouped


async def test_a_sound_setup_reaches_everything_and_has_nothing_critical(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fake_anthropic: FakeAnthropic,
    fake_telegram: FakeTelegram,
    fake_slack: FakeSlack,
    fake_discord: FakeDiscord,
    persistent_redis: str,
    postgres_url: str,
) -> None:
    fake_anthropic.script(Text("OK"))
    _setup(
        tmp_path,
        monkeypatch,
        SAFE_PROFILE,
        {
            "ANTHROPIC_API_KEY": TEST_API_KEY,
            "ANTHROPIC_BASE_URL": fake_anthropic.url,
            "TELEGRAM_BOT_TOKEN": fake_telegram.token,
            "TELEGRAM_API_URL": fake_telegram.url,
            "SLACK_BOT_TOKEN": fake_slack.bot_token,
            "SLACK_APP_TOKEN": fake_slack.app_token,  # Socket Mode: no port to open
            "SLACK_API_URL": fake_slack.api_url,
            "DISCORD_BOT_TOKEN": fake_discord.token,
            "DISCORD_API_URL": fake_discord.api_url,
            "REDIS_URL": persistent_redis,
            "DATABASE_URL": postgres_url,
        },
    )
    await _upgraded(postgres_url)

    findings = await _diagnose()

    areas = _by_area(findings)
    assert [f.severity for f in findings if f.severity != "ok"] == [], findings
    assert areas["provider"][0].text.startswith("anthropic answers with")
    assert "the token works" in areas["telegram"][0].text
    assert "the token works" in areas["slack"][0].text
    assert "the token works" in areas["discord"][0].text
    assert areas["redis"][0].text == "PING answered; it persists (appendonly yes)"
    assert areas["database"][0].text == f"connected; schema revision {head_revision()}"
    assert "private to its owner" in areas["data"][0].text
    # One token asked for, with the configured key: a cheap request.
    [sent] = fake_anthropic.requests
    assert sent.json["max_tokens"] == 1


async def test_refused_keys_open_doors_and_leaked_secrets_are_critical_with_their_fix(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fake_anthropic: FakeAnthropic,
    fake_telegram: FakeTelegram,
    fake_slack: FakeSlack,
    fake_discord: FakeDiscord,
) -> None:
    leaked = "sk-ant-api03-" + "Q7x9Lm2Pz8Rt4Wv6Ny1Kb3Hc5Jd0Fg"
    folder = _setup(
        tmp_path,
        monkeypatch,
        '[modes]\ntelegram = "full"\n[access.telegram]\ndm_policy = "open"\n',
        {
            "ANTHROPIC_API_KEY": "wrong-key",
            "ANTHROPIC_BASE_URL": fake_anthropic.url,
            "TELEGRAM_BOT_TOKEN": "123456:" + "A" * 35,
            "TELEGRAM_API_URL": fake_telegram.url,
            "TELEGRAM_WEBHOOK_URL": "https://bot.example.org/telegram",
            "SLACK_BOT_TOKEN": "xoxb-not-the-right-one",
            "SLACK_API_URL": fake_slack.api_url,
            "DISCORD_BOT_TOKEN": "not-a-token",
            "DISCORD_API_URL": fake_discord.api_url,
        },
    )
    (folder / "SOUL.md").write_text(f"You are kind.\nMy key: {leaked}\n", encoding="utf-8")
    (tmp_path / "data").chmod(0o755)
    env_file = tmp_path / ".env"
    env_file.write_text("SWITCHBOARD_LOG_LEVEL=warning\n", encoding="utf-8")
    env_file.chmod(0o644)

    findings = await _diagnose()

    critical = {(f.area, f.text.split(" (")[0]) for f in findings if f.severity == "critical"}
    assert ("provider", "anthropic did not answer a one-token request") in critical
    assert ("telegram", "getMe failed") in critical
    assert ("telegram", "anyone can DM the bot and use its tools") in critical
    assert any(t.startswith("webhook mode without TELEGRAM_WEBHOOK_SECRET") for _, t in critical)
    assert ("slack", "auth.test failed") in critical
    assert any(t.startswith("Events API without SLACK_SIGNING_SECRET") for _, t in critical)
    assert ("discord", "DISCORD_BOT_TOKEN does not have a bot token's shape") in critical
    assert ("profile", f"{folder / 'SOUL.md'}:2 holds a secret-shaped value") in critical
    assert ("data", f"{tmp_path / 'data'} is open to every user of this machine") in critical
    assert ("env", ".env") in critical
    warnings = {f.area for f in findings if f.severity == "warning"}
    assert {"admins", "budgets"} <= warnings
    assert all(f.fix for f in findings if f.severity != "ok")
    # No line repeats a secret it found.
    report = "\n".join(f.line() for f in findings)
    assert leaked not in report and "A" * 35 not in report and "wrong-key" not in report


def _doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    try:
        main(["doctor", *args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().out


def test_the_command_exits_1_on_a_critical_finding_and_0_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _setup(tmp_path, monkeypatch, SAFE_PROFILE, {})

    code, out = _doctor(capsys, "--offline")
    assert code == 0, out
    assert out.splitlines()[-1] == "0 critical, 0 warning(s)."

    (tmp_path / "data").chmod(0o705)
    code, out = _doctor(capsys, "--offline")
    assert code == 1
    assert out.splitlines()[0].startswith("critical  data: ")
    assert f"Fix: chmod 700 {tmp_path / 'data'}" in out

    (folder / "profile.toml").write_text("max_steps = 'many'\n", encoding="utf-8")
    code, out = _doctor(capsys, "--offline")
    assert code == 1
    assert out.splitlines()[0].startswith("critical  settings: ")
    assert "max_steps" in out and "Traceback" not in out


def test_an_unknown_provider_is_critical_even_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _setup(tmp_path, monkeypatch, SAFE_PROFILE, {"SWITCHBOARD_PROVIDER": "nope"})

    code, out = _doctor(capsys, "--offline")

    assert code == 1, out
    assert out.splitlines()[0] == (
        "critical  provider: SWITCHBOARD_PROVIDER: unknown provider 'nope' "
        "Fix: set it to one of anthropic, openai, demo, or unset it"
    )


def test_listener_tokens_serve_would_refuse_are_critical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _setup(
        tmp_path,
        monkeypatch,
        SAFE_PROFILE,
        {
            "SWITCHBOARD_WEB_TOKEN": "abcde",
            "SWITCHBOARD_HOOKS_PORT": "8766",
            "SWITCHBOARD_HOOKS_TOKEN": "h",
            "SWITCHBOARD_METRICS_PORT": "9100",
            "SWITCHBOARD_METRICS_TOKEN": "m",
        },
    )

    code, out = _doctor(capsys, "--offline")

    assert code == 1, out
    critical = [line for line in out.splitlines() if line.startswith("critical")]
    assert len(critical) == 3, out
    assert critical[0].startswith("critical  web: SWITCHBOARD_WEB_TOKEN: ")
    assert "at least 16" in critical[0]  # the words `serve` refuses it with
    assert critical[1].startswith(
        "critical  hooks: SWITCHBOARD_HOOKS_TOKEN must be set, at least 24"
    )
    assert critical[2].startswith(
        "critical  metrics: SWITCHBOARD_METRICS_TOKEN must be set, at least"
    )
    assert all("Fix: correct it: `serve` refuses to start with it" in line for line in critical)


def test_listeners_on_every_interface_are_warned_about(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = "t" * 32
    _setup(
        tmp_path,
        monkeypatch,
        SAFE_PROFILE,
        {
            "SWITCHBOARD_WEB_HOST": "0.0.0.0",
            "SWITCHBOARD_WEB_TOKEN": good,
            "SWITCHBOARD_HOOKS_PORT": "8766",
            "SWITCHBOARD_HOOKS_HOST": "0.0.0.0",
            "SWITCHBOARD_HOOKS_TOKEN": good,
            "SWITCHBOARD_METRICS_PORT": "9100",
            "SWITCHBOARD_METRICS_HOST": "::",
            "SWITCHBOARD_METRICS_TOKEN": good,
            "SLACK_BOT_TOKEN": "xoxb-" + "1" * 20,
            "SLACK_SIGNING_SECRET": "s" * 32,
            "TELEGRAM_BOT_TOKEN": "123456:" + "A" * 35,
            "TELEGRAM_WEBHOOK_URL": "https://bot.example.org/telegram",
            "TELEGRAM_WEBHOOK_SECRET": "w" * 32,
        },
    )
    settings = load_settings()
    profile = load_profile(settings.profiles_dir, settings.profile)

    findings = posture(settings, profile, None)

    exposed = {f.area: f for f in findings if "reachable from other machines" in f.text}
    assert sorted(exposed) == ["hooks", "metrics", "slack", "telegram", "web"]
    assert all(f.severity == "warning" and f.fix for f in exposed.values())
    assert exposed["web"].text.startswith("the web page listens on 0.0.0.0:8765")
    assert exposed["hooks"].text.startswith("the hooks listener listens on 0.0.0.0:8766")
    assert exposed["metrics"].text.startswith("the operations endpoints listens on :::9100")
    assert exposed["slack"].text.startswith("the Slack Events API endpoint listens on 0.0.0.0:3000")
    assert exposed["telegram"].text.startswith("the Telegram webhook listens on 0.0.0.0:8443")
    assert "Socket Mode" in exposed["slack"].fix
    assert not [f for f in findings if f.severity == "critical"], findings


async def _upgraded(url: str) -> None:
    _, after = await upgrade_database(url)
    assert after.current == head_revision()


async def test_the_database_is_reached_and_its_schema_revision_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _setup(tmp_path, monkeypatch, SAFE_PROFILE, {})
    database = tmp_path / "data" / "switchboard.db"

    [missing] = [f for f in await _diagnose() if f.area == "database"]
    assert not database.exists()  # the doctor made nothing
    shutil.copyfile(DB, database)  # a file of the old embedded store
    [old] = [f for f in await _diagnose() if f.area == "database"]
    await _upgraded(f"sqlite:///{database}")
    [current] = [f for f in await _diagnose() if f.area == "database"]

    assert (missing.severity, missing.text) == (
        "ok",
        f"{database} is not created yet; the first start makes it",
    )
    assert old.severity == "warning"
    assert "old embedded store" in old.text
    assert "switchboard db upgrade" in old.fix
    assert (current.severity, current.text) == (
        "ok",
        f"connected; schema revision {head_revision()}",
    )


async def test_a_database_that_is_not_there_is_critical_and_its_password_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = "postgresql://someone:hunter2secret@127.0.0.1:1/records"
    _setup(tmp_path, monkeypatch, SAFE_PROFILE, {"DATABASE_URL": url})

    [found] = [f for f in await _diagnose() if f.area == "database"]

    assert found.severity == "critical"
    assert "cannot reach the SQL store" in found.text
    assert "hunter2secret" not in found.text


@pytest.mark.parametrize(
    ("database", "said"),
    [
        (None, "no DATABASE_URL: the records"),
        ("sqlite:///shared.db", "works only when every process runs on one machine"),
    ],
)
def test_redis_without_postgresql_is_warned_about(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database: str | None, said: str
) -> None:
    env = {"REDIS_URL": "redis://127.0.0.1:1"}
    if database is not None:
        env["DATABASE_URL"] = database
    _setup(tmp_path, monkeypatch, SAFE_PROFILE, env)
    settings = load_settings()

    [found] = [
        f
        for f in posture(settings, load_profile(settings.profiles_dir, "bot"), None)
        if f.area == "database"
    ]

    assert found.severity == "warning"
    assert said in found.text


async def test_a_redis_that_does_not_persist_is_warned_about(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_url: str
) -> None:
    _setup(tmp_path, monkeypatch, SAFE_PROFILE, {"REDIS_URL": redis_url})  # save "", no AOF

    [redis] = [f for f in await _diagnose() if f.area == "redis"]

    assert redis.severity == "warning"
    assert redis.text.startswith("Redis does not persist (appendonly no, save ''): a restart")
    assert "appendonly yes" in redis.fix


async def test_a_redis_that_refuses_config_is_said_to_be_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_url: str
) -> None:
    import redis.asyncio as aioredis

    admin = aioredis.Redis.from_url(redis_url)
    # A managed server's user: every command but CONFIG.
    await admin.acl_setuser(
        "tenant", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-config"]
    )
    try:
        limited = redis_url.replace("redis://", "redis://tenant:pw@")
        _setup(tmp_path, monkeypatch, SAFE_PROFILE, {"REDIS_URL": limited})

        [found] = [f for f in await _diagnose() if f.area == "redis"]
    finally:
        await admin.acl_deluser("tenant")
        await admin.aclose()

    assert found.severity == "warning"
    assert found.text.startswith("PING answered, but could not tell whether Redis persists")
    assert "pw" not in found.text.replace("persists", "")


async def test_the_search_api_is_asked_once_when_configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_search: FakeSearch
) -> None:
    fake_search.hits = [Hit("Switchboard", "https://example.org/", "A chat bot.")]
    _setup(tmp_path, monkeypatch, SAFE_PROFILE, {"SEARXNG_URL": fake_search.url})

    [found] = [f for f in await _diagnose() if f.area == "web_search"]

    assert (found.severity, found.text) == ("ok", "SearXNG answers searches")
    [asked] = fake_search.requests
    assert asked.params == {"q": "switchboard", "format": "json"}


async def test_a_refused_search_key_is_a_warning_naming_the_variable_not_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_search: FakeSearch
) -> None:
    wrong = "BSAwrongsearchkey0123"
    env = {"BRAVE_API_KEY": wrong, "BRAVE_BASE_URL": fake_search.brave_url}
    _setup(tmp_path, monkeypatch, SAFE_PROFILE, env)

    [found] = [f for f in await _diagnose() if f.area == "web_search"]

    assert found.severity == "warning"
    assert found.text.startswith("Brave Search refused the search (HTTP 422)")
    assert "BRAVE_API_KEY" in found.fix
    assert wrong not in found.line()


async def test_without_a_search_api_there_is_no_search_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _setup(tmp_path, monkeypatch, SAFE_PROFILE, {})
    assert [f for f in await _diagnose() if f.area == "web_search"] == []


def test_a_tool_hook_that_does_not_load_is_critical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = SAFE_PROFILE + '\n[hooks]\nbefore_tool = "tests.hook_modules.policy:two_arguments"\n'
    _setup(tmp_path, monkeypatch, profile, {})

    code, out = _doctor(capsys, "--offline")

    assert code == 1, out
    first = out.splitlines()[0]
    assert first.startswith("critical  settings: ")
    assert "[hooks] before_tool: 'tests.hook_modules.policy:two_arguments' must take one" in first
    assert "Traceback" not in out


def test_an_enabled_browser_that_cannot_run_is_named_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    browser = '\n[browser]\nenabled = true\nexecutable_path = "/nowhere/chromium"\n'
    _setup(tmp_path, monkeypatch, SAFE_PROFILE + browser + "allow_loopback = true\n", {})
    settings = load_settings()

    found = [
        f
        for f in posture(settings, load_profile(settings.profiles_dir, "bot"), None)
        if f.area == "browser"
    ]

    assert [f.severity for f in found] == ["warning", "warning"]
    assert [f.text for f in found] == [
        "[browser] is enabled but the browser tool is not offered: "
        "no chromium at /nowhere/chromium (apt-get install chromium)",
        "[browser] allow_loopback = true: pages reach this machine's own services",
    ]
