"""`generate_image` through the official `openai` SDK against the images endpoint of the
OpenAI fake: the image goes to the chat as a picture, each one is a cost-ledger entry, and a
failed generation is one sentence for the model with nothing charged or sent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from bots.app import embedded
from bots.images import image_generator
from bots.profiles import load_profile
from bots.settings import load_settings
from core.backends.sql.store import SqlStore
from core.bus.names import outbound_queue
from core.envelopes import Address, Outbound
from core.errors import ConfigError, ToolError
from core.images import ImageSettings, OpenAIImages
from core.modes import DISCORD, SAFE_CHAT
from core.tools import GENERATE_IMAGE, SEND_FILE, FileDrop, ToolContext, generate_image_tool
from core.tools.base import SafetyTier
from tests.backends.memory_bus import MemoryBus
from tests.fakes.fixtures import TEST_API_KEY
from tests.fakes.llm_script import Error
from tests.fakes.openai_api import FakeOpenAI, tiny_png
from tests.profile_env import profile_env

CHAT = Address(platform="discord", bot="b", chat="700")


@pytest.fixture
async def bus() -> AsyncIterator[MemoryBus]:
    opened = MemoryBus()
    try:
        yield opened
    finally:
        await opened.close()


def images(fake: FakeOpenAI, model: str = "gpt-image-1") -> OpenAIImages:
    return OpenAIImages(
        api_key=SecretStr(TEST_API_KEY), base_url=fake.url, model=model, size="1024x1024",
        timeout=5.0, max_retries=0,
    )  # fmt: skip


async def test_an_image_is_sent_to_the_chat_as_a_picture_and_charged(
    fake_openai: FakeOpenAI, bus: MemoryBus, store: SqlStore, session_id: str
) -> None:
    picture = tiny_png(10, 200, 10)
    fake_openai.draw(picture)
    tool = generate_image_tool(images(fake_openai), FileDrop(bus), store, price=0.04)
    context = ToolContext(
        session_id=session_id, run_id="r1", user_id="42", platform="discord", address=CHAT
    )

    result = await tool({"prompt": "a green square", "caption": "As asked"}, context)

    assert "sent it to this chat as a picture" in result
    assert "$0.040" in result
    (request,) = fake_openai.images
    assert (request.model, request.prompt, request.size) == (
        "gpt-image-1",
        "a green square",
        "1024x1024",
    )
    assert request.response_format is None  # the gpt-image models refuse it
    delivery = await bus.receive(outbound_queue("discord"), consumer="t", timeout=0)
    assert delivery is not None and isinstance(delivery.envelope, Outbound)
    (file,) = delivery.envelope.attachments
    assert (file.data, file.media_type, file.image) == (picture, "image/png", True)
    assert file.name.endswith(".png")
    assert delivery.envelope.text == "As asked"
    summary = await store.cost_summary(session_id)
    assert summary.calls == 1
    assert summary.cost_usd == pytest.approx(0.04)


async def test_other_models_are_asked_for_base64(
    fake_openai: FakeOpenAI, bus: MemoryBus, store: SqlStore, session_id: str
) -> None:
    tool = generate_image_tool(images(fake_openai, "dall-e-3"), FileDrop(bus), store, price=0.04)
    context = ToolContext(session_id=session_id, run_id="r1", address=CHAT)
    await tool({"prompt": "a cat"}, context)
    assert fake_openai.images[0].response_format == "b64_json"


async def test_a_failed_generation_is_a_sentence_and_nothing_is_charged_or_sent(
    fake_openai: FakeOpenAI, bus: MemoryBus, store: SqlStore, session_id: str
) -> None:
    fake_openai.draw(Error(400, "content_policy_violation", "Your request was rejected."))
    tool = generate_image_tool(images(fake_openai), FileDrop(bus), store, price=0.04)
    context = ToolContext(session_id=session_id, run_id="r1", address=CHAT)

    with pytest.raises(ToolError, match="No image was made: the image endpoint answered HTTP 400"):
        await tool({"prompt": "something refused"}, context)

    assert await bus.receive(outbound_queue("discord"), consumer="t", timeout=0) is None
    assert (await store.cost_summary(session_id)).calls == 0


async def test_a_wrong_key_is_named_by_status_never_by_value(fake_openai: FakeOpenAI) -> None:
    wrong = OpenAIImages(
        api_key=SecretStr("sk-wrong-0123456789"), base_url=fake_openai.url, model="gpt-image-1",
        size="1024x1024", timeout=5.0, max_retries=0,
    )  # fmt: skip
    with pytest.raises(Exception, match="HTTP 401") as caught:
        await wrong.generate("a cat")
    assert "sk-wrong" not in str(caught.value)


def test_generate_image_is_read_only_and_offered_in_the_shared_modes(bus: MemoryBus) -> None:
    tool = generate_image_tool(
        OpenAIImages(api_key=None, base_url="http://127.0.0.1:9/v1", model="m", size="auto",
                     timeout=1.0),
        FileDrop(bus), ledger=None, price=0.0,  # type: ignore[arg-type]
    )  # fmt: skip
    assert tool.tier is SafetyTier.READ_ONLY
    assert SAFE_CHAT.allows(tool) and DISCORD.allows(tool)


@pytest.mark.parametrize(
    ("env", "table", "expected"),
    [
        ({}, {}, None),
        ({"OPENAI_API_KEY": "sk-x"}, {}, "https://api.openai.com/v1"),
        ({"OPENAI_API_KEY": "sk-x"}, {"enabled": False}, None),
        ({"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"}, {}, "http://127.0.0.1:8080/v1"),
        ({}, {"base_url": "http://127.0.0.1:7860/v1"}, "http://127.0.0.1:7860/v1"),
        ({"IMG_KEY": "k"}, {"api_key_env": "IMG_KEY", "base_url": "http://h/v1"}, "http://h/v1"),
    ],
)
def test_the_endpoint_comes_from_the_images_table_or_the_openai_settings(
    env: dict[str, str], table: dict[str, object], expected: str | None
) -> None:
    found = image_generator(env, ImageSettings.model_validate(table))
    assert (found.base_url if found else None) == expected


def test_an_api_key_env_that_is_not_set_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"\[images\] api_key_env: IMG_KEY is not set"):
        image_generator({}, ImageSettings(api_key_env="IMG_KEY"))


@pytest.mark.parametrize(
    ("env", "table", "offered"),
    [
        ({}, "", False),
        ({"OPENAI_API_KEY": TEST_API_KEY}, "", True),
        ({"OPENAI_API_KEY": TEST_API_KEY}, "[images]\nenabled = false\n", False),
    ],
)
async def test_the_wiring_offers_generate_image_only_with_an_image_endpoint(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    table: str,
    offered: bool,
) -> None:
    monkeypatch.chdir(tmp_path)
    profile_env(
        monkeypatch,
        tmp_path,
        table,
        SWITCHBOARD_PROVIDER="demo",
    )
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    profile = load_profile(settings.profiles_dir, settings.profile)

    async with embedded(settings, profile) as parts:
        names = parts.runtime.tools.names()

    assert (GENERATE_IMAGE in names) is offered
    assert SEND_FILE in names  # the workspace's, privileged: offered where `full` is
