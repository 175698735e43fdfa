"""`pick_session`: which of a chat's sessions `/switch WORD` means."""

from __future__ import annotations

from core.forking import pick_session
from core.store.log import SessionRecord
from tests.contract.store_support import START


def _session(session_id: str, name: str | None = None) -> SessionRecord:
    return SessionRecord(
        id=session_id, key="telegram:b:1", created_at=START, updated_at=START, name=name
    )


SESSIONS = [_session("abc123000001", "otters"), _session("abc124000002"), _session("ffff00000003")]


def test_an_id_a_name_in_any_case_or_a_unique_start_of_an_id() -> None:
    assert pick_session(SESSIONS, "abc124000002") == SESSIONS[1]
    assert pick_session(SESSIONS, " Otters ") == SESSIONS[0]
    assert pick_session(SESSIONS, "ffff") == SESSIONS[2]
    assert pick_session(SESSIONS, "abc124") == SESSIONS[1]


def test_an_ambiguous_or_too_short_start_and_a_stranger_are_nothing() -> None:
    assert pick_session(SESSIONS, "abc1") is None  # two ids start so
    assert pick_session(SESSIONS, "fff") is None  # fewer than four characters
    assert pick_session(SESSIONS, "beavers") is None
    assert pick_session(SESSIONS, "") is None
    assert pick_session([], "otters") is None
