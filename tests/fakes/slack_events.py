"""The event builders of the Slack fake: what Slack sends an app, in its wire format.

`EventBuilders` is mixed into `FakeSlack`: each builder returns a whole `event_callback` body
with a fresh `event_id`, ready for `post_event` (signed HTTP) or `send_socket_event`. Message
timestamps count up from the fake's start, so later messages have later `ts`; a message may be
back-dated (`sent_at`). Every person's message built is also kept in its channel's `history`
(thread replies aside, as `conversations.history` leaves them out), and a thread reply in its
thread's `replies` (its parent in the history then counts it: `reply_count`, `latest_reply`).
"""

from __future__ import annotations

import itertools
import time
import uuid
from typing import Any

TEAM_ID = "T0TEAM"
BOT_USER_ID = "U0BOT"
BOT_ID = "B0BOT"
APP_ID = "A0APP"
ALICE = "U0ALICE"
BOB = "U0BOB"
DM_CHANNEL = "D0ALICE"
GENERAL = "C0GENERAL"


class EventBuilders:
    """Builders of incoming events for the workspace `team_id`, whose bot is `BOT_USER_ID`."""

    def __init__(self, team_id: str = TEAM_ID) -> None:
        self.team_id = team_id
        self._sequence = itertools.count(1)
        self._epoch = int(time.time())
        self.history: dict[str, list[dict[str, Any]]] = {}  # channel -> messages, as sent
        # (channel, thread ts) -> the thread's replies, as sent (the parent not among them)
        self.replies: dict[tuple[str, str], list[dict[str, Any]]] = {}

    def next_ts(self, sent_at: float | None = None) -> str:
        """A fresh message timestamp, later than every one before it (or at `sent_at`)."""
        seconds = self._epoch if sent_at is None else int(sent_at)
        return f"{seconds}.{next(self._sequence):06d}"

    def event_callback(self, event: dict[str, Any]) -> dict[str, Any]:
        """`event` wrapped as Slack delivers it, with a fresh `event_id`."""
        number = next(self._sequence)
        return {
            "token": "fake-verification-token",
            "team_id": self.team_id,
            "api_app_id": APP_ID,
            "event": event,
            "type": "event_callback",
            "event_id": f"Ev{number:010d}",
            "event_time": int(time.time()),
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": self.team_id,
                    "user_id": BOT_USER_ID,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
            "event_context": f"4-fake-{number}",
        }

    def message(
        self,
        channel: str,
        text: str,
        *,
        user: str | None = ALICE,
        channel_type: str = "channel",
        thread_ts: str | None = None,
        parent_user_id: str | None = None,
        files: list[dict[str, Any]] | None = None,
        sent_at: float | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """A `message` event callback; `extra` adds or overrides event fields; `sent_at` (epoch
        seconds) back-dates it."""
        ts = self.next_ts(sent_at)
        event: dict[str, Any] = {
            "type": "message",
            "channel": channel,
            "text": text,
            "ts": ts,
            "event_ts": ts,
            "channel_type": channel_type,
            "team": self.team_id,
        }
        if user is not None:
            event["user"] = user
            event["client_msg_id"] = str(uuid.uuid4())
        if thread_ts is not None:
            event["thread_ts"] = thread_ts
            event["parent_user_id"] = parent_user_id or user
        if files:
            event["files"] = files
            event["subtype"] = "file_share"
            event["upload"] = False
        event.update(extra)
        # As `conversations.history` shows it: no channel, channel type or event ts.
        kept = {k: v for k, v in event.items() if k not in ("channel", "channel_type")}
        kept.pop("event_ts", None)
        if thread_ts is None or thread_ts == ts:
            self.history.setdefault(channel, []).append(kept)
        else:
            self.add_reply(channel, thread_ts, kept)
        return self.event_callback(event)

    def slash_command(
        self, command: str, text: str = "", *, user: str = ALICE, channel: str = DM_CHANNEL
    ) -> dict[str, str]:
        """The payload of a slash command the app registered (`/approve`), typed by `user` in
        `channel`: form fields, as Slack posts them (and sends them over Socket Mode)."""
        number = next(self._sequence)
        return {
            "token": "fake-verification-token",
            "team_id": self.team_id,
            "team_domain": "switchboard-test",
            "channel_id": channel,
            "channel_name": "directmessage" if channel.startswith("D") else "general",
            "user_id": user,
            "user_name": user.lower(),
            "command": command,
            "text": text,
            "api_app_id": APP_ID,
            "is_enterprise_install": "false",
            "response_url": f"https://hooks.slack.invalid/commands/{number}",
            "trigger_id": f"{number}.{uuid.uuid4().hex[:12]}",
        }

    def add_reply(self, channel: str, thread_ts: str, message: dict[str, Any]) -> None:
        """Keep `message` among the replies of a thread; its parent counts it."""
        self.replies.setdefault((channel, thread_ts), []).append(message)
        for parent in self.history.get(channel, []):
            if parent.get("ts") == thread_ts:
                parent["thread_ts"] = thread_ts
                parent["reply_count"] = int(parent.get("reply_count") or 0) + 1
                latest = str(parent.get("latest_reply") or "0")
                if _ts_pair(message["ts"]) > _ts_pair(latest):
                    parent["latest_reply"] = message["ts"]

    def dm(
        self,
        text: str,
        *,
        user: str = ALICE,
        channel: str = DM_CHANNEL,
        thread_ts: str | None = None,
        files: list[dict[str, Any]] | None = None,
        sent_at: float | None = None,
    ) -> dict[str, Any]:
        """A direct message to the bot (`message.im`)."""
        return self.message(
            channel,
            text,
            user=user,
            channel_type="im",
            thread_ts=thread_ts,
            files=files,
            sent_at=sent_at,
        )

    def channel_message(
        self,
        text: str,
        *,
        channel: str = GENERAL,
        user: str = ALICE,
        mention: bool = False,
        thread_ts: str | None = None,
        parent_user_id: str | None = None,
        files: list[dict[str, Any]] | None = None,
        sent_at: float | None = None,
    ) -> dict[str, Any]:
        """A message in a public channel (`message.channels`); `mention` puts `<@bot>` first."""
        if mention:
            text = f"<@{BOT_USER_ID}> {text}"
        return self.message(
            channel,
            text,
            user=user,
            thread_ts=thread_ts,
            parent_user_id=parent_user_id,
            files=files,
            sent_at=sent_at,
        )

    def app_mention_for(self, message: dict[str, Any]) -> dict[str, Any]:
        """The `app_mention` Slack sends alongside `message` (same ts), with its own event id."""
        original = message["event"]
        event = {
            key: original[key]
            for key in ("user", "text", "ts", "channel", "event_ts", "thread_ts", "files", "team")
            if key in original
        }
        event["type"] = "app_mention"
        return self.event_callback(event)

    def bot_message(self, channel: str, text: str, *, bot_id: str = "B0OTHER") -> dict[str, Any]:
        """A message from another app's bot (subtype `bot_message`, no user)."""
        return self.message(
            channel, text, user=None, subtype="bot_message", bot_id=bot_id, username="other"
        )

    def own_message(self, channel: str, text: str) -> dict[str, Any]:
        """The echo of a message our bot posted, as Slack sends it to the bot's app."""
        return self.message(
            channel, text, user=BOT_USER_ID, bot_id=BOT_ID, app_id=APP_ID, bot_profile={}
        )

    def edited(self, original: dict[str, Any], text: str) -> dict[str, Any]:
        """A `message_changed` event for an earlier message."""
        before = original["event"]
        after = {**before, "text": text, "edited": {"user": before.get("user"), "ts": "1"}}
        return self.message(
            before["channel"],
            "",
            user=None,
            channel_type=before.get("channel_type", "channel"),
            subtype="message_changed",
            hidden=True,
            message=after,
            previous_message=before,
        )

    def joined(self, channel: str, user: str) -> dict[str, Any]:
        """A `channel_join` message: someone joined the channel."""
        return self.message(
            channel, f"<@{user}> has joined the channel", user=user, subtype="channel_join"
        )


def _ts_pair(ts: str) -> tuple[int, int]:
    """A message timestamp as a number pair, so `1.000010` sorts after `1.000009`."""
    seconds, _, fraction = ts.partition(".")
    return int(seconds), int(fraction.ljust(6, "0")[:6])
