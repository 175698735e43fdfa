"""Which endpoint `generate_image` asks: the profile's `[images]` table, else the OpenAI key
and base URL the bot already has (`OPENAI_API_KEY`, `OPENAI_BASE_URL`); with neither, none."""

from __future__ import annotations

from collections.abc import Mapping

from bots.endpoints import openai_compatible
from core.images import OPENAI_IMAGES_URL, ImageSettings, OpenAIImages

__all__ = ["image_generator"]


def image_generator(env: Mapping[str, str], settings: ImageSettings) -> OpenAIImages | None:
    """The image endpoint, or None when none is configured (then `generate_image` is not
    offered at all). `ConfigError` when `[images] api_key_env` names a variable not set."""
    if not settings.enabled:
        return None
    endpoint = openai_compatible(
        env, "images", api_key_env=settings.api_key_env, base_url=settings.base_url
    )
    if endpoint is None:
        return None
    return OpenAIImages(
        api_key=endpoint.api_key,
        base_url=endpoint.base_url or OPENAI_IMAGES_URL,
        model=settings.model,
        size=settings.size,
        timeout=settings.timeout_seconds,
    )
