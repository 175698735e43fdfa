"""Which endpoint embeds remembered facts: the profile's `[embeddings]` table, when `enabled`,
with its own `base_url` and key variable, else the OpenAI key and base URL the bot already has
(`OPENAI_API_KEY`, `OPENAI_BASE_URL`)."""

from __future__ import annotations

from collections.abc import Mapping

from bots.endpoints import openai_compatible
from core.embeddings import OPENAI_EMBEDDINGS_URL, EmbeddingSettings, OpenAIEmbedder
from core.errors import ConfigError

__all__ = ["fact_embedder"]


def fact_embedder(env: Mapping[str, str], settings: EmbeddingSettings) -> OpenAIEmbedder | None:
    """The embedder of remembered facts, or None when `[embeddings]` is not enabled (memory is
    then searched by keyword alone). `ConfigError` when it is enabled but names no endpoint,
    or `api_key_env` names a variable that is not set."""
    if not settings.enabled:
        return None
    endpoint = openai_compatible(
        env, "embeddings", api_key_env=settings.api_key_env, base_url=settings.base_url
    )
    if endpoint is None:
        raise ConfigError(
            "[embeddings] is enabled but names no endpoint: set base_url, or OPENAI_API_KEY"
        )
    return OpenAIEmbedder(
        api_key=endpoint.api_key,
        base_url=endpoint.base_url or OPENAI_EMBEDDINGS_URL,
        model=settings.model,
        dimensions=settings.dimensions,
        timeout=settings.timeout_seconds,
    )
