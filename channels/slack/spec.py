"""Slack as the wiring sees it: settings from the environment, hint, mode, addresses."""

from __future__ import annotations

from channels.base import ChannelAdapter, ChannelSetup, ChannelSpec, settings_from_env
from channels.slack.hint import PROMPT_HINT
from core.addresses import AddressGrammar

__all__ = ["SPEC"]

# Seconds between edits of a streamed reply: the platforms rate-limit edits of one message.
_STREAM_INTERVAL = 1.0

_ENV = {
    "bot_token": "SLACK_BOT_TOKEN",
    "signing_secret": "SLACK_SIGNING_SECRET",
    "app_token": "SLACK_APP_TOKEN",
    "api_url": "SLACK_API_URL",
    "port": "SLACK_PORT",
}


def _build(setup: ChannelSetup) -> ChannelAdapter:
    # The adapter refuses a configuration with neither a signing secret nor an app token.
    from channels.slack.adapter import SlackAdapter, SlackSettings

    return SlackAdapter(
        settings_from_env(SlackSettings, setup.env, _ENV),
        menu=setup.menu,
        replies=setup.replies,
    )


SPEC = ChannelSpec(
    name="slack",
    prompt_hint=PROMPT_HINT,
    default_mode="safe-chat",
    address=AddressGrammar(platform="slack", usage="slack:<channel id>", chat=r"[A-Za-z0-9]+"),
    build=_build,
    env=tuple(_ENV.values()),
    secret_env=("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN"),
    secret_patterns=(r"xox[abposr]-[A-Za-z0-9\-]{10,}", r"xapp-[A-Za-z0-9\-]{10,}"),
    # Every replica may serve: Events API requests and Socket Mode connections share the load.
    stream_interval=_STREAM_INTERVAL,
    # `progress` renews the assistant status Slack drops after two minutes.
    shows_progress=True,
)
