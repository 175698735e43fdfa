"""The end-to-end tier: every test in this folder is marked `e2e` (`pytest -m "not e2e"` leaves
them all out); `make test` runs the folder as a pytest run of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests collected from this folder (the hook sees every collected test)."""
    for item in items:
        if HERE in item.path.resolve().parents:
            item.add_marker(pytest.mark.e2e)
