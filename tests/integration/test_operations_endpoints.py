"""`/metrics`, `/healthz` and `/readyz` over real HTTP on 127.0.0.1, token required."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import aiohttp
import pytest

from bots.operations import OperationsServer, OperationsSettings
from core.errors import ConfigError
from core.metrics import Metrics
from core.readiness import Readiness

TOKEN = "t" * 32


@pytest.fixture
async def server() -> AsyncIterator[OperationsServer]:
    running = OperationsServer(
        OperationsSettings(port=0, token=TOKEN), metrics=Metrics(), readiness=Readiness()
    )
    await running.start()
    yield running
    await running.close()


async def get(
    server: OperationsServer, path: str, token: str | None = TOKEN, scheme: str = "Bearer"
) -> tuple[int, str]:
    status, _, text = await exchange(server, path, token, scheme)
    return status, text


async def exchange(
    server: OperationsServer, path: str, token: str | None = TOKEN, scheme: str = "Bearer"
) -> tuple[int, dict[str, str], str]:
    """The status, headers and text of the answer."""
    headers = {"Authorization": f"{scheme} {token}"} if token is not None else {}
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{server.port}{path}", headers=headers) as response,
    ):
        return response.status, dict(response.headers), await response.text()


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "Bearer"])
async def test_the_bearer_scheme_is_read_in_any_case(server: OperationsServer, scheme: str) -> None:
    assert await get(server, "/healthz", scheme=scheme) == (200, "ok")


async def test_wrong_tokens_from_one_address_are_throttled(server: OperationsServer) -> None:
    wrong = [(await get(server, "/metrics", f"guess-{n}"))[0] for n in range(10)]
    status, headers, text = await exchange(server, "/metrics", "guess-10")
    # Past the limit the address waits, whatever it sends: no guess is checked meanwhile.
    right, right_headers, _ = await exchange(server, "/healthz")

    assert wrong == [401] * 10
    assert (status, text) == (429, "too many wrong tokens")
    assert 0 < int(headers["Retry-After"]) <= 60
    assert right == 429 and "Retry-After" in right_headers


@pytest.mark.parametrize("path", ["/metrics", "/healthz", "/readyz"])
@pytest.mark.parametrize("token", [None, "wrong", TOKEN + "x"])
async def test_every_endpoint_wants_the_token(
    server: OperationsServer, path: str, token: str | None
) -> None:
    status, body = await get(server, path, token)
    assert (status, body) == (401, "unauthorized")


async def test_metrics_show_what_was_recorded(server: OperationsServer) -> None:
    server.metrics.turns.labels(platform="telegram", mode="safe-chat", outcome="completed").inc()
    server.metrics.turn_seconds.labels(platform="telegram").observe(1.5)

    status, body = await get(server, "/metrics")

    assert status == 200
    assert (
        'switchboard_turns_total{mode="safe-chat",outcome="completed",platform="telegram"} 1.0'
        in body
    )
    assert 'switchboard_turn_seconds_bucket{le="2.0",platform="telegram"} 1.0' in body
    assert 'switchboard_turn_seconds_bucket{le="1.0",platform="telegram"} 0.0' in body


async def test_readiness_follows_the_loops_and_the_checks(server: OperationsServer) -> None:
    readiness = server.readiness
    bus_answers = asyncio.Event()
    bus_answers.set()

    async def bus() -> None:
        if not bus_answers.is_set():
            raise ConnectionError("Connection refused")

    readiness.add_check("bus", bus)
    readiness.up("telegram delivery")
    assert (await get(server, "/readyz"))[0] == 200

    readiness.down("telegram delivery", "the bus does not answer")
    bus_answers.clear()
    status, body = await get(server, "/readyz")
    assert status == 503
    assert json.loads(body) == {
        "ready": False,
        "checks": {
            "telegram delivery": "the bus does not answer",
            "bus": "ConnectionError: Connection refused",
        },
    }
    assert await get(server, "/healthz") == (200, "ok")  # alive all along

    bus_answers.set()
    readiness.up("telegram delivery")
    status, body = await get(server, "/readyz")
    assert status == 200
    assert json.loads(body)["ready"] is True


async def test_a_check_that_hangs_counts_as_not_ready() -> None:
    readiness = Readiness(check_timeout=0.05)
    never = asyncio.Event()

    async def hangs() -> None:
        await never.wait()

    readiness.add_check("store", hangs)
    report = await readiness.report()

    assert report.ready is False
    assert report.details == {"store": "no answer within 0.05s"}


def test_a_short_token_is_refused_at_start() -> None:
    with pytest.raises(ConfigError, match="at least 24 characters"):
        OperationsSettings(port=9100, token="short")
