"""Slack settings: what `switchboard serve` builds from the environment, and what it refuses."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from bots.channels import adapter_for, configured_adapters
from bots.settings import Settings
from channels.slack.adapter import SlackAdapter, SlackSettings
from channels.streaming import IncrementalRender, ReplyStreams
from core.errors import ConfigError
from core.replies import MemoryReplyRecords

TOKEN = "xoxb-1111111111-2222222222-FakeBotTokenForTestsOnly"


def settings(**values: object) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def test_the_adapter_needs_a_signing_secret_or_an_app_token() -> None:
    with pytest.raises(ConfigError, match=r"SLACK_SIGNING_SECRET.*SLACK_APP_TOKEN"):
        SlackAdapter(replies=_replies(), settings=SlackSettings(bot_token=SecretStr(TOKEN)))


def test_serve_runs_slack_when_the_bot_token_is_set() -> None:
    assert configured_adapters(settings(), replies=_replies()) == []
    [adapter] = configured_adapters(
        settings(
            slack_bot_token=SecretStr(TOKEN),
            slack_signing_secret=SecretStr("s3cret"),
            slack_port=3456,
            slack_api_url="http://127.0.0.1:9/api",
        ),
        replies=_replies(),
    )
    assert isinstance(adapter, SlackAdapter)
    assert adapter.platform == "slack"
    assert (adapter.settings.port, adapter.settings.app_token) == (3456, None)
    assert adapter.settings.api_url == "http://127.0.0.1:9/api"


def test_the_slack_gateway_names_what_is_missing() -> None:
    with pytest.raises(ConfigError, match="SLACK_BOT_TOKEN"):
        adapter_for("slack", settings(), replies=_replies())
    with pytest.raises(ConfigError, match="SLACK_SIGNING_SECRET"):
        adapter_for("slack", settings(slack_bot_token=SecretStr(TOKEN)), replies=_replies())
    socket_mode = adapter_for(
        "slack",
        settings(slack_bot_token=SecretStr(TOKEN), slack_app_token=SecretStr("xapp-1")),
        replies=_replies(),
    )
    assert isinstance(socket_mode, SlackAdapter)


def _replies() -> ReplyStreams:
    return ReplyStreams(MemoryReplyRecords(), IncrementalRender())
