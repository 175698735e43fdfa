"""`python -m bench images`: the photo's bytes go out in the first request only and its stored
row holds a reference, as decision 0033 reports."""

from __future__ import annotations

from bench.images import PHOTO_BYTES, TURNS, measure


async def test_the_photo_is_sent_in_its_turn_and_stored_apart() -> None:
    measured = await measure()

    first, *later = measured["request_bytes"]
    assert len(later) == TURNS - 1
    assert first > PHOTO_BYTES and all(size < 5_000 for size in later)
    assert measured["stored_row_bytes"] < 1_000 < PHOTO_BYTES < measured["inline_row_bytes"]
