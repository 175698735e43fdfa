"""Process settings from the environment (and a `.env` file): the public configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from core.errors import ConfigError
from core.redis_keys import RedisKeys

__all__ = ["Settings", "load_settings"]

LogLevel = Literal["debug", "info", "warning", "error"]


class Settings(BaseSettings):
    """Environment variables of ARCHITECTURE's configuration table."""

    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", populate_by_name=True
    )

    data_dir: Path = Field(default=Path("data"), alias="SWITCHBOARD_DATA_DIR")
    profile: str = Field(default="default", alias="SWITCHBOARD_PROFILE", pattern=r"^[\w.-]+$")
    profiles_dir: Path = Field(default=Path("profiles"), alias="SWITCHBOARD_PROFILES_DIR")
    provider: str | None = Field(default=None, alias="SWITCHBOARD_PROVIDER")
    model: str | None = Field(default=None, alias="SWITCHBOARD_MODEL")
    log_level: LogLevel = Field(default="warning", alias="SWITCHBOARD_LOG_LEVEL")

    anthropic_api_key: SecretStr | None = Field(default=None, alias="ANTHROPIC_API_KEY")
    anthropic_base_url: str | None = Field(default=None, alias="ANTHROPIC_BASE_URL")
    openai_api_key: SecretStr | None = Field(default=None, alias="OPENAI_API_KEY")
    openai_base_url: str | None = Field(default=None, alias="OPENAI_BASE_URL")
    telegram_bot_token: SecretStr | None = Field(default=None, alias="TELEGRAM_BOT_TOKEN")
    telegram_api_url: str = Field(default="https://api.telegram.org", alias="TELEGRAM_API_URL")
    telegram_webhook_url: str | None = Field(default=None, alias="TELEGRAM_WEBHOOK_URL")
    telegram_webhook_secret: SecretStr | None = Field(default=None, alias="TELEGRAM_WEBHOOK_SECRET")
    telegram_webhook_port: int = Field(default=8443, alias="TELEGRAM_WEBHOOK_PORT", ge=0, le=65535)
    redis_url: str | None = Field(default=None, alias="REDIS_URL")
    # Namespace of this bot's queues, keys and sessions on a shared Redis (core/redis_keys.py).
    bot_id: str = Field(
        default="default",
        alias="SWITCHBOARD_BOT_ID",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
    )
    slack_bot_token: SecretStr | None = Field(default=None, alias="SLACK_BOT_TOKEN")
    slack_signing_secret: SecretStr | None = Field(default=None, alias="SLACK_SIGNING_SECRET")
    slack_app_token: SecretStr | None = Field(default=None, alias="SLACK_APP_TOKEN")
    slack_api_url: str = Field(default="https://slack.com/api/", alias="SLACK_API_URL")
    slack_port: int = Field(default=3000, alias="SLACK_PORT", ge=0, le=65535)
    discord_bot_token: SecretStr | None = Field(default=None, alias="DISCORD_BOT_TOKEN")
    discord_api_url: str = Field(default="https://discord.com/api/v10", alias="DISCORD_API_URL")
    discord_gateway_url: str | None = Field(default=None, alias="DISCORD_GATEWAY_URL")

    def secrets(self) -> list[str]:
        """Every configured secret value, for scrubbing logs and tool output."""
        values = (
            self.anthropic_api_key,
            self.openai_api_key,
            self.telegram_bot_token,
            self.telegram_webhook_secret,
            self.slack_bot_token,
            self.slack_signing_secret,
            self.slack_app_token,
            self.discord_bot_token,
        )
        return [v.get_secret_value() for v in values if v is not None]

    @property
    def redis_keys(self) -> RedisKeys:
        """The Redis keys of this bot's namespace (`SWITCHBOARD_BOT_ID`)."""
        return RedisKeys(self.bot_id)

    @property
    def database_path(self) -> Path:
        """The SQLite file of the embedded deployment."""
        return self.data_dir / "switchboard.db"


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment with command-line overrides; `ConfigError` if invalid."""
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**given)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = str(first["loc"][0]) if first["loc"] else "settings"
        name = Settings.model_fields[field].alias if field in Settings.model_fields else field
        raise ConfigError(f"{name}: {first['msg']}") from None
