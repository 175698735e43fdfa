"""Images: what a conversation with one photo sends and stores, turn by turn.

One session of `TURNS` turns through the real runtime and the real `openai` client against
the fake Chat Completions server (`tests/fakes/openai_api.py`), the first turn with a photo of
`PHOTO_BYTES` bytes: the size of each request body, and of the photo's stored message row
(docs/decisions/0033-images-kept-apart.md). Sizes, not times: the same on every run.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from bench.report import console, table

TURNS = 5
PHOTO_BYTES = 300_000
# A PNG header of a 1024x768 picture; the rest is random bytes (a photo does not compress).
_HEADER = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + (1024).to_bytes(4) + (768).to_bytes(4)


async def measure() -> dict[str, Any]:
    """The request body sizes of each turn and the photo's stored row size, in bytes."""
    from core.backends.sql.store import SqlStore, sqlite_url
    from core.messages import ImagePart, Message
    from core.providers.openai import OpenAIProvider
    from tests.fakes import FakeOpenAI, Text
    from tests.integration.helpers import CONTEXT, GPT, make_runtime

    photo = _HEADER + os.urandom(PHOTO_BYTES - len(_HEADER))
    with tempfile.TemporaryDirectory() as folder:
        store = await SqlStore.open(sqlite_url(Path(folder) / "images.db"))
        try:
            async with FakeOpenAI() as fake:
                fake.script(*(Text(f"answer {n}") for n in range(TURNS)))
                provider = OpenAIProvider(api_key="test-key", base_url=fake.url)
                try:
                    runtime = make_runtime(provider, GPT, store)
                    session = await store.current_session(CONTEXT.session_key)
                    for n in range(TURNS):
                        images = [ImagePart(media_type="image/png", data=photo)] if n == 0 else []
                        async for _ in runtime.run(
                            session.id, Message.user(f"question {n}", images), CONTEXT
                        ):
                            pass
                finally:
                    await provider.aclose()
                sizes = [len(json.dumps(r.json)) for r in fake.requests]
            first = (await store.list_messages(session.id))[0]
        finally:
            await store.close()
    inline = Message.user("question 0", [ImagePart(media_type="image/png", data=photo)])
    return {
        "photo_bytes": PHOTO_BYTES,
        "request_bytes": sizes,
        "stored_row_bytes": len(first.model_dump_json(exclude={"seq", "created_at"})),
        "inline_row_bytes": len(inline.model_dump_json(exclude={"seq", "created_at"})),
    }


def images() -> dict[str, Any]:
    """Run the conversation, print the request and row sizes; the figures as JSON."""
    measured = asyncio.run(measure())
    table(
        f"images: one {PHOTO_BYTES:,}-byte photo in turn 1 of {TURNS}",
        ["turn", "request bytes"],
        [[n, size] for n, size in enumerate(measured["request_bytes"], start=1)],
    )
    console.print(
        f"the photo's message row: {measured['stored_row_bytes']:,} bytes "
        f"(with the bytes inline, as before revision 0013: {measured['inline_row_bytes']:,})"
    )
    return measured
