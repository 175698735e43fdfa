"""Embeddings of remembered facts: the `[embeddings]` settings of a profile, the client of an
OpenAI-compatible `/v1/embeddings` endpoint, and how a vector is kept in the store.

Platform-neutral: texts in, vectors out, or an `EmbeddingFailed` whose message is fit for a log
line (never a key). `bots/` decides which endpoint, with which key; `core/hybrid_facts.py`
ranks facts with the vectors.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from core.endpoints import endpoint_failure
from core.errors import SwitchboardError

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = [
    "OPENAI_EMBEDDINGS_URL",
    "Embedder",
    "Embedding",
    "EmbeddingFailed",
    "EmbeddingSettings",
    "OpenAIEmbedder",
    "cosine_similarity",
    "pack_vector",
    "unpack_vector",
]

OPENAI_EMBEDDINGS_URL: Final = "https://api.openai.com/v1"
# Little-endian float32: 4 bytes a dimension, the same bytes on SQLite (BLOB) and PostgreSQL
# (bytea), and what every embedding model's precision needs.
_FLOAT32: Final = "<f"


class EmbeddingSettings(BaseModel):
    """`[embeddings]` of a profile: which endpoint embeds remembered facts for hybrid search.

    Off unless `enabled`: every remembered fact and every turn's memory search then costs one
    request. Without `base_url` the OpenAI key and base URL the bot already has are used
    (`OPENAI_API_KEY`, `OPENAI_BASE_URL`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = False
    # Another OpenAI-compatible endpoint (e.g. Ollama's `http://localhost:11434/v1`).
    base_url: str | None = None
    # The embedding model the endpoint knows; vectors of another model are never compared.
    model: str = Field(default="text-embedding-3-small", min_length=1)
    # Ask for vectors this long (models that support it, e.g. OpenAI's text-embedding-3-*).
    dimensions: int | None = Field(default=None, ge=1, le=8192)
    # The name of the environment variable holding the endpoint's key (never the key itself).
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    # How long one request may take; a failed one is tried once more.
    timeout_seconds: float = Field(default=10.0, gt=0, le=120)
    # A fact less similar than this to the question is no semantic match (cosine, -1..1).
    min_similarity: float = Field(default=0.3, ge=-1.0, le=1.0)

    @field_validator("base_url")
    @classmethod
    def _an_http_url(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("http://", "https://")):
            raise ValueError("base_url must be an http:// or https:// URL")
        return url or None


@dataclass(frozen=True)
class Embedding:
    """A fact's vector and the model that made it (vectors of two models do not compare)."""

    model: str
    vector: tuple[float, ...]


class EmbeddingFailed(SwitchboardError):
    """The endpoint did not embed the texts; the message says why, for a log line."""


class Embedder(Protocol):
    """Turns texts into vectors of one model."""

    @property
    def model(self) -> str:
        """The model whose vectors this returns."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[Embedding]:
        """One embedding per text, in order; `EmbeddingFailed` when the endpoint fails."""
        ...


def pack_vector(vector: Sequence[float]) -> bytes:
    """`vector` as little-endian float32 bytes, for the store."""
    return struct.pack(f"<{len(vector)}f", *vector)


def unpack_vector(data: bytes) -> tuple[float, ...]:
    """The vector `pack_vector` packed; `ValueError` for bytes no vector packs to."""
    if len(data) % struct.calcsize(_FLOAT32):
        raise ValueError(f"{len(data)} bytes is no float32 vector")
    return struct.unpack(f"<{len(data) // 4}f", data)


def cosine_similarity(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine of the angle between `a` and `b`: 1 same direction, 0 unrelated; 0 when either
    is all zeros or their lengths differ (they come from different models)."""
    if len(a) != len(b):
        return 0.0
    norms = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    if norms == 0.0:
        return 0.0
    return math.fsum(x * y for x, y in zip(a, b, strict=True)) / norms


def _worth_retrying(exc: BaseException) -> bool:
    import openai

    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return isinstance(exc, openai.APIConnectionError)  # timeouts included


class OpenAIEmbedder:
    """`POST {base_url}/embeddings` through the official `openai` SDK, retried by tenacity."""

    def __init__(
        self,
        *,
        api_key: SecretStr | None,
        base_url: str,
        model: str,
        dimensions: int | None = None,
        timeout: float = 10.0,
        attempts: int = 2,
        retry_wait: float = 0.5,
    ) -> None:
        """No `api_key`: a local server that takes none (the SDK still sends a placeholder)."""
        self.base_url = base_url
        self._model = model
        self._dimensions = dimensions
        self._api_key = api_key
        self._timeout = timeout
        self._attempts = attempts
        self._retry_wait = retry_wait
        self._open: AsyncOpenAI | None = None

    @property
    def model(self) -> str:
        """The model whose vectors this returns."""
        return self._model

    def _client(self) -> AsyncOpenAI:
        # Imported here: the SDK is slow to import, and a profile without embeddings never
        # pays for it. One client, kept: every turn asks for a vector.
        if self._open is None:
            from openai import AsyncOpenAI

            key = self._api_key.get_secret_value() if self._api_key else "no-key"
            self._open = AsyncOpenAI(
                api_key=key, base_url=self.base_url, timeout=self._timeout, max_retries=0
            )
        return self._open

    async def aclose(self) -> None:
        """Close the connections the client keeps."""
        if self._open is not None:
            await self._open.close()
            self._open = None

    async def embed(self, texts: Sequence[str]) -> list[Embedding]:
        """One embedding per text; `EmbeddingFailed` naming the status or the kind of failure
        (never the key, never the response body)."""
        import openai

        if not texts:
            return []
        dimensions = openai.omit if self._dimensions is None else self._dimensions
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(self._attempts),
                wait=wait_exponential(multiplier=self._retry_wait, max=4 * self._retry_wait),
                retry=retry_if_exception(_worth_retrying),
                reraise=True,
            ):
                with attempt:
                    answer = await self._client().embeddings.create(
                        model=self._model,
                        input=list(texts),
                        encoding_format="float",
                        dimensions=dimensions,
                    )
        except openai.APIError as exc:
            raise EmbeddingFailed(endpoint_failure(exc, "embeddings")) from None
        vectors = sorted(answer.data, key=lambda item: item.index)
        if len(vectors) != len(texts):
            raise EmbeddingFailed(
                f"the embeddings endpoint returned {len(vectors)} vectors for {len(texts)} texts"
            )
        return [Embedding(self._model, tuple(item.embedding)) for item in vectors]
