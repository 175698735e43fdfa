"""Files and images back to the person, through `switchboard serve` on each chat platform.

An admin in a `full` chat asks for a picture (`generate_image`, the OpenAI fake drawing it)
and for a report from the workspace (`send_file`, confirmed with a typed "yes"): the picture
arrives as a photo (Telegram) or a file, the report as a document, each through the platform's
own upload (Telegram `sendPhoto`/`sendDocument`, Slack's external upload, Discord
attachments), and each tool's result tells the model what was sent. Loads are tiny.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.processes import START_PATIENCE, clean_env
from tests.e2e.served import serve
from tests.fakes import FakeDiscord, FakeOpenAI, Text, ToolUse
from tests.fakes.openai_api import tiny_png
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_events import ALICE, DM_CHANNEL
from tests.fakes.telegram_api import FakeTelegram
from tests.integration.telegram_helpers import reply_containing, until

pytestmark = pytest.mark.e2e

STOP_PATIENCE = 5.0
REPORT = b"Quarterly report: all green.\n"
PICTURE = tiny_png(250, 20, 20)


def _asked(body: dict[str, Any]) -> str:
    content = body["messages"][-1].get("content") or ""
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def model(body: dict[str, Any]) -> Text | ToolUse:
    """Draws when asked to draw, sends the report when asked for it, then says it is done."""
    if body["messages"][-1]["role"] == "tool":
        return Text("All done.")
    asked = _asked(body)
    if "draw" in asked:
        call = ("call_img", "generate_image", {"prompt": "a red square", "caption": "Red."})
        return ToolUse([call])
    if "report" in asked:
        return ToolUse([("call_file", "send_file", {"path": "out/report.txt"})])
    return Text(f"You said: {asked}")


def prepared(tmp_path: Path, openai: FakeOpenAI, platform: str, admin: str) -> dict[str, str]:
    """The environment of a serve whose `platform` chats are `full` with `admin` an admin of
    the bot, a report in the workspace, and the OpenAI fake answering and drawing."""
    env = clean_env(tmp_path, redis_url=None, openai=openai, SWITCHBOARD_MODEL="gpt-4o-mini")
    profile = Path(env["SWITCHBOARD_PROFILES_DIR"]) / "default" / "profile.toml"
    text = profile.read_text(encoding="utf-8")
    modes = {"telegram": "safe-chat", "slack": "safe-chat", "discord": "discord"}
    text = text.replace(f'{platform} = "{modes[platform]}"', f'{platform} = "full"', 1)
    profile.write_text(f'admins = ["{platform}:{admin}"]\n{text}', encoding="utf-8")
    report = Path(env["SWITCHBOARD_DATA_DIR"]) / "workspaces" / "default" / "out" / "report.txt"
    report.parent.mkdir(parents=True)
    report.write_bytes(REPORT)
    openai.script(*[model] * 10)
    openai.draw(PICTURE)
    return env


def tool_results(openai: FakeOpenAI) -> list[str]:
    """What the tools told the model, in order."""
    return [
        str(message.get("content"))
        for request in openai.requests
        for message in request.json["messages"][-1:]
        if message.get("role") == "tool"
    ]


def assert_told(openai: FakeOpenAI) -> None:
    told = tool_results(openai)
    assert any("sent it to this chat as a picture" in result for result in told), told
    assert any("Sent report.txt (29 bytes, text/plain)" in result for result in told), told
    assert openai.images[0].prompt == "a red square"


async def test_telegram_gets_a_photo_and_a_document(
    fake_telegram: FakeTelegram, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake, dm = fake_telegram, 555
    env = prepared(tmp_path, fake_openai, "telegram", str(dm))
    env.update(TELEGRAM_BOT_TOKEN=fake.token, TELEGRAM_API_URL=fake.url)
    async with serve(env, tmp_path) as served:
        await served.until_ready(fake.wait_idle_poll(timeout=START_PATIENCE))
        fake.private_text(dm, "please draw me a red square")
        await until(fake, lambda: len(fake.uploads) == 1, "the photo", START_PATIENCE)
        fake.private_text(dm, "and send me the report")
        await reply_containing(fake, dm, "Reply yes to allow", START_PATIENCE)
        fake.private_text(dm, "yes")
        await until(fake, lambda: len(fake.uploads) == 2, "the document", START_PATIENCE)
        assert await served.terminate(STOP_PATIENCE) == 0
    photo, document = fake.uploads
    assert (photo.method, photo.chat_id, photo.caption, photo.file.data) == (
        "sendPhoto",
        dm,
        "Red.",
        PICTURE,
    )
    assert (document.method, document.file.filename, document.file.data) == (
        "sendDocument",
        "report.txt",
        REPORT,
    )
    assert_told(fake_openai)
    assert "Traceback" not in served.log, served.log


async def test_slack_gets_both_files_through_the_external_upload(
    fake_slack: FakeSlack, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake = fake_slack
    env = prepared(tmp_path, fake_openai, "slack", ALICE)
    env.update(
        SLACK_BOT_TOKEN=fake.bot_token, SLACK_APP_TOKEN=fake.app_token, SLACK_API_URL=fake.api_url
    )
    async with serve(env, tmp_path) as served:
        await served.until_ready(fake.wait_socket_connected(timeout=START_PATIENCE))
        await fake.send_socket_event(fake.dm("please draw me a red square"))
        await fake.until(lambda: len(fake.uploads) == 1, "the picture", START_PATIENCE)
        await fake.send_socket_event(fake.dm("and send me the report"))
        await fake.until(
            lambda: any("Reply yes to allow" in t for t in fake.sent_texts(DM_CHANNEL)),
            "the question",
            START_PATIENCE,
        )
        await fake.send_socket_event(fake.dm("yes"))
        await fake.until(lambda: len(fake.uploads) == 2, "the report", START_PATIENCE)
        assert await served.terminate(STOP_PATIENCE) == 0
    picture, report = fake.uploads
    assert (picture.channel, picture.data, picture.initial_comment) == (DM_CHANNEL, PICTURE, "Red.")
    assert picture.filename.endswith(".png")
    assert (report.channel, report.filename, report.data) == (DM_CHANNEL, "report.txt", REPORT)
    assert_told(fake_openai)
    assert "Traceback" not in served.log, served.log


async def test_discord_gets_both_files_as_attachments(
    fake_discord: FakeDiscord, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake, alice = fake_discord, 42
    env = prepared(tmp_path, fake_openai, "discord", str(alice))
    env.update(
        DISCORD_BOT_TOKEN=fake.token,
        DISCORD_API_URL=fake.api_url,
        DISCORD_GATEWAY_URL=fake.gateway_url,
    )
    channel = fake.dm_channel_id(alice)
    async with serve(env, tmp_path) as served:
        await served.until_ready(fake.wait_ready(START_PATIENCE))
        fake.dm(alice, "please draw me a red square")
        await fake.until(lambda: len(fake.uploads) == 1, "the picture", START_PATIENCE)
        fake.dm(alice, "and send me the report")
        await fake.until(
            lambda: any("Reply yes to allow" in t for t in fake.sent_texts(channel)),
            "the question",
            START_PATIENCE,
        )
        fake.dm(alice, "yes")
        await fake.until(lambda: len(fake.uploads) == 2, "the report", START_PATIENCE)
        assert await served.terminate(STOP_PATIENCE) == 0
    (picture_channel, _, picture), (_, _, report) = fake.uploads
    assert (picture_channel, picture.data) == (channel, PICTURE)
    assert (report.filename, report.data) == ("report.txt", REPORT)
    assert_told(fake_openai)
    assert "Traceback" not in served.log, served.log
