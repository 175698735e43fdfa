"""The chat platforms this product knows: one `ChannelSpec` each, registered in one list.

Everything platform-specific the wiring needs comes from the specs: which platforms a process
serves (from the environment), how to build their adapters, prompt hints, default capability
modes, delivery-address grammars, secrets and their shapes, single-reader leases, the checks
of `switchboard doctor` (`bots/doctor.py`) and the admins' DM addresses (`bots/limits.py`).
Adding a platform is a package under `channels/` and one line in `PLATFORMS`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence

from bots.voice import voice_notes
from channels import terminal
from channels.attachments import DocumentReader
from channels.base import ChannelAdapter, ChannelSetup, ChannelSpec
from channels.discord.spec import SPEC as DISCORD
from channels.slack.spec import SPEC as SLACK
from channels.streaming import ReplyStreams
from channels.telegram.spec import SPEC as TELEGRAM
from channels.web.spec import SPEC as WEB
from core.access import access_commands
from core.addresses import AddressBook
from core.commands import CommandInfo, CommandRegistry, builtin_commands
from core.erasure import erasure_commands
from core.errors import ConfigError
from core.forking import session_commands
from core.profile import Profile
from core.redact import Redactor
from core.reload import ReloadResult, reload_command
from core.store.seen import SeenMarks
from core.takeover_commands import takeover_commands
from core.turns import StreamPolicy
from core.voice import VoiceSettings

__all__ = ["PLATFORMS", "REGISTERED", "Platforms", "command_registry"]

PLATFORMS: tuple[ChannelSpec, ...] = (TELEGRAM, SLACK, DISCORD, terminal.SPEC, WEB)


def command_registry(
    reload: Callable[[], Awaitable[ReloadResult]] | None = None,
) -> CommandRegistry:
    """The chat commands of this bot: the worker runs them, every platform lists them.
    `reload`: what `/reload` runs (the worker's profile reloader)."""
    return CommandRegistry(
        [
            *builtin_commands(),
            *session_commands(),
            *access_commands(),
            *takeover_commands(),
            *erasure_commands(),
            reload_command(reload),
        ]
    )


class Platforms:
    """A list of registered platforms and what the wiring derives from it."""

    def __init__(self, specs: Iterable[ChannelSpec]) -> None:
        self.specs = tuple(specs)
        names = [spec.name for spec in self.specs]
        if len(set(names)) != len(names):
            raise ValueError(f"a platform is registered twice: {names}")

    def get(self, name: str) -> ChannelSpec:
        """The spec named `name`; `ConfigError` listing the known ones."""
        for spec in self.specs:
            if spec.name == name:
                return spec
        raise ConfigError(f"unknown platform {name!r} (known: {', '.join(self.served())})")

    def served(self) -> tuple[str, ...]:
        """The platforms a gateway can run (those with an adapter builder)."""
        return tuple(spec.name for spec in self.specs if spec.build is not None)

    def prompt_hints(self) -> dict[str, str]:
        """Each platform's formatting rules for the system prompt."""
        return {spec.name: spec.prompt_hint for spec in self.specs}

    def default_modes(self) -> dict[str, str]:
        """The capability mode per platform when a profile has no [modes] table."""
        return {spec.name: spec.default_mode for spec in self.specs}

    def default_admins(self) -> list[str]:
        """The people trusted with everything when a profile has no `admins`."""
        return [f"{spec.name}:{user}" for spec in self.specs for user in spec.operators]

    def local_platforms(self) -> frozenset[str]:
        """The platforms whose chats are the operator's own (the terminal, the local web page:
        those with operators): access policies do not apply there."""
        return frozenset(spec.name for spec in self.specs if spec.operators)

    def stream_policies(self) -> dict[str, StreamPolicy]:
        """How each platform shows a running turn: how often a streamed reply may be edited
        (the worker paces its pieces so), and whether tool notes are shown at all."""
        return {
            spec.name: StreamPolicy(
                interval=spec.stream_interval,
                shows_progress=spec.shows_progress,
                edits_in_place=spec.edits_in_place,
            )
            for spec in self.specs
        }

    def command_prefixes(self) -> dict[str, str]:
        """What starts a chat command typed as a message, per platform (`/`, Slack's `!`)."""
        return {spec.name: spec.command_prefix for spec in self.specs}

    def addresses(self) -> AddressBook:
        """The delivery-address grammars of every platform."""
        return AddressBook(spec.address for spec in self.specs)

    def secret_patterns(self) -> list[str]:
        """The shapes of every platform's credentials."""
        return [pattern for spec in self.specs for pattern in spec.secret_patterns]

    def secrets(self, env: Mapping[str, str]) -> list[str]:
        """Every platform's configured secret values."""
        return [value for spec in self.specs for value in spec.secrets(env)]

    def adapter_for(
        self,
        name: str,
        env: Mapping[str, str],
        profile: Profile | None,
        menu: Sequence[CommandInfo],
        replies: ReplyStreams,
        *,
        seen: SeenMarks | None = None,
        redactor: Redactor | None = None,
    ) -> ChannelAdapter:
        """The adapter of one platform; `ConfigError` naming what is missing.

        Platform libraries are imported by the builders, so a process loads only those it
        serves. `seen` is where the adapter notes the newest message of each conversation, to
        catch up from after downtime; `redactor` scrubs the documents people send. Voice notes
        are transcribed through the profile's `[voice]` endpoint or the OpenAI one.
        """
        spec = self.get(name)
        if spec.build is None:
            raise ConfigError(f"{name} is not served by a gateway")
        required = spec.env[0] if spec.env else None
        if required and not env.get(required):
            raise ConfigError(f"{required} is not set")
        table = profile.settings.channels.get(name) if profile else None
        try:
            options = spec.parse_options(table)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        voice = voice_notes(env, profile.settings.voice if profile else VoiceSettings())
        documents = DocumentReader(profile.settings.documents if profile else None, redactor, voice)
        setup = ChannelSetup(
            env=env,
            options=options,
            menu=tuple(menu),
            replies=replies,
            seen=seen,
            documents=documents,
        )
        return spec.build(setup)

    def configured_adapters(
        self,
        env: Mapping[str, str],
        profile: Profile | None,
        menu: Sequence[CommandInfo],
        replies: ReplyStreams,
        *,
        seen: SeenMarks | None = None,
        redactor: Redactor | None = None,
    ) -> list[ChannelAdapter]:
        """An adapter for every platform the environment configures."""
        return [
            self.adapter_for(spec.name, env, profile, menu, replies, seen=seen, redactor=redactor)
            for spec in self.specs
            if spec.configured(env)
        ]

    def leader_role(self, adapter: ChannelAdapter, env: Mapping[str, str]) -> str | None:
        """The lease a gateway must hold to serve `adapter`, or None when replicas may all
        serve: `<role>:<bot>`, one per bot."""
        role = self.get(adapter.platform).leader_role(env)
        return f"{role}:{adapter.bot_key}" if role else None

    def delivers_on_standby(self, adapter: ChannelAdapter) -> bool:
        """Whether a gateway standing by for `adapter`'s leader role delivers meanwhile."""
        return self.get(adapter.platform).delivers_on_standby


REGISTERED = Platforms(PLATFORMS)
