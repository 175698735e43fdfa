"""Where an OpenAI-compatible side endpoint is (transcription `[voice]`, images `[images]`):
the profile table's own `base_url` and key variable, else the OpenAI key and base URL the bot
already has (`OPENAI_API_KEY`, `OPENAI_BASE_URL`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import SecretStr

from core.errors import ConfigError

__all__ = ["Endpoint", "openai_compatible"]


@dataclass(frozen=True)
class Endpoint:
    """An endpoint's key (None: a local server that takes none) and base URL (None: OpenAI's)."""

    api_key: SecretStr | None
    base_url: str | None


def openai_compatible(
    env: Mapping[str, str], table: str, *, api_key_env: str | None, base_url: str | None
) -> Endpoint | None:
    """The endpoint a profile table names, or None when neither it nor the environment names
    one. `ConfigError` when `api_key_env` names a variable that is not set."""
    key: SecretStr | None = None
    if api_key_env:
        value = env.get(api_key_env, "").strip()
        if not value:
            raise ConfigError(f"[{table}] api_key_env: {api_key_env} is not set")
        key = SecretStr(value)
    elif base_url is None:
        value = env.get("OPENAI_API_KEY", "").strip()
        key = SecretStr(value) if value else None
    # Without a base_url of the table's own: OpenAI's, or the OpenAI-compatible server the bot
    # uses.
    url = base_url or env.get("OPENAI_BASE_URL", "").strip() or None
    if key is None and url is None:
        return None
    return Endpoint(key, url)
