"""The registered platforms and what the wiring derives from their specs.

The defaults that used to be spelled in `core/` (modes per platform, the terminal's admin,
address grammars, token shapes, single-reader leases) now come from each channel's spec; these
tests pin that the derived values are the ones the product had.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from bots.platforms import PLATFORMS, REGISTERED, Platforms, command_registry
from bots.profiles import load_profile
from bots.settings import load_settings
from channels.base import ChannelAdapter, ChannelSetup, ChannelSpec
from channels.discord.adapter import DiscordAdapter
from channels.streaming import IncrementalRender, ReplyStreams
from channels.terminal import TerminalAdapter
from core.addresses import AddressGrammar
from core.commands import CommandInfo
from core.documents import DocumentSettings
from core.envelopes import Address
from core.errors import ConfigError
from core.profile import Profile, ProfileSettings
from core.redact import REDACTED, Redactor
from core.store.replies import MemoryReplyRecords

MENU = command_registry().menu()
REPLIES = ReplyStreams(MemoryReplyRecords(), IncrementalRender())
TELEGRAM_TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
DISCORD_TOKEN = "MTIzNDU2Nzg5MDEyMzQ1Njc4.GhIjKl.abcdefghijklmnopqrstuvwxyz0123456"


def test_the_derived_defaults_are_the_products() -> None:
    assert REGISTERED.default_modes() == {
        "web": "full",
        "terminal": "full",
        "telegram": "safe-chat",
        "slack": "safe-chat",
        "discord": "discord",
    }
    assert REGISTERED.default_admins() == ["terminal:local", "web:operator"]
    assert set(REGISTERED.prompt_hints()) == {"terminal", "telegram", "slack", "discord", "web"}
    assert REGISTERED.served() == ("telegram", "slack", "discord")


def test_the_streaming_facts_of_each_platform() -> None:
    facts = {spec.name: (spec.stream_interval, spec.shows_progress) for spec in PLATFORMS}
    assert facts == {
        "telegram": (1.0, False),
        "slack": (1.0, True),
        "discord": (1.0, False),
        "terminal": (0.0, True),
        "web": (0.2, True),
    }


@pytest.mark.parametrize(
    ("text", "address", "written"),
    [
        ("telegram:-1001:7", Address(platform="telegram", chat="-1001", thread="7"), None),
        ("Telegram:42", Address(platform="telegram", chat="42"), "telegram:42"),
        ("slack:C0GENERAL", Address(platform="slack", chat="C0GENERAL"), None),
        ("discord:1234", Address(platform="discord", chat="1234"), None),
        ("terminal", Address(platform="terminal", bot="local", chat="any"), None),
    ],
)
def test_addresses_parse_and_format_back(text: str, address: Address, written: str | None) -> None:
    book = REGISTERED.addresses()
    assert book.parse(text) == address
    assert book.format(address) == (written or text)


def test_an_unknown_platform_names_every_accepted_form() -> None:
    with pytest.raises(ValueError) as raised:
        REGISTERED.addresses().parse("irc:1")
    assert str(raised.value) == (
        "'irc:1' is not a delivery address; use telegram:<chat id>[:<thread id>], "
        "slack:<channel or user id>, discord:<channel id>, terminal or web:<conversation>"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("telegram:abc", "telegram:<chat id>[:<thread id>] like telegram:-1001234567890"),
        ("telegram:1:2:3", "telegram:<chat id>[:<thread id>] like telegram:-1001234567890"),
        ("slack:general", "slack:<channel or user id> like slack:C0123ABCD"),
        ("slack:C0:T1", "slack:<channel or user id> like slack:C0123ABCD"),
        ("discord:general", "discord:<channel id> like discord:123456789012345678"),
        ("discord:", "discord:<channel id> like discord:123456789012345678"),
        ("terminal:x", "terminal"),
    ],
)
def test_a_bad_address_of_a_platform_names_the_form_it_expects(text: str, expected: str) -> None:
    with pytest.raises(ValueError) as raised:
        REGISTERED.addresses().parse(text)
    platform = text.partition(":")[0]
    assert str(raised.value) == f"{text!r} is not a {platform} address: expected {expected}"


def test_the_leases_of_single_reader_platforms() -> None:
    polling = REGISTERED.adapter_for(
        "telegram", {"TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN}, None, MENU, REPLIES
    )
    assert REGISTERED.leader_role(polling, {}) == "telegram-poller:123456789"
    webhook_env = {"TELEGRAM_WEBHOOK_URL": "https://bot.example/tg"}
    assert REGISTERED.leader_role(polling, webhook_env) is None
    discord = REGISTERED.adapter_for(
        "discord", {"DISCORD_BOT_TOKEN": DISCORD_TOKEN}, None, MENU, REPLIES
    )
    assert REGISTERED.leader_role(discord, {}) == "discord-gateway:123456789012345678"
    slack_env = {"SLACK_BOT_TOKEN": "xoxb-1-2-x", "SLACK_APP_TOKEN": "xapp-1"}
    slack = REGISTERED.adapter_for("slack", slack_env, None, MENU, REPLIES)
    assert REGISTERED.leader_role(slack, slack_env) is None


def test_platform_secrets_and_their_shapes_are_scrubbed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "signing-secret-of-the-app")
    settings = load_settings()
    assert "signing-secret-of-the-app" in settings.secrets()
    redact = settings.redactor()
    text = f"token {TELEGRAM_TOKEN} and {DISCORD_TOKEN}, signed signing-secret-of-the-app"
    assert redact(text) == f"token {REDACTED} and {REDACTED}, signed {REDACTED}"


def test_settings_read_the_platforms_variables_from_dotenv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TELEGRAM_BOT_TOKEN", raising=False)
    (tmp_path / ".env").write_text(f"TELEGRAM_BOT_TOKEN={TELEGRAM_TOKEN}\n")
    settings = load_settings()
    assert settings.environ["TELEGRAM_BOT_TOKEN"] == TELEGRAM_TOKEN
    assert [
        a.platform for a in REGISTERED.configured_adapters(settings.environ, None, MENU, REPLIES)
    ] == ["telegram"]


def test_discord_options_come_from_the_profiles_channels_table(tmp_path: Path) -> None:
    folder = tmp_path / "bot"
    folder.mkdir()
    (folder / "profile.toml").write_text("[channels.discord]\nreply_in_thread = true\n")
    profile = load_profile(tmp_path, "bot")
    adapter = REGISTERED.adapter_for(
        "discord", {"DISCORD_BOT_TOKEN": DISCORD_TOKEN}, profile, MENU, REPLIES
    )
    assert isinstance(adapter, DiscordAdapter)
    assert adapter.settings.reply_in_thread is True
    # What the file left out comes from the platforms.
    assert profile.settings.modes == REGISTERED.default_modes()
    assert profile.settings.admins == ["terminal:local", "web:operator"]


def test_the_old_discord_key_still_works(tmp_path: Path) -> None:
    folder = tmp_path / "bot"
    folder.mkdir()
    (folder / "profile.toml").write_text("discord_reply_in_thread = true\n")
    profile = load_profile(tmp_path, "bot")
    assert profile.settings.channels == {"discord": {"reply_in_thread": True}}


@pytest.mark.parametrize(
    ("table", "error"),
    [
        ("[channels.discord]\nreply_in_threads = true\n", "channels.discord.reply_in_threads"),
        ("[channels.telegram]\nx = 1\n", "channels.telegram.x"),
        ("[channels.web]\nx = 1\n", "channels.web: this platform takes no options"),
        ("[channels.irc]\nx = 1\n", "unknown platform 'irc'"),
    ],
)
def test_a_bad_channels_table_stops_the_start(tmp_path: Path, table: str, error: str) -> None:
    folder = tmp_path / "bot"
    folder.mkdir()
    (folder / "profile.toml").write_text(table)
    with pytest.raises(ConfigError, match=r"profile\.toml: ") as raised:
        load_profile(tmp_path, "bot")
    assert error in str(raised.value)


def test_a_platform_is_registered_once() -> None:
    twice = ChannelSpec(
        name="telegram",
        prompt_hint="",
        default_mode="no-tools",
        address=AddressGrammar(platform="telegram", usage="telegram"),
    )
    with pytest.raises(ValueError, match="registered twice"):
        Platforms((*PLATFORMS, twice))


async def test_the_terminal_help_lists_the_menu() -> None:
    printed = io.StringIO()
    menu = (*MENU, CommandInfo(name="ping", description="Check the bot answers"))
    adapter = TerminalAdapter(
        chat="c",
        interactive=False,
        stdin=io.StringIO("/help\n"),
        console=Console(file=printed, highlight=False, width=400),
        menu=menu,
    )

    async def nothing_expected(inbound: object) -> None:
        raise AssertionError(f"/help is answered at the terminal, not sent: {inbound}")

    await adapter.run(nothing_expected)
    text = " ".join(printed.getvalue().split())  # the console wraps long lines
    assert "/new (start a fresh conversation)" in text
    assert "/ping (check the bot answers)" in text
    assert "/quit leaves" in text


async def test_adapters_read_documents_with_the_profile_budget_and_the_bot_secrets() -> None:
    built: list[ChannelSetup] = []

    def build(setup: ChannelSetup) -> ChannelAdapter:
        built.append(setup)
        return TerminalAdapter(chat="local", interactive=False, menu=MENU, stdin=io.StringIO())

    spec = ChannelSpec(
        name="pager",
        prompt_hint="",
        default_mode="no-tools",
        address=AddressGrammar(platform="pager", usage="pager:<n>", chat=r"\d+"),
        build=build,
        env=("PAGER_TOKEN",),
    )
    profile = Profile(name="p", settings=ProfileSettings(documents=DocumentSettings(max_chars=500)))
    secret = "configured-value-Hq4Zt8Lw2Xv6"
    Platforms((spec,)).adapter_for(
        "pager", {"PAGER_TOKEN": "t"}, profile, MENU, REPLIES, redactor=Redactor([secret])
    )
    [setup] = built
    assert setup.documents.settings.max_chars == 500

    async def download() -> bytes:
        return f"the value is {secret}".encode()

    block = await setup.documents.read("a.txt", "text/plain", None, download)
    assert f"the value is {REDACTED}" in block and secret not in block
