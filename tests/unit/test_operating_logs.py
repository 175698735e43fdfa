"""What an operator sees on stderr from the operations work: the start-up line at the default
level, and no slack-bolt warning about a token we pass on purpose as a client."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from bots.commands.where import describe_coordination, describe_store, log_startup
from bots.logs import configure_logging
from bots.settings import Settings
from core.redact import Redactor

NAMES = ("core", "channels", "bots", "switchboard", "switchboard.startup", "slack_bolt")


@pytest.fixture
def stderr() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    levels = {name: logging.getLogger(name).level for name in NAMES}
    output = io.StringIO()
    yield output
    root.handlers[:], level = saved
    root.setLevel(level)
    for name, saved_level in levels.items():
        logging.getLogger(name).setLevel(saved_level)


def _configure(levels: str, output: io.StringIO) -> None:
    configure_logging(levels, Redactor())
    for handler in logging.getLogger().handlers:
        assert isinstance(handler, logging.StreamHandler)
        handler.setStream(output)


def _settings(tmp_path: Path, **extra: str) -> Settings:
    return Settings.model_validate({"SWITCHBOARD_DATA_DIR": str(tmp_path), **extra})


def test_the_startup_line_shows_at_the_default_level(stderr: io.StringIO, tmp_path: Path) -> None:
    _configure("warning", stderr)
    logging.getLogger("switchboard").info("not shown at warning")

    log_startup(_settings(tmp_path), "serve", ["telegram", "slack"])

    (line,) = stderr.getvalue().splitlines()
    assert line.endswith(
        f"switchboard serve started; serving telegram, slack; store {tmp_path}/switchboard.db"
    )


def test_asking_for_errors_only_hides_the_startup_line(stderr: io.StringIO, tmp_path: Path) -> None:
    _configure("error", stderr)
    log_startup(_settings(tmp_path), "worker")
    assert stderr.getvalue() == ""


def test_redis_is_described_without_its_password(tmp_path: Path) -> None:
    settings = _settings(tmp_path, REDIS_URL="redis://:hunter2@cache.internal:6380/0")
    assert describe_coordination(settings) == "Redis at cache.internal:6380 (bot default)"
    # The records stay in the data folder's file unless DATABASE_URL names a database.
    assert describe_store(settings) == str(settings.database_path)


@pytest.mark.parametrize(
    ("url", "described"),
    [
        (
            "redis+cluster://:hunter2@10.0.0.1:7000,10.0.0.2:7000,10.0.0.3:7000",
            "Redis Cluster at 10.0.0.1:7000 and 2 more (bot default)",
        ),
        (
            "redis+sentinel://:hunter2@sentinel.internal:26379/mymaster",
            "Redis via Sentinel at sentinel.internal:26379 (bot default)",
        ),
    ],
)
def test_a_cluster_or_a_sentinel_is_described_by_its_first_node(
    tmp_path: Path, url: str, described: str
) -> None:
    # A cluster URL lists several host:port pairs, which urlsplit cannot read as one port.
    assert describe_coordination(_settings(tmp_path, REDIS_URL=url)) == described


async def test_slack_bolt_says_nothing_about_the_token_we_hand_it_as_a_client(
    stderr: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slack_bolt.async_app import AsyncApp
    from slack_bolt.authorization import AuthorizeResult
    from slack_sdk.web.async_client import AsyncWebClient

    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-not-a-real-token")
    _configure("warning", stderr)

    async def authorize(**_: object) -> AuthorizeResult:
        raise AssertionError("not called")

    # How our adapter builds it: a client and an authorize function, the token in the env.
    AsyncApp(client=AsyncWebClient(token="xoxb-x"), authorize=authorize, signing_secret="s")
    logging.getLogger("slack_bolt.AsyncApp").warning("another warning still shows")

    assert stderr.getvalue().count("\n") == 1, stderr.getvalue()
    assert "another warning still shows" in stderr.getvalue()
