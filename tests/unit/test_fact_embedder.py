"""The `[embeddings]` table and which endpoint `bots/` chooses to embed remembered facts."""

from __future__ import annotations

import pytest

from bots.embeddings import fact_embedder
from core.embeddings import OPENAI_EMBEDDINGS_URL, EmbeddingSettings, OpenAIEmbedder
from core.errors import ConfigError
from core.profile import Profile


def test_the_embeddings_table_is_checked_and_off_by_default() -> None:
    settings = Profile.parse("p", {}, source="profile.toml", identity=None).settings.embeddings
    assert settings == EmbeddingSettings()
    assert (settings.enabled, settings.model, settings.dimensions) == (
        False,
        "text-embedding-3-small",
        None,
    )
    for bad in (
        {"base_url": "ftp://host"},
        {"api_key_env": "sk-a real key"},
        {"dimensions": 0},
        {"min_similarity": 2},
        {"unknown": 1},
    ):
        with pytest.raises(ValueError):
            EmbeddingSettings.model_validate(bad)
    with pytest.raises(ConfigError, match=r"profile\.toml: embeddings\.dimensions"):
        Profile.parse("p", {"embeddings": {"dimensions": -1}}, source="profile.toml", identity=None)


def test_no_embedder_unless_enabled_even_with_an_openai_key() -> None:
    assert fact_embedder({"OPENAI_API_KEY": "sk-test"}, EmbeddingSettings()) is None


def test_enabled_it_uses_the_openai_key_and_base_url_by_default() -> None:
    on = EmbeddingSettings(enabled=True, dimensions=256)
    embedder = fact_embedder({"OPENAI_API_KEY": "sk-test"}, on)
    assert isinstance(embedder, OpenAIEmbedder)
    assert (embedder.base_url, embedder.model) == (OPENAI_EMBEDDINGS_URL, "text-embedding-3-small")
    local = fact_embedder({"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}, on)
    assert isinstance(local, OpenAIEmbedder)
    assert local.base_url == "http://127.0.0.1:11434/v1"


def test_a_table_names_its_own_endpoint_and_key_variable() -> None:
    own = EmbeddingSettings(enabled=True, base_url="http://127.0.0.1:11434/v1", model="nomic")
    embedder = fact_embedder({}, own)
    assert isinstance(embedder, OpenAIEmbedder)
    assert (embedder.base_url, embedder.model) == ("http://127.0.0.1:11434/v1", "nomic")
    keyed = EmbeddingSettings(enabled=True, api_key_env="EMBED_KEY")
    assert isinstance(fact_embedder({"EMBED_KEY": "k"}, keyed), OpenAIEmbedder)
    with pytest.raises(ConfigError, match=r"^\[embeddings\] api_key_env: EMBED_KEY is not set$"):
        fact_embedder({"OPENAI_API_KEY": "sk-test"}, keyed)


def test_enabled_without_any_endpoint_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"^\[embeddings\] is enabled but names no endpoint"):
        fact_embedder({}, EmbeddingSettings(enabled=True))
