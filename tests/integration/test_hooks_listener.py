"""The hooks listener over real HTTP (aiohttp client), and the agent turns it asks for.

The listener is `bots.hooks.HooksServer` on a free port of 127.0.0.1; requests land on a real
bus (SQLite file, so an idempotency key is shown to survive a restart); a worker with a
scripted model answers `/hooks/agent` requests.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from pydantic import BaseModel

from bots.cli import main
from bots.hooks import HooksServer, HooksSettings
from bots.platforms import REGISTERED
from core.backends.sql.bus import SqliteBus
from core.backends.sql.store import SqlStore
from core.bus.base import Bus
from core.bus.names import EVENTS, outbound_queue
from core.envelopes import Address, EventEnvelope, Outbound
from core.errors import ConfigError
from core.events import ModelEvent
from core.mailbox.base import Mailboxes
from core.notifications.external import Notifier
from core.policy import ChannelPolicy
from core.profile import HooksOptions
from core.providers.base import ModelRequest
from core.providers.scripted import ScriptedProvider, text_reply
from core.runtime import AgentRuntime
from core.tools.base import SafetyTier, Tool, ToolContext, ToolRegistry
from core.tools.builtin import builtin_tools
from tests.backends.memory_bus import MemoryBus
from tests.backends.memory_mailboxes import MemoryMailboxes
from tests.workers import build_worker


class _NoArgs(BaseModel):
    pass


async def _deploy(_args: _NoArgs, _context: ToolContext) -> str:
    return "deployed"


# A tool only `full` offers (not a safe-chat tool).
DEPLOY = Tool(
    name="deploy",
    description="Deploy the site.",
    args=_NoArgs,
    tier=SafetyTier.SIDE_EFFECTING,
    run=_deploy,
)

TOKEN = "t0ken-for-the-hooks-test-0123456789"
TARGET = "telegram:123"
PATIENCE = 10.0


def _settings(*, rate: str = "100/minute", targets: tuple[str, ...] = (TARGET,)) -> HooksSettings:
    return HooksSettings.build(
        port=0,
        token=TOKEN,
        host="127.0.0.1",
        options=HooksOptions(targets=list(targets), rate=rate),
        addresses=REGISTERED.addresses(),
    )


@dataclass
class Listener:
    server: HooksServer
    bus: Bus
    http: aiohttp.ClientSession

    async def post(
        self,
        path: str,
        body: Any,
        *,
        token: str = TOKEN,
        key: str | None = None,
        scheme: str = "Bearer",
    ) -> tuple[int, dict[str, Any]]:
        status, _, found = await self.exchange(path, body, token=token, key=key, scheme=scheme)
        return status, found

    async def exchange(
        self,
        path: str,
        body: Any,
        *,
        token: str = TOKEN,
        key: str | None = None,
        scheme: str = "Bearer",
    ) -> tuple[int, dict[str, str], dict[str, Any]]:
        """The status, headers and JSON body of the answer."""
        headers = {"Authorization": f"{scheme} {token}"}
        if key is not None:
            headers["Idempotency-Key"] = key
        url = f"http://127.0.0.1:{self.server.port}{path}"
        data = body if isinstance(body, bytes) else None
        json_body = None if isinstance(body, bytes) else body
        async with self.http.post(url, json=json_body, data=data, headers=headers) as response:
            return response.status, dict(response.headers), await response.json()


@asynccontextmanager
async def listening(
    bus: Bus, settings: HooksSettings | None = None, mailboxes: Mailboxes | None = None
) -> AsyncIterator[Listener]:
    """A started listener on `bus` (and `mailboxes`, for agent turns), and an HTTP client."""
    notifier = Notifier(bus, mailboxes or MemoryMailboxes())
    server = HooksServer(
        settings or _settings(), notifier=notifier, addresses=REGISTERED.addresses()
    )
    await server.start()
    try:
        async with aiohttp.ClientSession() as http:
            yield Listener(server, bus, http)
    finally:
        await server.close()


@pytest.fixture
async def bus() -> AsyncIterator[MemoryBus]:
    opened = MemoryBus()
    try:
        yield opened
    finally:
        await opened.close()


async def _queued(bus: Bus, queue: str) -> list[Any]:
    """Everything waiting on `queue` (taken off it)."""
    found = []
    while (delivery := await bus.receive(queue, consumer="test", timeout=0)) is not None:
        found.append(delivery.envelope)
        await delivery.ack()
    return found


async def test_a_notification_is_accepted_and_queued_for_its_chat(bus: MemoryBus) -> None:
    async with listening(bus) as hooks:
        status, body = await hooks.post(
            "/hooks/notify", {"to": TARGET, "text": "Deploy finished.", "name": "ci"}
        )

    assert status == 202
    [queued] = await _queued(bus, outbound_queue("telegram"))
    assert isinstance(queued, Outbound)
    assert (queued.id, queued.kind, queued.text) == (body["id"], "notification", "Deploy finished.")
    assert queued.address == Address(platform="telegram", chat="123")
    assert queued.source is not None and (queued.source.kind, queued.source.name) == ("hook", "ci")


async def test_requests_are_refused_with_the_right_status(bus: MemoryBus) -> None:
    good = {"to": TARGET, "text": "hi"}
    async with listening(bus) as hooks:
        assert (await hooks.post("/hooks/notify", good, token="wrong"))[0] == 401
        assert (await hooks.post("/hooks/notify", good, token=TOKEN + "x"))[0] == 401
        status, body = await hooks.post("/hooks/notify", b"{not json")
        assert (status, body["error"]) == (400, "the body is not JSON")
        status, body = await hooks.post("/hooks/notify", {"to": TARGET})
        assert (status, body["error"]) == (400, "text: Field required")
        status, body = await hooks.post("/hooks/agent", {**good, "prompt": "x"})
        assert status == 400 and body["error"].startswith("text: Extra inputs")
        status, body = await hooks.post("/hooks/notify", {"to": "telegram:abc", "text": "x"})
        assert status == 400 and "is not a telegram address" in body["error"]
        status, body = await hooks.post("/hooks/notify", {"to": "telegram:999", "text": "x"})
        assert status == 403 and "[hooks] targets" in body["error"]
        status, _ = await hooks.post("/hooks/notify", {"to": TARGET, "text": "x" * 70_000})
        assert status == 413
        big = b'{"to": "telegram:123", "text": "' + b"y" * (64 * 1024) + b'"}'
        assert (await hooks.post("/hooks/notify", big))[0] == 413
        status, body = await hooks.post("/hooks/notify", good, key="k" * 201)
        assert status == 400 and "Idempotency-Key" in body["error"]

    assert await _queued(bus, outbound_queue("telegram")) == []


async def test_the_bearer_scheme_is_read_in_any_case(bus: MemoryBus) -> None:
    async with listening(bus) as hooks:
        statuses = [
            (await hooks.post("/hooks/notify", {"to": TARGET, "text": scheme}, scheme=scheme))[0]
            for scheme in ("bearer", "BEARER", "Bearer")
        ]
        refused = await hooks.post("/hooks/notify", {"to": TARGET, "text": "x"}, scheme="Basic")

    assert statuses == [202, 202, 202]
    assert refused[0] == 401
    assert len(await _queued(bus, outbound_queue("telegram"))) == 3


async def test_wrong_tokens_from_one_address_are_throttled(bus: MemoryBus) -> None:
    good = {"to": TARGET, "text": "hi"}
    async with listening(bus) as hooks:
        wrong = [
            (await hooks.post("/hooks/notify", good, token=f"guess-{n}"))[0] for n in range(10)
        ]
        status, headers, body = await hooks.exchange("/hooks/notify", good, token="guess-10")
        # Past the limit the address waits, whatever it sends: no guess is checked meanwhile.
        right, right_headers, _ = await hooks.exchange("/hooks/notify", good)

    assert wrong == [401] * 10
    assert (status, body["error"]) == (429, "too many wrong tokens; try again later")
    assert 0 < int(headers["Retry-After"]) <= 60
    assert right == 429 and "Retry-After" in right_headers
    assert await _queued(bus, outbound_queue("telegram")) == []


async def test_over_the_rate_a_token_gets_429(bus: MemoryBus) -> None:
    async with listening(bus, _settings(rate="2/minute")) as hooks:
        statuses = [
            (await hooks.post("/hooks/notify", {"to": TARGET, "text": str(n)}))[0] for n in range(2)
        ]
        over, headers, _ = await hooks.exchange("/hooks/notify", {"to": TARGET, "text": "2"})
        statuses.append(over)
        assert 0 < int(headers["Retry-After"]) <= 60
        # A wrong token is refused before it counts.
        assert (await hooks.post("/hooks/notify", {"to": TARGET, "text": "x"}, token="no"))[
            0
        ] == 401

    assert statuses == [202, 202, 429]
    assert len(await _queued(bus, outbound_queue("telegram"))) == 2


async def test_an_idempotency_key_gives_one_delivery_across_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "switchboard.db"
    request = {"to": TARGET, "text": "Build 42 failed."}
    ids = []
    for _ in range(2):  # the second time round is a restarted process on the same file
        bus = await SqliteBus.open(path)
        try:
            async with listening(bus) as hooks:
                for _ in range(2):
                    status, body = await hooks.post("/hooks/notify", request, key="build-42")
                    assert status == 202
                    ids.append(body["id"])
                status, other = await hooks.post("/hooks/notify", request, key="build-43")
                assert status == 202 and other["id"] != ids[0]
        finally:
            await bus.close()

    assert len(set(ids)) == 1
    bus = await SqliteBus.open(path)
    try:
        texts = [o.text for o in await _queued(bus, outbound_queue("telegram"))]
    finally:
        await bus.close()
    assert texts == ["Build 42 failed.", "Build 42 failed."]  # build-42 once, build-43 once


def test_a_missing_short_or_wrong_setting_refuses_to_start() -> None:
    for token in (None, "short-token"):
        with pytest.raises(ConfigError, match="SWITCHBOARD_HOOKS_TOKEN"):
            HooksSettings.build(
                port=0,
                token=token,
                host="127.0.0.1",
                options=HooksOptions(),
                addresses=REGISTERED.addresses(),
            )
    with pytest.raises(ConfigError, match=r"\[hooks\] targets"):
        _settings(targets=("pager:42",))
    with pytest.raises(ConfigError, match="terminal cannot be reached"):
        _settings(targets=("terminal",))
    with pytest.raises(ConfigError, match=r"\[hooks\] rate"):
        _settings(rate="lots")


async def test_switchboard_hooks_without_a_good_token_exits_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SWITCHBOARD_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SWITCHBOARD_HOOKS_PORT", "0")
    monkeypatch.setenv("SWITCHBOARD_HOOKS_TOKEN", "too-short")
    monkeypatch.delenv("REDIS_URL", raising=False)

    def run() -> object:
        try:
            main(["hooks"])
        except SystemExit as exc:
            return exc.code
        return 0

    assert await asyncio.to_thread(run) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "SWITCHBOARD_HOOKS_TOKEN must be set" in err[0]


async def test_an_agent_request_runs_a_turn_and_delivers_per_its_policy(
    bus: MemoryBus, store: SqlStore
) -> None:
    def answer(request: ModelRequest) -> list[ModelEvent]:
        # Sessions run concurrently: answer by what was asked, not by call order.
        asked = str(request.messages[-1].text)
        if "Go." in asked:
            return text_reply("Done.")
        return text_reply("Nothing new." if "now?" in asked else "[NOTIFY] 3 new issues.")

    provider = ScriptedProvider([answer, answer, answer])
    runtime = AgentRuntime(
        provider=provider, model="m", tools=ToolRegistry([*builtin_tools(), DEPLOY]), store=store
    )
    policy = ChannelPolicy(modes={**REGISTERED.default_modes(), "telegram": "full"})
    worker = build_worker(bus=bus, store=store, runtime=runtime, policy=policy)
    running = asyncio.create_task(worker.run())
    conditional = {"to": TARGET, "policy": "conditional", "session": "ci"}
    lifecycle = await bus.subscribe(EVENTS)
    try:
        async with listening(bus, mailboxes=worker.mailboxes) as hooks:
            for prompt in ("Any new issues?", "Any new issues now?"):
                status, _ = await hooks.post("/hooks/agent", {**conditional, "prompt": prompt})
                assert status == 202
            status, body = await hooks.post("/hooks/agent", {"to": TARGET, "prompt": "Go."})
            assert status == 202
        delivered: list[Outbound] = []
        async with asyncio.timeout(PATIENCE):
            while len(delivered) < 2:
                got = await bus.receive(outbound_queue("telegram"), consumer="t", timeout=None)
                assert got is not None
                await got.ack()
                if isinstance(got.envelope, Outbound) and got.envelope.kind == "notification":
                    delivered.append(got.envelope)
            # The quiet answer delivers nothing: wait for all three turns to have completed.
            completed = 0
            async for event in lifecycle:
                if isinstance(event, EventEnvelope) and event.name == "agent.run.complete":
                    completed += 1
                    if completed == 3:
                        break
        assert await _queued(bus, outbound_queue("telegram")) == []
    finally:
        await lifecycle.aclose()
        await worker.stop(grace=5.0)
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)

    assert sorted(o.text for o in delivered) == ["3 new issues.", "Done."]
    assert {o.source.kind for o in delivered if o.source} == {"hook"}
    by_prompt = {str(r.messages[-1].text): r for r in provider.requests}
    first, second = by_prompt["Any new issues?"], by_prompt["Any new issues now?"]
    third = by_prompt["Go."]
    # A conditional request's system prompt says when its answer is delivered.
    assert "ONLY if it begins with [NOTIFY]" in first.system
    assert "external hook 'ci'" in first.system
    assert "[NOTIFY]" not in third.system
    assert len(second.messages) > len(first.messages)  # the same session, one turn later
    # A hook never runs in `full`, even where the chat's mode is: `deploy` is not offered.
    assert "calculator" in {t.name for t in first.tools}
    assert "deploy" not in {t.name for t in first.tools}
    sessions = [s.key for s in await store.list_sessions(limit=10)]
    assert "notify:ci" in sessions and "notify:hook" in sessions
    assert body["id"]
