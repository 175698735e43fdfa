"""`BadRequestLog`: one WARNING line per refused request, at most so many a minute."""

from __future__ import annotations

import logging

import pytest

from channels.bad_requests import BadRequestLog


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_flood_is_cut_to_the_per_minute_budget_and_the_rest_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    clock = Clock()
    refused = BadRequestLog(logging.getLogger("test.bad"), per_minute=3, clock=clock)

    for _ in range(10):
        refused.refused(400, "not JSON", "127.0.0.1")
    clock.now += 60.0
    refused.refused(401, "bad signature", "127.0.0.2")

    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "refused a request from 127.0.0.1 with 400: not JSON",
        "refused a request from 127.0.0.1 with 400: not JSON",
        "refused a request from 127.0.0.1 with 400: not JSON",
        "refused a request from 127.0.0.2 with 401: bad signature (7 more not logged)",
    ]
    assert all(r.levelno == logging.WARNING and not r.exc_info for r in caplog.records)
