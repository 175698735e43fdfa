"""The kept-tool-outputs contract (`ToolOutputs`), on SQLite and PostgreSQL.

Run against every implementation by the `store` fixture of `tests/contract/conftest.py`.
"""

from __future__ import annotations

from core.messages import Message
from core.store import Store

LONG = "".join(f"{i:06d}\n" for i in range(20_000))  # 140,000 characters, all of them distinct


async def test_a_kept_output_is_read_back_whole_in_its_session_only(store: Store) -> None:
    session = await store.current_session("telegram:bot:1")
    other = await store.current_session("telegram:bot:2")

    await store.keep_tool_output(session.id, "call_1", LONG)

    assert await store.tool_output(session.id, "call_1") == LONG
    assert await store.tool_output(other.id, "call_1") is None
    assert await store.tool_output(session.id, "call_2") is None


async def test_keeping_the_same_call_again_changes_nothing(store: Store) -> None:
    session = await store.current_session("telegram:bot:1")

    await store.keep_tool_output(session.id, "call_1", "the first")
    await store.keep_tool_output(session.id, "call_1", "the first")

    assert await store.tool_output(session.id, "call_1") == "the first"


async def test_deleting_a_session_deletes_its_kept_outputs(store: Store) -> None:
    session = await store.current_session("telegram:bot:1")
    await store.append_message(session.id, Message.user("hi"))
    await store.keep_tool_output(session.id, "call_1", LONG)

    assert await store.delete_session(session.id)

    assert await store.tool_output(session.id, "call_1") is None
