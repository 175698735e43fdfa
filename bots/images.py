"""Which endpoint `generate_image` asks: the profile's `[images]` table, else the OpenAI key
and base URL the bot already has (`OPENAI_API_KEY`, `OPENAI_BASE_URL`); with neither, none."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import SecretStr

from core.errors import ConfigError
from core.images import OPENAI_IMAGES_URL, ImageSettings, OpenAIImages

__all__ = ["image_generator"]


def image_generator(env: Mapping[str, str], settings: ImageSettings) -> OpenAIImages | None:
    """The image endpoint, or None when none is configured (then `generate_image` is not
    offered at all). `ConfigError` when `[images] api_key_env` names a variable not set."""
    if not settings.enabled:
        return None
    key: SecretStr | None = None
    if settings.api_key_env:
        value = env.get(settings.api_key_env, "").strip()
        if not value:
            raise ConfigError(f"[images] api_key_env: {settings.api_key_env} is not set")
        key = SecretStr(value)
    elif settings.base_url is None:
        value = env.get("OPENAI_API_KEY", "").strip()
        key = SecretStr(value) if value else None
    base_url = settings.base_url or env.get("OPENAI_BASE_URL", "").strip() or None
    if key is None and base_url is None:
        return None
    return OpenAIImages(
        api_key=key,
        base_url=base_url or OPENAI_IMAGES_URL,
        model=settings.model,
        size=settings.size,
        timeout=settings.timeout_seconds,
    )
