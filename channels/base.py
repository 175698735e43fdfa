"""The channel contract: the `ChannelAdapter` protocol and the `ChannelSpec` of a platform.

A `ChannelAdapter` turns a platform's updates into `Inbound` work and shows `Outbound`
deliveries in the platform's chats. It knows nothing of workers, stores or deployments: the
`Gateway` connects it to the bus. A `ChannelSpec` is everything else the product needs to know
about a platform (its settings, prompt hint, default capability mode, address grammar, whether
one process at a time may read it, its command menu, its `switchboard doctor` checks, how to
reach an admin's DM), so adding a platform is one package under `channels/` and one line in
`bots/platforms.py`: `core/` never changes, nor does any other module of `bots/`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ValidationError

from channels.attachments import DocumentReader
from channels.checks import PlatformChecks
from channels.uploads import UploadLimits
from core.addresses import AddressGrammar
from core.commands import CommandInfo
from core.envelopes import Address, Inbound, Outbound
from core.errors import ConfigError
from core.store.seen import SeenMarks

if TYPE_CHECKING:
    from channels.streaming import ReplyStreams

__all__ = [
    "Address",
    "ChannelAdapter",
    "ChannelSetup",
    "ChannelSpec",
    "Inbound",
    "InboundSink",
    "Outbound",
    "ReportsPolls",
    "settings_from_env",
]

InboundSink = Callable[[Inbound], Awaitable[None]]
_Model = TypeVar("_Model", bound=BaseModel)


@runtime_checkable
class ReportsPolls(Protocol):
    """An adapter that polls its platform (Telegram without a webhook) and says when a poll
    succeeded, with or without updates: the watchdog's poll lag (`core/watchdog.py`)."""

    def on_poll(self, listener: Callable[[], None]) -> None:
        """Call `listener` after every successful poll."""
        ...


class ChannelAdapter(Protocol):
    """One chat platform, seen from Switchboard."""

    @property
    def platform(self) -> str:
        """The platform key: the first part of session keys and of `outbound.<platform>`."""
        ...

    @property
    def bot_key(self) -> str:
        """Which bot of the platform this is (stable across restarts and replicas): it names
        the bot's single-reader lease, so two bots on one platform do not share it."""
        ...

    async def run(self, sink: InboundSink) -> None:
        """Receive the platform's updates and hand each over to `sink` as `Inbound`.

        Returns when `stop()` was called or the platform's input ended.
        """
        ...

    async def deliver(self, outbound: Outbound) -> None:
        """Show an `Outbound` in its chat.

        Raises `ChannelError` (with `retry_after` when the platform said when) if the platform
        refused; the gateway then tries again later.
        """
        ...

    async def stop(self) -> None:
        """Stop receiving; `run()` returns soon after."""
        ...


@dataclass(frozen=True)
class ChannelSetup:
    """What building an adapter gets from the wiring in `bots/`."""

    # The process environment (with `.env`): each channel reads its own variables.
    env: Mapping[str, str]
    # The profile's `[channels.<platform>]` table, validated by the spec's `options` model.
    options: BaseModel | None
    # The chat commands to offer in the platform's native menu.
    menu: tuple[CommandInfo, ...]
    # How this process shows streamed replies, through records every gateway shares.
    replies: ReplyStreams
    # Where each conversation's catch-up after downtime starts (the store's seen marks);
    # None: the adapter reads no history at start.
    seen: SeenMarks | None = None
    # Reads the documents people send (the profile's `[documents]`, the bot's secrets
    # scrubbed from their text).
    documents: DocumentReader = field(default_factory=DocumentReader)


def _no_leader(env: Mapping[str, str]) -> str | None:
    return None


def _no_dm(user_id: str) -> Address | None:
    return None


@dataclass(frozen=True)
class ChannelSpec:
    """One platform, as the wiring sees it: registered once, in `bots/platforms.py`."""

    # The platform key (session keys, `outbound.<name>`, `[modes]` and `[allow]` tables).
    name: str
    # The platform's formatting rules, added to the system prompt of its turns.
    prompt_hint: str
    # The capability mode its chats get unless the profile's [modes] says otherwise.
    default_mode: str
    # How a person writes one of its chats (`switchboard schedule add --deliver-to`).
    address: AddressGrammar
    # Builds the adapter a gateway runs; None for a channel the CLI drives itself (terminal).
    build: Callable[[ChannelSetup], ChannelAdapter] | None = None
    # The variables that configure it; a gateway process serves it when the first one is set.
    env: tuple[str, ...] = ()
    # Those of `env` that hold secrets (scrubbed from logs, events and tool output).
    secret_env: tuple[str, ...] = ()
    # Shapes of its credentials (regular expressions), scrubbed even when not configured here.
    secret_patterns: tuple[str, ...] = ()
    # The model of the profile's `[channels.<name>]` table; None: the platform takes none.
    options: type[BaseModel] | None = None
    # The lease role when only one process at a time may read the platform (long polling, a
    # gateway websocket), given the environment; None when every replica may serve.
    leader_role: Callable[[Mapping[str, str]], str | None] = field(default=_no_leader)
    # Whether a gateway standing by for that lease delivers answers meanwhile: the adapter can
    # deliver before its `run()` (and closes what that opened at `stop()`).
    delivers_on_standby: bool = False
    # Seconds between edits of a streamed reply.
    stream_interval: float = 1.0
    # Whether the platform shows `progress` Outbounds (notes on tool activity).
    shows_progress: bool = True
    # Whether a reply's final text takes the place of its streamed pieces (edited messages),
    # so a stopped answer keeps its text with a line saying so; else a notice follows them.
    edits_in_place: bool = False
    # User ids trusted with everything by default (the person at a local terminal).
    operators: tuple[str, ...] = ()
    # What starts a chat command typed as a message there (`/new`; Slack keeps `/` for the
    # slash commands an app registered, so a message says `!new`).
    command_prefix: str = "/"
    # What `switchboard doctor` checks when the environment configures it (`channels/checks.py`).
    checks: PlatformChecks = field(default_factory=PlatformChecks)
    # The address of the bot's DM with a person, from their user id (admins hear of a budget
    # reached there); None where the platform must be asked first.
    admin_dm: Callable[[str], Address | None] = field(default=_no_dm)
    # The largest file (and picture) a bot may upload there; `file` Outbounds over it become
    # a one-line note in the chat (`channels/uploads.py`).
    uploads: UploadLimits = field(default_factory=UploadLimits)

    def configured(self, env: Mapping[str, str]) -> bool:
        """Whether the environment asks for this platform to be served."""
        return self.build is not None and bool(self.env) and bool(env.get(self.env[0]))

    def secrets(self, env: Mapping[str, str]) -> list[str]:
        """The configured values of its secret variables."""
        return [env[name] for name in self.secret_env if env.get(name)]

    def parse_options(self, table: Mapping[str, Any] | None) -> BaseModel | None:
        """The profile's `[channels.<name>]` table, validated; `ValueError` naming the key."""
        if self.options is None:
            if table:
                raise ValueError(f"channels.{self.name}: this platform takes no options")
            return None
        try:
            return self.options.model_validate(dict(table or {}))
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            key = ".".join(str(p) for p in first["loc"])
            raise ValueError(f"channels.{self.name}.{key}: {first['msg']}") from None


def settings_from_env(
    model: type[_Model], env: Mapping[str, str], names: Mapping[str, str], **fixed: Any
) -> _Model:
    """`model` from the variables `names` maps its fields to (unset ones keep their defaults);
    `ConfigError` naming the variable when a value is invalid."""
    values = {field: env[var] for field, var in names.items() if env.get(var)}
    try:
        return model.model_validate({**values, **fixed})
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = str(first["loc"][0]) if first["loc"] else ""
        message = first["msg"].removeprefix("Value error, ")  # our own validators' words
        raise ConfigError(f"{names.get(where, where or model.__name__)}: {message}") from None
