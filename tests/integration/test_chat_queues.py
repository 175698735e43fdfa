"""The terminal chat's queues (`bots.app.backends(own_queues=True)`): durable SQLite queues in a
file of the chat's own beside the data file, so a `serve` on the same data file and the chat
never take each other's work, and two chats cannot share them."""

from __future__ import annotations

from pathlib import Path

import pytest

from bots.app import backends, chat_queue_path
from bots.settings import Settings
from core.bus.names import outbound_queue
from core.envelopes import Address, Inbound, Outbound
from core.errors import ConfigError


def _settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Settings:
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    return Settings(SWITCHBOARD_DATA_DIR=tmp_path / "data")


def _inbound(platform: str, text: str) -> Inbound:
    return Inbound(address=Address(platform=platform, chat="1"), user_id="u1", text=text)


def _reply(platform: str, text: str) -> Outbound:
    return Outbound(kind="reply", address=Address(platform=platform, chat="1"), text=text)


async def test_a_chat_and_a_serve_on_one_data_file_do_not_take_each_others_work(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = _settings(monkeypatch, tmp_path)
    async with (
        backends(settings, own_queues=True) as chat,
        backends(settings, take_over=True) as serve,
    ):
        chats = _inbound("terminal", "from the chat")
        serves = _inbound("telegram", "from telegram")
        await chat.mailboxes.put(chats)
        await serve.mailboxes.put(serves)
        await chat.bus.enqueue(outbound_queue("terminal"), _reply("terminal", "chat answer"))
        await serve.bus.enqueue(outbound_queue("terminal"), _reply("terminal", "serve answer"))

        assert await chat.mailboxes.pending() == [chats.session_key]
        assert await serve.mailboxes.pending() == [serves.session_key]
        taken = await chat.bus.receive(outbound_queue("terminal"), consumer="chat", timeout=0)
        assert taken is not None
        assert isinstance(taken.envelope, Outbound)
        assert taken.envelope.text == "chat answer"
        await taken.ack()
        assert await chat.bus.receive(outbound_queue("terminal"), consumer="c", timeout=0) is None
        left = await serve.bus.receive(outbound_queue("terminal"), consumer="serve", timeout=0)
        assert left is not None
        assert isinstance(left.envelope, Outbound)
        assert left.envelope.text == "serve answer"
        await left.ack()

    assert chat_queue_path(settings).parent == settings.database_path.parent
    assert chat_queue_path(settings) != settings.database_path


async def test_the_chats_queued_work_outlives_the_chat(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = _settings(monkeypatch, tmp_path)
    waiting = _inbound("terminal", "still to answer")
    async with backends(settings, own_queues=True) as chat:
        await chat.mailboxes.put(waiting)

    async with backends(settings, own_queues=True) as again:
        assert await again.mailboxes.pending() == [waiting.session_key]
        claim = await again.mailboxes.claim(waiting.session_key, owner="w")
        assert claim is not None
        head = await claim.head()
        assert head is not None
        assert head.text == "still to answer"


async def test_a_second_chat_on_the_same_data_directory_is_refused_with_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = _settings(monkeypatch, tmp_path)
    async with backends(settings, own_queues=True):
        with pytest.raises(ConfigError, match="another `switchboard chat`"):
            async with backends(settings, own_queues=True):
                pass
    # Once the first is gone, the next one opens.
    async with backends(settings, own_queues=True) as next_chat:
        assert await next_chat.mailboxes.pending() == []
