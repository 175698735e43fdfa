"""Images out of the stored history, through the real runtime and the real provider SDKs
against the fake OpenAI and Anthropic servers: the turn that received an image sends its
bytes, the turns after it a line saying what was there; the store keeps the bytes once, apart
from the message (docs/decisions/0033-images-kept-apart.md)."""

from __future__ import annotations

import asyncio
import base64
import json
import sqlite3
import struct
import zlib
from pathlib import Path

from core.backends.sql.store import SqlStore, sqlite_url
from core.messages import ImagePart, Message
from core.providers.anthropic import AnthropicProvider
from core.providers.openai import OpenAIProvider
from core.runtime import AgentRuntime
from tests.fakes import FakeAnthropic, FakeOpenAI, Text, ToolUse
from tests.integration.helpers import GPT, SONNET, completed, make_runtime, run_turn


def _png(width: int, height: int) -> bytes:
    """A real PNG of `width` x `height` grey pixels, some kilobytes of noise-free data."""
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    rows = b"".join(b"\x00" + bytes((x * 7 + y) % 256 for x in range(width)) for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 0))
        + chunk(b"IEND", b"")
    )


PHOTO = _png(64, 48)
ENCODED = base64.b64encode(PHOTO).decode("ascii")
SENT_EARLIER = "[image: 64x48 png, sent earlier]"


def _photo_message() -> Message:
    return Message.user("what is this?", [ImagePart(media_type="image/png", data=PHOTO)])


async def _three_turns(runtime: AgentRuntime, session_id: str) -> None:
    completed(await run_turn(runtime, session_id, _photo_message()))
    completed(await run_turn(runtime, session_id, "and the colour?"))
    completed(await run_turn(runtime, session_id, "thanks"))


async def test_openai_gets_the_image_bytes_in_the_receiving_turn_only(
    fake_openai: FakeOpenAI, store: SqlStore, session_id: str, gpt: OpenAIProvider
) -> None:
    fake_openai.script(Text("A grey square."), Text("Grey."), Text("You're welcome."))

    await _three_turns(make_runtime(gpt, GPT, store), session_id)

    bodies = [json.dumps(r.json) for r in fake_openai.requests]
    assert ENCODED in bodies[0]
    assert ENCODED not in bodies[1] and ENCODED not in bodies[2]
    assert SENT_EARLIER in bodies[1] and SENT_EARLIER in bodies[2]
    # The later requests are smaller than the first by about the image's base64.
    assert len(bodies[1]) < len(bodies[0]) - len(ENCODED) // 2


async def test_anthropic_gets_the_image_bytes_in_the_receiving_turn_only(
    fake_anthropic: FakeAnthropic, store: SqlStore, session_id: str, claude: AnthropicProvider
) -> None:
    fake_anthropic.script(Text("A grey square."), Text("Grey."), Text("You're welcome."))

    await _three_turns(make_runtime(claude, SONNET, store), session_id)

    bodies = [json.dumps(r.json) for r in fake_anthropic.requests]
    assert ENCODED in bodies[0]
    assert ENCODED not in bodies[1] and ENCODED not in bodies[2]
    assert SENT_EARLIER in bodies[1]


async def test_every_model_call_of_the_receiving_turn_gets_the_bytes(
    fake_openai: FakeOpenAI, store: SqlStore, session_id: str, gpt: OpenAIProvider
) -> None:
    # A tool round inside the turn: the call after it still sees the image.
    fake_openai.script(
        ToolUse([("call_01", "calculator", {"expression": "64*48"})]),
        Text("3072 pixels."),
        Text("Yes."),
    )
    runtime = make_runtime(gpt, GPT, store)

    completed(await run_turn(runtime, session_id, _photo_message()))
    completed(await run_turn(runtime, session_id, "sure?"))

    first, second, third = (json.dumps(r.json) for r in fake_openai.requests)
    assert ENCODED in first and ENCODED in second
    assert ENCODED not in third


async def test_a_turn_read_back_from_the_store_still_sends_its_image(
    fake_openai: FakeOpenAI, store: SqlStore, session_id: str, gpt: OpenAIProvider
) -> None:
    # A new runtime holds nothing: the turn's history (its own message too) comes from the
    # store, where the image is a reference; the bytes are read back for this turn.
    fake_openai.script(Text("Hello."), Text("A grey square."))
    completed(await run_turn(make_runtime(gpt, GPT, store), session_id, "hi"))

    completed(await run_turn(make_runtime(gpt, GPT, store), session_id, _photo_message()))

    assert ENCODED in json.dumps(fake_openai.requests[1].json)


async def test_the_stored_message_holds_a_reference_to_bytes_kept_apart(
    fake_openai: FakeOpenAI, store: SqlStore, session_id: str, gpt: OpenAIProvider
) -> None:
    fake_openai.script(Text("A grey square."), Text("The same one."))
    runtime = make_runtime(gpt, GPT, store)
    completed(await run_turn(runtime, session_id, _photo_message()))
    completed(await run_turn(runtime, session_id, _photo_message()))

    first, _, second, _ = await store.list_messages(session_id)
    (image,) = first.images
    assert image.data == b"" and (image.width, image.height) == (64, 48)
    assert second.images[0].ref == image.ref
    assert image.ref is not None and await store.image(session_id, image.ref) == PHOTO
    # The second turn sent its own image (the same bytes), not the first turn's.
    assert json.dumps(fake_openai.requests[1].json).count(ENCODED) == 1


def _to_previous_schema(path: Path, session_id: str, legacy_body: str) -> None:
    """Make the file what revision 0012 left: no images table, the message's image inline."""
    with sqlite3.connect(path) as db:
        db.execute("UPDATE messages SET body = ? WHERE session_id = ?", (legacy_body, session_id))
        db.execute("DROP TABLE images")
        db.execute("UPDATE alembic_version SET version_num = '0012'")
    db.close()


async def test_a_data_file_of_the_previous_schema_still_reads_its_inline_images(
    fake_openai: FakeOpenAI, tmp_path: Path, gpt: OpenAIProvider
) -> None:
    path = tmp_path / "old.db"
    old = await SqlStore.open(sqlite_url(path))
    session_id = (await old.current_session("terminal:default:it")).id
    await old.append_message(session_id, Message.user("before"))
    await old.close()
    # How a message with an image was stored before revision 0013: the bytes in its body.
    legacy = json.loads(_photo_message().model_dump_json(exclude={"seq", "created_at"}))
    legacy["content"][1] = {
        key: legacy["content"][1][key] for key in ("type", "media_type", "data")
    }
    await asyncio.to_thread(_to_previous_schema, path, session_id, json.dumps(legacy))

    store = await SqlStore.open(sqlite_url(path))
    try:
        [inline] = await store.list_messages(session_id)
        assert inline.images[0].data == PHOTO and inline.images[0].ref is None
        fake_openai.script(Text("Grey."))
        completed(await run_turn(make_runtime(gpt, GPT, store), session_id, "and the colour?"))
    finally:
        await store.close()

    body = json.dumps(fake_openai.requests[0].json)
    assert ENCODED not in body
    assert SENT_EARLIER in body
