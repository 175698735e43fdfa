"""Slack as the wiring sees it: settings from the environment and the profile, hint, mode,
addresses."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from channels.base import ChannelAdapter, ChannelSetup, ChannelSpec, settings_from_env
from channels.slack.checks import CHECKS
from channels.slack.hint import PROMPT_HINT
from channels.uploads import UploadLimits
from core.addresses import AddressGrammar
from core.envelopes import Address

__all__ = ["SPEC", "SlackOptions"]

# Seconds between edits of a streamed reply: the platforms rate-limit edits of one message.
_STREAM_INTERVAL = 1.0

_ENV = {
    "bot_token": "SLACK_BOT_TOKEN",
    "signing_secret": "SLACK_SIGNING_SECRET",
    "app_token": "SLACK_APP_TOKEN",
    "api_url": "SLACK_API_URL",
    "port": "SLACK_PORT",
}


class SlackOptions(BaseModel):
    """The profile's `[channels.slack]` table."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Catch-up after downtime: at start, answer what was sent to the bot while it was away,
    # from this many hours back at most, and at most this many messages per conversation.
    # 0 turns catch-up off.
    catch_up_hours: float = Field(default=24.0, ge=0, le=24 * 14)
    catch_up_messages: int = Field(default=100, ge=0, le=999)
    # Status reactions on the person's message: taken, then answered or failed.
    reactions: bool = True


# Slack takes files of up to 1 GB: the bus's cap (`MAX_ATTACHMENT_BYTES`) is the real limit.
_UPLOADS = UploadLimits(file_bytes=1024 * 1024 * 1024)


def _build(setup: ChannelSetup) -> ChannelAdapter:
    # The adapter refuses a configuration with neither a signing secret nor an app token.
    from channels.slack.adapter import SlackAdapter, SlackSettings

    options = setup.options if isinstance(setup.options, SlackOptions) else SlackOptions()
    settings = settings_from_env(
        SlackSettings,
        setup.env,
        _ENV,
        catch_up_hours=options.catch_up_hours,
        catch_up_messages=options.catch_up_messages,
        reactions=options.reactions,
    )
    return SlackAdapter(
        settings,
        menu=setup.menu,
        replies=setup.replies,
        seen=setup.seen,
        documents=setup.documents,
        uploads=_UPLOADS,
    )


def _admin_dm(user_id: str) -> Address:
    # chat.postMessage to a user id opens the app's DM with that person.
    return Address(platform="slack", chat=user_id)


SPEC = ChannelSpec(
    name="slack",
    prompt_hint=PROMPT_HINT,
    default_mode="safe-chat",
    # Channel ids (C…, G…, D…), not names: a name can be renamed and is not what the API takes.
    # A user id (U…, W…) is one too: chat.postMessage to it opens the app's DM with that person.
    address=AddressGrammar(
        platform="slack",
        usage="slack:<channel or user id>",
        chat=r"[CDGUW][A-Z0-9]+",
        example="slack:C0123ABCD",
    ),
    build=_build,
    env=tuple(_ENV.values()),
    secret_env=("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN"),
    secret_patterns=(r"xox[abposr]-[A-Za-z0-9\-]{10,}", r"xapp-[A-Za-z0-9\-]{10,}"),
    options=SlackOptions,
    uploads=_UPLOADS,
    # Every replica may serve: Events API requests and Socket Mode connections share the load.
    stream_interval=_STREAM_INTERVAL,
    # `progress` renews the assistant status Slack drops after two minutes.
    shows_progress=True,
    # A stopped answer keeps its text, its message edited to say it was stopped.
    edits_in_place=True,
    # Slack answers a message starting with `/` itself unless the app registered that slash
    # command (deploy/slack-app-manifest.yml does): `!approve CODE` always reaches the bot.
    command_prefix="!",
    checks=CHECKS,
    admin_dm=_admin_dm,
)
