"""The web page's settings from the environment (`bots/web.py`, `channels/web/spec.py`)."""

from __future__ import annotations

import pytest

from bots.web import event_topics, web_settings
from channels.web import WebSettings
from core.bus.names import EVENTS
from core.errors import ConfigError


def test_defaults_listen_on_loopback_port_8765_with_a_generated_token() -> None:
    settings = web_settings({})
    assert settings == WebSettings(host="127.0.0.1", port=8765, token=None)
    assert settings is not None and settings.loopback


def test_off_turns_the_page_off() -> None:
    assert web_settings({"SWITCHBOARD_WEB_PORT": "off"}) is None
    assert web_settings({"SWITCHBOARD_WEB_PORT": "OFF"}) is None


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("10.0.0.2", False),
        ("example.org", False),
    ],
)
def test_which_hosts_are_loopback(host: str, loopback: bool) -> None:
    settings = web_settings({"SWITCHBOARD_WEB_HOST": host})
    assert settings is not None and settings.loopback is loopback


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SWITCHBOARD_WEB_PORT": "70000"}, "SWITCHBOARD_WEB_PORT: Input should be less than"),
        (
            {"SWITCHBOARD_WEB_TOKEN": "short"},
            "SWITCHBOARD_WEB_TOKEN: must be at least 16 characters long (this one has 5)",
        ),
    ],
)
def test_bad_values_name_their_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        web_settings(env)
    assert str(raised.value).startswith(message)


def test_the_live_events_follow_the_lifecycle_topic() -> None:
    assert event_topics()[0] == EVENTS
