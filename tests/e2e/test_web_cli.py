"""`switchboard serve` and `switchboard web` serving the web page, as subprocesses.

Embedded, `serve` with no platform token serves the page alone and prints a login link
(whose token is kept in the data folder, so it outlives a restart);
distributed, `switchboard web` hands the page's chats to a separate `switchboard worker` over
Redis. Both answer with the offline demo model. Bad settings are one line and exit 1.
"""

from __future__ import annotations

import socket
from pathlib import Path

import aiohttp
import pytest

from tests.e2e.processes import Deployment, clean_env, run_once
from tests.integration.web_support import parse_sse
from tests.redis_server import free_port

pytestmark = pytest.mark.e2e

TOKEN = "e2e-web-token-0123456789"


async def _chat(http: aiohttp.ClientSession, base: str, headers: dict[str, str]) -> str:
    """The final reply to an arithmetic question, asked through POST /api/chat."""
    async with http.post(
        f"{base}/api/chat", json={"text": "what is 17*23?"}, headers=headers
    ) as response:
        assert response.status == 200, await response.text()
        events = parse_sse(await response.text())
    assert any(name == "progress" and "calculator" in data["text"] for name, data in events)
    name, reply = events[-1]
    assert name == "reply"
    return str(reply["text"])


async def test_serve_without_platform_tokens_serves_the_page_with_a_login_link(
    tmp_path: Path,
) -> None:
    port = free_port()
    env = clean_env(tmp_path, redis_url=None, SWITCHBOARD_WEB_PORT=str(port))
    async with Deployment(env, tmp_path) as deployment:
        served = await deployment.start("serve")
        found = await served.until_logged(r"Web page: open (http://\S+)/login#token=(\S+) to")
        base, token = found.group(1), found.group(2)
        assert base == f"http://127.0.0.1:{port}"
        assert token not in served.log.replace(found.group(0), "")  # printed once, never logged
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar) as http:
            async with http.get(f"{base}/api/sessions") as response:
                assert response.status == 401
            async with http.post(
                f"{base}/login", data={"token": token}, headers={"Origin": base}
            ) as response:
                assert response.status == 200  # redirected to the page itself
                assert "Switchboard" in await response.text()
            answer = await _chat(http, base, {"Origin": base})
        assert "391" in answer
        assert await served.stop() == 0
        # The token is kept (owner-only) in the data folder: the link opens the page again
        # after a restart.
        kept = tmp_path / "data" / "web-token"
        assert kept.stat().st_mode & 0o777 == 0o600
        again = await deployment.start("serve")
        link = await again.until_logged(r"Web page: open (http://\S+)/login#token=(\S+) to")
        assert link.group(2) == token
        assert await again.stop() == 0


async def test_web_hands_chats_to_a_redis_worker(tmp_path: Path, redis_url: str) -> None:
    port = free_port()
    env = clean_env(
        tmp_path, redis_url=redis_url, SWITCHBOARD_WEB_PORT=str(port), SWITCHBOARD_WEB_TOKEN=TOKEN
    )
    base = f"http://127.0.0.1:{port}"
    async with Deployment(env, tmp_path) as deployment:
        page = await deployment.start("web")
        worker = await deployment.start("worker")
        await page.until_logged(r"Web page: http://127\.0\.0\.1:\d+/ \(sign in with")
        await worker.until_logged(r"worker \S+ taking work")
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as http,
            http.get(f"{base}/api/events", headers=bearer) as live,
        ):
            assert b"event: ready" in await live.content.readuntil(b"\n\n")
            answer = await _chat(http, base, bearer)
            seen = b""
            while b"agent.run.complete" not in seen:  # published by the worker, over Redis
                seen += await live.content.readuntil(b"\n\n")
        assert "391" in answer
        assert b'"platform": "web"' in seen
        assert TOKEN not in page.log
        assert await page.stop() == 0
        assert await worker.stop() == 0
    # SWITCHBOARD_WEB_TOKEN is the token: none is made or kept.
    assert not (tmp_path / "data" / "web-token").exists()


async def test_web_has_help(tmp_path: Path) -> None:
    result = await run_once(["web", "--help"], clean_env(tmp_path, redis_url=None), tmp_path)
    assert result.returncode == 0, result.stderr
    assert "SWITCHBOARD_WEB_TOKEN" in result.stdout


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("abc", "switchboard: error: SWITCHBOARD_WEB_PORT: Input should be a valid integer"),
        ("taken", "switchboard: error: the web page cannot listen on 127.0.0.1:"),
    ],
)
async def test_a_bad_or_taken_port_is_one_line_and_exit_1(
    tmp_path: Path, value: str, message: str
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = value if value != "taken" else str(holder.getsockname()[1])
        env = clean_env(tmp_path, redis_url=None, SWITCHBOARD_WEB_PORT=port)
        result = await run_once(["web"], env, tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(message), result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
