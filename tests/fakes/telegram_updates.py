"""The update builders of the Telegram fake: what Telegram sends a bot, in its wire format.

`UpdateBuilders` is mixed into `FakeTelegram`: each builder makes one update, pushes it for
`getUpdates` and returns it (with its `update_id`), so a webhook test can post the same dict.
Message ids count up per chat from 1 unless given; users are `User<id>`/`user<id>`.
"""

from __future__ import annotations

import copy
import time
from abc import ABC, abstractmethod
from collections import defaultdict
from typing import Any

MESSAGE_KINDS = ("message", "edited_message", "channel_post", "edited_channel_post")


class UpdateBuilders(ABC):
    """Builders of incoming updates; the host provides `push`, `username` and bot messages."""

    username: str

    def __init__(self) -> None:
        self._inbound_ids: dict[int, int] = defaultdict(int)
        self._inbound: dict[tuple[int, int], dict[str, Any]] = {}
        self._chats: dict[int, dict[str, Any]] = {}
        self._files: dict[str, tuple[str, bytes]] = {}

    @abstractmethod
    def push(self, update: dict[str, Any]) -> int:
        """Queue `update` for `getUpdates`, assigning its `update_id`; returns the id."""

    @abstractmethod
    def _bot_message_to_reply_to(self, chat_id: int) -> dict[str, Any]:
        """A message of the bot in `chat_id`, for an incoming reply to quote."""

    def add_file(self, file_id: str, data: bytes, file_path: str | None = None) -> str:
        """Make `file_id` known to `getFile` and downloadable; returns its `file_path`."""
        path = file_path or f"photos/file_{len(self._files)}.jpg"
        self._files[file_id] = (path, data)
        return path

    def redeliver(self, update: dict[str, Any]) -> int:
        """Push a copy of an already pushed `update` under a new `update_id`; returns the id."""
        return self.push(dict(copy.deepcopy(update), update_id=None))

    def private_text(
        self,
        chat_id: int,
        text: str,
        *,
        user_id: int | None = None,
        message_id: int | None = None,
        entities: list[dict[str, Any]] | None = None,
        reply_to_bot: bool = False,
        sent_at: float | None = None,
    ) -> dict[str, Any]:
        """Push a text message in a private chat (user id = chat id unless given).

        Without `entities`, a text starting with "/" gets its `bot_command` entity, as Telegram
        adds one itself. `sent_at` (epoch seconds) back-dates it: sent while the bot was away.
        """
        user = user_object(user_id if user_id is not None else chat_id)
        chat = {"id": chat_id, "type": "private", "first_name": user["first_name"]}
        message = self._message(chat, user, message_id, sent_at=sent_at, text=text)
        if entities is None:
            entities = command_entities(text)
        if entities:
            message["entities"] = entities
        if reply_to_bot:
            message["reply_to_message"] = self._bot_message_to_reply_to(chat_id)
        return self._push_kind("message", message)

    def group_text(
        self,
        chat_id: int,
        text: str,
        *,
        user_id: int,
        message_id: int | None = None,
        mention: bool = False,
        thread_id: int | None = None,
        reply_to_bot: bool = False,
        command: bool = False,
        sent_at: float | None = None,
    ) -> dict[str, Any]:
        """Push a text message in a supergroup (a forum one when `thread_id` is given).

        `mention` prepends "@username " with a `mention` entity; `command` wants a text
        starting with "/", and together they address the command: "/cmd@username …".
        `sent_at` (epoch seconds) back-dates it.
        """
        if command and not text.startswith("/"):
            raise ValueError(f"a command starts with '/', got {text!r}")
        entities: list[dict[str, Any]] = []
        if mention and command:
            name, _, rest = text.partition(" ")
            text = f"{name}@{self.username}" + (f" {rest}" if rest else "")
        elif mention:
            text = f"@{self.username} {text}"
            entities.append({"type": "mention", "offset": 0, "length": len(self.username) + 1})
        entities.extend(command_entities(text))
        chat = self._group_chat(chat_id, forum=thread_id is not None)
        message = self._message(chat, user_object(user_id), message_id, sent_at=sent_at, text=text)
        if entities:
            message["entities"] = entities
        if thread_id is not None:
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
        if reply_to_bot:
            message["reply_to_message"] = self._bot_message_to_reply_to(chat_id)
        return self._push_kind("message", message)

    def photo(
        self, chat_id: int, file_id: str, *, caption: str = "", user_id: int | None = None
    ) -> dict[str, Any]:
        """Push a photo message; the largest (last) size has `file_id` (see `add_file`)."""
        size = len(self._files[file_id][1]) if file_id in self._files else 50_000
        sizes = [
            {
                "file_id": f"{file_id}-thumb",
                "file_unique_id": f"u-{file_id}-thumb",
                "width": 90,
                "height": 90,
                "file_size": 1_000,
            },
            {
                "file_id": file_id,
                "file_unique_id": f"u-{file_id}",
                "width": 1280,
                "height": 960,
                "file_size": size,
            },
        ]
        chat, user = self._chat_and_user(chat_id, user_id)
        message = self._message(chat, user, None, photo=sizes)
        if caption:
            message["caption"] = caption
        return self._push_kind("message", message)

    def document(
        self,
        chat_id: int,
        file_id: str,
        *,
        file_name: str,
        mime_type: str,
        caption: str = "",
        file_size: int | None = None,
        user_id: int | None = None,
    ) -> dict[str, Any]:
        """Push a document message (a file sent as a file, not as a photo); its size is the
        added file's (see `add_file`) unless `file_size` says otherwise."""
        if file_size is None:
            file_size = len(self._files[file_id][1]) if file_id in self._files else 50_000
        document = {
            "file_id": file_id,
            "file_unique_id": f"u-{file_id}",
            "file_name": file_name,
            "mime_type": mime_type,
            "file_size": file_size,
        }
        chat, user = self._chat_and_user(chat_id, user_id)
        message = self._message(chat, user, None, document=document)
        if caption:
            message["caption"] = caption
        return self._push_kind("message", message)

    def voice(
        self,
        chat_id: int,
        file_id: str,
        *,
        duration: int = 3,
        caption: str = "",
        file_size: int | None = None,
        user_id: int | None = None,
    ) -> dict[str, Any]:
        """Push a voice note (Opus in OGG, no file name) of `duration` seconds; its size is the
        added file's (see `add_file`) unless `file_size` says otherwise."""
        return self._recording(
            chat_id,
            "voice",
            {"duration": duration, "mime_type": "audio/ogg"},
            file_id,
            caption,
            file_size,
            user_id,
        )

    def audio(
        self,
        chat_id: int,
        file_id: str,
        *,
        file_name: str,
        mime_type: str = "audio/mpeg",
        duration: int = 30,
        caption: str = "",
        user_id: int | None = None,
    ) -> dict[str, Any]:
        """Push an audio file (music player's kind of message) of `duration` seconds."""
        fields = {"duration": duration, "mime_type": mime_type, "file_name": file_name}
        return self._recording(chat_id, "audio", fields, file_id, caption, None, user_id)

    def _recording(
        self,
        chat_id: int,
        kind: str,
        fields: dict[str, Any],
        file_id: str,
        caption: str,
        file_size: int | None,
        user_id: int | None,
    ) -> dict[str, Any]:
        if file_size is None:
            file_size = len(self._files[file_id][1]) if file_id in self._files else 50_000
        recording = {
            "file_id": file_id,
            "file_unique_id": f"u-{file_id}",
            "file_size": file_size,
            **fields,
        }
        chat, user = self._chat_and_user(chat_id, user_id)
        message = self._message(chat, user, None)
        message[kind] = recording
        if caption:
            message["caption"] = caption
        return self._push_kind("message", message)

    def edited_text(
        self, chat_id: int, message_id: int, text: str, *, user_id: int | None = None
    ) -> dict[str, Any]:
        """Push an `edited_message` update: message `message_id` now reads `text`."""
        original = self._inbound.get((chat_id, message_id))
        if original is not None and user_id is None:
            chat, user = original["chat"], original["from"]
        else:
            chat, user = self._chat_and_user(chat_id, user_id)
        message = self._message(chat, user, message_id, text=text)
        if original is not None:
            message["date"] = original["date"]
        message["edit_date"] = int(time.time())
        if entities := command_entities(text):
            message["entities"] = entities
        return self._push_kind("edited_message", message)

    def sticker(self, chat_id: int, *, user_id: int | None = None) -> dict[str, Any]:
        """Push a sticker message (no text, no caption)."""
        sticker = {
            "file_id": "sticker-1",
            "file_unique_id": "u-sticker-1",
            "type": "regular",
            "width": 512,
            "height": 512,
            "is_animated": False,
            "is_video": False,
            "emoji": "👍",
        }
        chat, user = self._chat_and_user(chat_id, user_id)
        return self._push_kind("message", self._message(chat, user, None, sticker=sticker))

    def channel_post(self, chat_id: int, text: str) -> dict[str, Any]:
        """Push a `channel_post` update: no `from`, the channel is the `sender_chat`."""
        chat = self._chats.setdefault(
            chat_id, {"id": chat_id, "type": "channel", "title": f"Channel {chat_id}"}
        )
        message = {
            "message_id": self._next_inbound_id(chat_id, None),
            "sender_chat": chat,
            "chat": chat,
            "date": int(time.time()),
            "text": text,
        }
        return self._push_kind("channel_post", message)

    def member_joined(self, chat_id: int, user_id: int) -> dict[str, Any]:
        """Push the service message announcing that `user_id` joined group `chat_id`."""
        user = user_object(user_id)
        chat = self._group_chat(chat_id, forum=False)
        message = self._message(chat, user, None, new_chat_members=[user])
        return self._push_kind("message", message)

    def _push_kind(self, kind: str, message: dict[str, Any]) -> dict[str, Any]:
        update: dict[str, Any] = {"update_id": None, kind: message}
        self.push(update)
        return update

    def _message(
        self,
        chat: dict[str, Any],
        user: dict[str, Any],
        message_id: int | None,
        *,
        sent_at: float | None = None,
        **content: Any,
    ) -> dict[str, Any]:
        return {
            "message_id": self._next_inbound_id(chat["id"], message_id),
            "from": user,
            "chat": chat,
            "date": int(time.time() if sent_at is None else sent_at),
            **content,
        }

    def _next_inbound_id(self, chat_id: int, given: int | None) -> int:
        if given is not None:
            self._inbound_ids[chat_id] = max(self._inbound_ids[chat_id], given)
            return given
        self._inbound_ids[chat_id] += 1
        return self._inbound_ids[chat_id]

    def _group_chat(self, chat_id: int, *, forum: bool) -> dict[str, Any]:
        chat = self._chats.setdefault(
            chat_id, {"id": chat_id, "type": "supergroup", "title": f"Group {chat_id}"}
        )
        if forum:
            chat["is_forum"] = True
        return dict(chat)

    def _chat_and_user(
        self, chat_id: int, user_id: int | None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        if chat_id > 0:
            user = user_object(user_id if user_id is not None else chat_id)
            return {"id": chat_id, "type": "private", "first_name": user["first_name"]}, user
        if user_id is None:
            raise ValueError("a message in a group needs user_id")
        return self._group_chat(chat_id, forum=False), user_object(user_id)

    def _remember(self, update: dict[str, Any]) -> None:
        """Index the update's message so replies can quote it and chats keep their shape."""
        for kind in MESSAGE_KINDS:
            if isinstance(message := update.get(kind), dict) and "chat" in message:
                self._chats.setdefault(message["chat"]["id"], message["chat"])
                key = (message["chat"]["id"], message["message_id"])
                self._inbound[key] = {k: v for k, v in message.items() if k != "reply_to_message"}


def user_object(user_id: int) -> dict[str, Any]:
    """A human `User` object."""
    return {
        "id": user_id,
        "is_bot": False,
        "first_name": f"User{user_id}",
        "username": f"user{user_id}",
        "language_code": "en",
    }


def default_chat(chat_id: int) -> dict[str, Any]:
    """The `Chat` of an id never seen in an update: private if positive, else a supergroup."""
    if chat_id > 0:
        return {"id": chat_id, "type": "private", "first_name": f"User{chat_id}"}
    return {"id": chat_id, "type": "supergroup", "title": f"Group {chat_id}"}


def utf16_length(text: str) -> int:
    """Entity offsets and lengths count UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def command_entities(text: str) -> list[dict[str, Any]]:
    """The `bot_command` entity Telegram adds to a text that starts with a command."""
    if not text.startswith("/") or len(text) < 2 or text[1].isspace():
        return []
    command = text.split(maxsplit=1)[0]
    return [{"type": "bot_command", "offset": 0, "length": utf16_length(command)}]
