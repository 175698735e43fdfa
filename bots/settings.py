"""Process settings from the environment (and a `.env` file): the public configuration."""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal
from urllib.parse import urlsplit

from dotenv import dotenv_values
from dotenv.parser import parse_stream
from pydantic import (
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, SettingsConfigDict

from core.backends.redis.keys import RedisKeys
from core.errors import ConfigError
from core.redact import Redactor

if TYPE_CHECKING:
    from core.tools.web_search import WebSearchSettings

__all__ = ["Settings", "load_settings"]

ENV_FILE: Final = Path(".env")


class Settings(BaseSettings):
    """Environment variables of ARCHITECTURE's configuration table."""

    model_config = SettingsConfigDict(
        env_file=ENV_FILE, env_file_encoding="utf-8", extra="ignore", populate_by_name=True
    )

    data_dir: Path = Field(default=Path("data"), alias="SWITCHBOARD_DATA_DIR")
    profile: str = Field(default="default", alias="SWITCHBOARD_PROFILE", pattern=r"^[\w.-]+$")
    profiles_dir: Path = Field(default=Path("profiles"), alias="SWITCHBOARD_PROFILES_DIR")
    provider: str | None = Field(default=None, alias="SWITCHBOARD_PROVIDER")
    model: str | None = Field(default=None, alias="SWITCHBOARD_MODEL")
    # A level, then optional NAME=LEVEL pairs (bots/logs.py); checked by `LogLevels.parse`.
    log_level: str = Field(default="warning", alias="SWITCHBOARD_LOG_LEVEL")
    log_format: Literal["text", "json"] = Field(default="text", alias="SWITCHBOARD_LOG_FORMAT")
    # The event loop of `serve`, `gateway`, `worker` and `scheduler` (bots/loop.py).
    event_loop: Literal["uvloop", "asyncio"] = Field(
        default="uvloop", alias="SWITCHBOARD_EVENT_LOOP"
    )

    anthropic_api_key: SecretStr | None = Field(default=None, alias="ANTHROPIC_API_KEY")
    anthropic_base_url: str | None = Field(default=None, alias="ANTHROPIC_BASE_URL")
    openai_api_key: SecretStr | None = Field(default=None, alias="OPENAI_API_KEY")
    openai_base_url: str | None = Field(default=None, alias="OPENAI_BASE_URL")
    # `web_search` (core/tools/web_search.py): a SearXNG instance or the Brave Search API;
    # neither set, the tool is not offered.
    searxng_url: str | None = Field(default=None, alias="SEARXNG_URL")
    brave_api_key: SecretStr | None = Field(default=None, alias="BRAVE_API_KEY")
    brave_base_url: str | None = Field(default=None, alias="BRAVE_BASE_URL")
    search_max_results: int = Field(default=5, alias="SWITCHBOARD_SEARCH_MAX_RESULTS", ge=1, le=20)
    redis_url: str | None = Field(default=None, alias="REDIS_URL")
    # Where the records are (`core/backends/sql/store/`): unset, the SQLite file in the data
    # directory.
    database_url: str | None = Field(default=None, alias="DATABASE_URL")
    # Namespace of this bot's queues, keys and sessions on a shared Redis
    # (core/backends/redis/keys.py).
    bot_id: str = Field(
        default="default",
        alias="SWITCHBOARD_BOT_ID",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
    )
    metrics_port: int | None = Field(default=None, alias="SWITCHBOARD_METRICS_PORT", ge=0, le=65535)
    metrics_host: str = Field(default="127.0.0.1", alias="SWITCHBOARD_METRICS_HOST")
    metrics_token: SecretStr | None = Field(default=None, alias="SWITCHBOARD_METRICS_TOKEN")
    # The hooks listener (bots/hooks.py): off unless the port is set; the token is required.
    hooks_port: int | None = Field(default=None, alias="SWITCHBOARD_HOOKS_PORT", ge=0, le=65535)
    hooks_host: str = Field(default="127.0.0.1", alias="SWITCHBOARD_HOOKS_HOST")
    hooks_token: SecretStr | None = Field(default=None, alias="SWITCHBOARD_HOOKS_TOKEN")

    @field_validator("redis_url")
    @classmethod
    def _a_redis_url(cls, url: str | None) -> str | None:
        """One server, a cluster or a Sentinel's master (`core/backends/redis/urls.py`), or
        unset."""
        from core.backends.redis.urls import parse_redis_url

        if url is not None:
            try:
                parse_redis_url(url)
            except ValueError as exc:
                raise PydanticCustomError("redis_url", str(exc)) from None
        return url

    @field_validator("searxng_url", "brave_base_url")
    @classmethod
    def _an_http_url(cls, url: str | None) -> str | None:
        if not url:
            return None  # set but empty: unset
        if not url.startswith(("http://", "https://")):
            raise PydanticCustomError("http_url", "an http:// or https:// URL is needed")
        return url

    @field_validator("brave_api_key")
    @classmethod
    def _a_key_or_unset(cls, key: SecretStr | None) -> SecretStr | None:
        """`BRAVE_API_KEY=` (empty, as in the env example) is unset, not an empty key."""
        return key if key is not None and key.get_secret_value().strip() else None

    @model_validator(mode="after")
    def _one_search_api(self) -> Settings:
        if self.searxng_url and self.brave_api_key is not None:
            raise PydanticCustomError(
                "one_search_api", "set SEARXNG_URL or BRAVE_API_KEY for web_search, not both"
            )
        return self

    def web_search(self) -> WebSearchSettings | None:
        """What `web_search` asks: SEARXNG_URL's instance or the Brave Search API with
        BRAVE_API_KEY; None (no tool) when neither is set."""
        from core.tools.web_search import BRAVE_BASE_URL, WebSearchSettings

        if self.searxng_url:
            return WebSearchSettings(
                api="searxng", url=self.searxng_url, max_results=self.search_max_results
            )
        if self.brave_api_key is not None:
            return WebSearchSettings(
                api="brave",
                url=self.brave_base_url or BRAVE_BASE_URL,
                api_key=self.brave_api_key,
                max_results=self.search_max_results,
            )
        return None

    # The whole environment (with `.env`), for the chat platforms: each reads its own
    # variables (channels/<platform>/spec.py), so adding one changes nothing here.
    _environ: dict[str, str] = PrivateAttr(default_factory=dict)

    @property
    def environ(self) -> Mapping[str, str]:
        """The variables the chat platforms read their settings from."""
        return self._environ

    def with_environ(self, environ: Mapping[str, str]) -> Settings:
        """A copy of these settings with `environ` as the platforms' variables."""
        copy: Settings = self.model_copy()
        copy._environ = dict(environ)
        return copy

    def secrets(self) -> list[str]:
        """Every configured secret value, for scrubbing logs and tool output."""
        from bots.platforms import REGISTERED

        values = (
            self.anthropic_api_key,
            self.openai_api_key,
            self.brave_api_key,
            self.metrics_token,
            self.hooks_token,
        )
        own = [v.get_secret_value() for v in values if v is not None]
        if self.database_url:
            with contextlib.suppress(ValueError):
                password = urlsplit(self.database_url).password
                if password:
                    own.append(password)
        return own + REGISTERED.secrets(self.environ)

    def redactor(self) -> Redactor:
        """A scrubber of the configured secrets and of every platform's credential shapes."""
        from bots.platforms import REGISTERED

        return Redactor(self.secrets(), patterns=REGISTERED.secret_patterns())

    @property
    def redis_keys(self) -> RedisKeys:
        """The Redis keys of this bot's namespace (`SWITCHBOARD_BOT_ID`)."""
        return RedisKeys(self.bot_id)

    @property
    def database_path(self) -> Path:
        """The SQLite file of the embedded deployment (its queues, and its records unless
        DATABASE_URL names another database)."""
        return self.data_dir / "switchboard.db"

    @property
    def store_url(self) -> str:
        """The database of the records: DATABASE_URL, else the SQLite file in the data
        directory."""
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{self.database_path}"

    @property
    def database_is_sqlite(self) -> bool:
        """Whether the records are in a SQLite file (one machine only)."""
        return not self.database_url or self.database_url.startswith("sqlite")


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment with command-line overrides; `ConfigError` if invalid."""
    given = {k: v for k, v in overrides.items() if v is not None}
    check_env_file(ENV_FILE)
    try:
        settings = Settings(**given)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = str(first["loc"][0]) if first["loc"] else "settings"
        name = Settings.model_fields[field].alias if field in Settings.model_fields else field
        raise ConfigError(f"{name}: {first['msg']}") from None
    return settings.with_environ(_environ())


def _environ() -> dict[str, str]:
    """`.env` under the process environment, as pydantic-settings reads them."""
    from_file = dotenv_values(ENV_FILE) if ENV_FILE.is_file() else {}
    return {**{k: v for k, v in from_file.items() if v is not None}, **os.environ}


def check_env_file(path: Path) -> None:
    """`ConfigError` naming the file and line when `path` exists but cannot be read whole.

    python-dotenv skips a line it cannot parse with a warning, so a key with an unclosed quote
    would silently vanish (and the bot fall back to the demo model). Values are never shown:
    the line may hold a secret.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path} line {line}: not UTF-8 text; save the file as UTF-8") from None
    for binding in parse_stream(io.StringIO(text)):
        if binding.error:
            name = binding.original.string.partition("=")[0].strip()
            what = f"the value of {name}" if "=" in binding.original.string else "this line"
            raise ConfigError(
                f"{path} line {binding.original.line}: cannot parse {what}; write NAME=value "
                "(quote values with spaces, and close every quote)"
            )
