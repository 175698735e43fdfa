"""Slack settings: what `switchboard serve` builds from the environment, and what it refuses."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from bots.platforms import REGISTERED, command_registry
from channels.slack.adapter import SlackAdapter, SlackSettings
from channels.streaming import IncrementalRender, ReplyStreams
from core.errors import ConfigError
from core.store.replies import MemoryReplyRecords

TOKEN = "xoxb-1111111111-2222222222-FakeBotTokenForTestsOnly"
MENU = command_registry().menu()


def test_the_adapter_needs_a_signing_secret_or_an_app_token() -> None:
    with pytest.raises(ConfigError, match=r"SLACK_SIGNING_SECRET.*SLACK_APP_TOKEN"):
        SlackAdapter(SlackSettings(bot_token=SecretStr(TOKEN)), menu=MENU, replies=_replies())


def test_serve_runs_slack_when_the_bot_token_is_set() -> None:
    assert REGISTERED.configured_adapters({}, None, MENU, _replies()) == []
    env = {
        "SLACK_BOT_TOKEN": TOKEN,
        "SLACK_SIGNING_SECRET": "s3cret",
        "SLACK_PORT": "3456",
        "SLACK_API_URL": "http://127.0.0.1:9/api",
    }
    [adapter] = REGISTERED.configured_adapters(env, None, MENU, _replies())
    assert isinstance(adapter, SlackAdapter)
    assert adapter.platform == "slack"
    assert (adapter.settings.port, adapter.settings.app_token) == (3456, None)
    assert adapter.settings.api_url == "http://127.0.0.1:9/api"


def test_the_slack_gateway_names_what_is_missing() -> None:
    with pytest.raises(ConfigError, match="SLACK_BOT_TOKEN"):
        REGISTERED.adapter_for("slack", {}, None, MENU, _replies())
    with pytest.raises(ConfigError, match="SLACK_SIGNING_SECRET"):
        REGISTERED.adapter_for("slack", {"SLACK_BOT_TOKEN": TOKEN}, None, MENU, _replies())
    with pytest.raises(ConfigError, match="SLACK_PORT"):
        REGISTERED.adapter_for(
            "slack",
            {"SLACK_BOT_TOKEN": TOKEN, "SLACK_APP_TOKEN": "x", "SLACK_PORT": "no"},
            None,
            MENU,
            _replies(),
        )
    socket_mode = REGISTERED.adapter_for(
        "slack", {"SLACK_BOT_TOKEN": TOKEN, "SLACK_APP_TOKEN": "xapp-1"}, None, MENU, _replies()
    )
    assert isinstance(socket_mode, SlackAdapter)


def _replies() -> ReplyStreams:
    return ReplyStreams(MemoryReplyRecords(), IncrementalRender())
