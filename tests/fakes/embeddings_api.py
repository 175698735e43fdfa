"""A fake OpenAI-compatible `/v1/embeddings` endpoint with deterministic, made-up vectors.

THE VECTORS ARE A FAKE, not a language model: `fake_vector` folds a text into its search terms
(`core.facts.search_terms`), maps each through a small hand-written table of synonyms to one
concept ("puppy" and "dog" to `dog`), drops a plural "s", and hashes each concept to one of
`dims` dimensions with a sign (the hashing trick); the vector is that bag of concepts,
normalised. Two texts are similar when they share words or listed synonyms, and only then. It
is enough to drive the real `openai` client and to test and measure how `HybridFacts` fuses
rankings, and says nothing about how well a real embedding model finds facts.
"""

from __future__ import annotations

import base64
import hashlib
import math
import struct
from collections import deque
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web

from core.facts import search_terms
from tests.fakes.local_server import LocalServer

__all__ = ["CONCEPTS", "EmbeddingRequest", "FakeEmbeddings", "fake_vector"]

# Words that mean the same thing to the fake, each group under one concept.
CONCEPTS: Final[dict[str, frozenset[str]]] = {
    "dog": frozenset({"dog", "puppy", "hound", "pet"}),
    "cat": frozenset({"cat", "kitten", "kitty"}),
    "allergy": frozenset({"allergy", "allergic", "allergie", "intolerant"}),
    "job": frozenset({"job", "work", "employer", "career", "profession", "occupation"}),
    "home": frozenset({"home", "live", "reside", "hometown", "address"}),
    "birthday": frozenset({"birthday", "born", "birth"}),
    "car": frozenset({"car", "vehicle", "drive", "automobile"}),
    "spouse": frozenset({"wife", "husband", "spouse", "partner", "married"}),
    "child": frozenset({"child", "children", "kid", "son", "daughter"}),
    "exercise": frozenset({"exercise", "sport", "running", "run", "marathon", "gym", "jog"}),
    "travel": frozenset({"travel", "trip", "vacation", "holiday", "journey"}),
    "music": frozenset({"music", "instrument", "guitar", "piano", "violin", "band"}),
    "food": frozenset({"food", "eat", "dish", "cuisine", "meal", "diet"}),
    "drink": frozenset({"drink", "coffee", "tea", "beverage", "espresso"}),
    "language": frozenset({"language", "speak", "fluent", "french", "spanish", "german"}),
    "doctor": frozenset({"doctor", "physician", "dentist", "medical", "gp"}),
    "book": frozenset({"book", "read", "novel", "reading", "author"}),
    "study": frozenset(
        {"study", "studied", "degree", "university", "college", "school", "graduated"}
    ),
}
_CONCEPT_OF: Final = {word: concept for concept, words in CONCEPTS.items() for word in words}
EMBEDDINGS: Final = "/v1/embeddings"


def _concept(term: str) -> str:
    if term in _CONCEPT_OF:
        return _CONCEPT_OF[term]
    single = term[:-1] if len(term) > 3 and term.endswith("s") else term
    return _CONCEPT_OF.get(single, single)


def fake_vector(text: str, dims: int = 256) -> list[float]:
    """The fake's deterministic vector of `text` (see the module): unit length, or all zeros
    for a text without search terms."""
    vector = [0.0] * dims
    for term in search_terms(text):
        digest = hashlib.blake2b(_concept(term).encode(), digest_size=8).digest()
        number = int.from_bytes(digest, "little")
        vector[number % dims] += 1.0 if number >> 63 else -1.0
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector


@dataclass(frozen=True)
class EmbeddingRequest:
    """One request the fake received."""

    model: str
    texts: tuple[str, ...]
    dimensions: int | None
    api_key: str | None


class FakeEmbeddings(LocalServer):
    """`POST /v1/embeddings` on 127.0.0.1; `url` is the SDK's `base_url` (ends in `/v1`)."""

    def __init__(self, *, api_key: str | None = "test-key", dims: int = 256) -> None:
        """`api_key` None: a local server that takes any key, or none."""
        self.api_key = api_key
        self.dims = dims
        self.requests: list[EmbeddingRequest] = []
        super().__init__()
        self._failures: deque[int] = deque()

    @property
    def url(self) -> str:
        """The value to pass to the SDK as `base_url`."""
        return f"{self.origin}/v1"

    def fail(self, *statuses: int) -> None:
        """The next requests answer with these HTTP statuses, one each, in order."""
        self._failures.extend(statuses)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.method != "POST" or request.path != EMBEDDINGS:
            return _error(404, f"Invalid URL ({request.method} {request.path})", "unknown_url")
        authorization = request.headers.get("authorization", "")
        key = authorization.removeprefix("Bearer ").strip() or None
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return _error(400, "We could not parse the JSON body of your request.")
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        dimensions = body.get("dimensions")
        self.requests.append(
            EmbeddingRequest(
                str(body.get("model", "")),
                tuple(str(t) for t in texts) if isinstance(texts, list) else (),
                dimensions if isinstance(dimensions, int) else None,
                key,
            )
        )
        if self.api_key is not None and key != self.api_key:
            return _error(401, "Incorrect API key provided.", "invalid_api_key")
        if self._failures:
            return _error(self._failures.popleft(), "The fake was told to fail.", "server_error")
        if not body.get("model"):
            return _error(400, "Missing required parameter: 'model'.", "missing_required_parameter")
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return _error(400, "'input' must be a string or a list of strings.")
        return web.json_response(self._embeddings(body, texts, dimensions))

    def _embeddings(self, body: dict[str, Any], texts: list[str], dimensions: object) -> Any:
        dims = dimensions if isinstance(dimensions, int) and dimensions > 0 else self.dims
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(texts):
            vector = fake_vector(text, dims)
            encoded: object = (
                base64.b64encode(struct.pack(f"<{dims}f", *vector)).decode()
                if as_base64
                else vector
            )
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        tokens = sum(len(text.split()) for text in texts)
        return {
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }


def _error(status: int, message: str, code: str = "invalid_request_error") -> web.Response:
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return web.json_response(
        {"error": {"message": message, "type": kind, "param": None, "code": code}}, status=status
    )
