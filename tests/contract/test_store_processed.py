"""The processed-marks contract (`ProcessedMarks`).

Run against every implementation by the `store` fixture of `tests/contract/conftest.py`.
"""

from __future__ import annotations

import asyncio

from core.store import (
    ProcessedMarks,
)

# Processed inbound ids


async def test_mark_processed_is_true_only_the_first_time(store: ProcessedMarks) -> None:
    assert await store.is_processed("telegram:update:1") is False

    assert await store.mark_processed("telegram:update:1") is True
    assert await store.mark_processed("telegram:update:1") is False

    assert await store.is_processed("telegram:update:1") is True
    assert await store.is_processed("telegram:update:2") is False


async def test_concurrent_mark_processed_has_one_winner(store: ProcessedMarks) -> None:
    results = await asyncio.gather(*(store.mark_processed("slack:evt:9") for _ in range(10)))

    assert results.count(True) == 1
    assert await store.is_processed("slack:evt:9") is True
