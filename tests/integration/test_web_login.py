"""Signing in to the web page: wrong tokens are throttled per address; the generated token is
kept in the data folder so login links outlive a restart."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from bots.web import TOKEN_FILE, kept_token
from core.backends.sql.store import SqlStore
from core.providers.scripted import ScriptedProvider
from core.throttle import TokenThrottle
from tests.integration.web_support import PATIENCE, TOKEN, Page, running_page

WRONG = "not-the-token-0123456789"
# The default number of wrong tokens, over a window no slow machine outlasts mid-test.
RATE = f"{TokenThrottle().rate.amount}/day"


@pytest.fixture
async def page(store: SqlStore) -> AsyncIterator[Page]:
    throttle = TokenThrottle(RATE)
    async with running_page(store, ScriptedProvider([]), throttle=throttle) as running:
        yield running


async def _sign_in(http: aiohttp.ClientSession, page: Page, token: str) -> aiohttp.ClientResponse:
    async with http.post(
        page.base + "/login",
        data={"token": token},
        headers={"Origin": page.origin},
        allow_redirects=False,
    ) as response:
        await response.read()
        return response


async def test_wrong_tokens_from_one_address_are_throttled_with_retry_after(page: Page) -> None:
    # A browser signed in before the guessing starts.
    signed_in = await _sign_in(page.http, page, TOKEN)
    assert signed_in.status == 303 and signed_in.headers["Location"] == "/"
    allowed = page.server.throttle.rate.amount
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=PATIENCE)) as guesser:
        for _ in range(allowed):
            response = await _sign_in(guesser, page, WRONG)
            assert (response.status, response.headers["Location"]) == (303, "/login#failed")
        throttled = await _sign_in(guesser, page, WRONG)
        assert throttled.status == 429
        assert int(throttled.headers["Retry-After"]) >= 1
        # The right token too: otherwise the answer would still tell a guess right or wrong.
        assert (await _sign_in(guesser, page, TOKEN)).status == 429
        async with guesser.get(page.base + "/api/sessions", headers=page.bearer()) as response:
            assert response.status == 429
            assert "try again" in (await response.json())["error"]
    # The browser already signed in goes on as before.
    async with page.http.get(page.base + "/api/sessions") as response:
        assert response.status == 200


async def test_wrong_bearer_tokens_count_as_guesses(page: Page) -> None:
    wrong = {"Authorization": f"Bearer {WRONG}"}
    for _ in range(page.server.throttle.rate.amount):
        async with page.http.get(page.base + "/api/sessions", headers=wrong) as response:
            assert response.status == 401
    async with page.http.get(page.base + "/api/sessions", headers=page.bearer()) as response:
        assert response.status == 429
        assert int(response.headers["Retry-After"]) >= 1


async def test_right_tokens_are_never_counted(page: Page) -> None:
    for _ in range(page.server.throttle.rate.amount * 2):
        async with page.http.get(page.base + "/api/sessions", headers=page.bearer()) as response:
            assert response.status == 200
    assert (await _sign_in(page.http, page, TOKEN)).status == 303


def test_the_generated_token_is_kept_owner_only_and_reused(tmp_path: Path) -> None:
    path = tmp_path / "data" / TOKEN_FILE
    made = kept_token(path)
    assert len(made) >= 16
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    assert kept_token(path) == made
    path.chmod(0o644)
    assert kept_token(path) == made
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_kept_token_too_short_to_be_one_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / TOKEN_FILE
    path.write_text("short\n")
    path.chmod(0o644)
    made = kept_token(path)
    assert made != "short" and len(made) >= 16
    assert path.read_text().strip() == made
    assert path.stat().st_mode & 0o777 == 0o600
