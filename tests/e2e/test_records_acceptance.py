"""Records in PostgreSQL, Redis for coordination only: a distributed deployment answers many
chats, Redis is emptied and restarted under it, and nothing of record is lost (the scenario is
`tests/e2e/records.py`). On one redis-server and on a 3-node Redis Cluster, where `switchboard
notify`, `switchboard health` and `switchboard status` work too.

The load here is 12 chats x 5 messages (a busy two-core machine runs this tier); `python -m
bench records` runs the acceptance's 50 chats x 4 messages (and the fifth after the restart)
and prints its figures.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.processes import Deployment, until
from tests.e2e.records import FIRST_CHAT, MESSAGES, Operator, expected_replies, run_acceptance
from tests.fakes import FakeOpenAI, FakeTelegram
from tests.redis_server import RedisClusterServers, RedisServer

pytestmark = pytest.mark.e2e

CHATS = 12
# How long one answer may take on a busy machine (turns of many chats queue up).
ANSWER_WITHIN = 60.0


@pytest.mark.timeout(300)
async def test_one_redis_server_emptied_and_restarted_loses_no_record(
    redis_server: RedisServer,
    redis_url: str,
    postgres_url: str,
    fake_telegram: FakeTelegram,
    fake_openai: FakeOpenAI,
    tmp_path: Path,
) -> None:
    outcome = await run_acceptance(
        redis_url,
        redis_server.restart,
        postgres_url,
        fake_telegram,
        fake_openai,
        tmp_path,
        chats=CHATS,
        within=ANSWER_WITHIN,
    )

    assert (outcome.sent, outcome.lost, outcome.doubled) == (CHATS * (MESSAGES + 1), 0, 0)
    assert fake_telegram.sent_texts(FIRST_CHAT + CHATS - 1) == expected_replies(
        FIRST_CHAT + CHATS - 1, MESSAGES + 1
    )


@pytest.mark.timeout(300)
async def test_a_redis_cluster_emptied_and_restarted_loses_no_record(
    redis_cluster: RedisClusterServers,
    postgres_url: str,
    fake_telegram: FakeTelegram,
    fake_openai: FakeOpenAI,
    tmp_path: Path,
) -> None:
    chat = FIRST_CHAT + CHATS - 1
    notice = "the nightly backup is done"

    async def notify_and_health(operator: Operator, deployment: Deployment) -> dict[int, list[str]]:
        before = len(fake_telegram.sent_texts(chat))
        await operator.run("notify", f"telegram:{chat}", notice)

        async def delivered() -> bool:
            return fake_telegram.sent_texts(chat)[before:] == [notice]

        await deployment.ready(until(delivered, ANSWER_WITHIN, "the notification"))
        # The store answers and the bus took a publish on the cluster: one line, no bare
        # redirection (`9360 127.0.0.1:34483`) and no CROSSSLOT.
        health = await operator.run("health")
        assert health.stdout.startswith("ok: store and bus answer ("), health
        assert health.stdout.count("\n") == 1 and not health.stderr, health

        # The processes beat again on the emptied cluster; the queues are read on it.
        async def both_workers_listed() -> bool:
            shown = json.loads((await operator.run("status", "--json")).stdout)
            roles = [process["role"] for process in shown["processes"]]
            assert shown["queues"] and all(q["dead"] == 0 for q in shown["queues"].values())
            return roles.count("worker") == 2

        await until(both_workers_listed, ANSWER_WITHIN, "status listing both workers")
        return {chat: [notice]}

    outcome = await run_acceptance(
        redis_cluster.url,
        redis_cluster.restart,
        postgres_url,
        fake_telegram,
        fake_openai,
        tmp_path,
        chats=CHATS,
        within=ANSWER_WITHIN,
        after_restart=notify_and_health,
    )

    assert (outcome.sent, outcome.lost, outcome.doubled) == (CHATS * (MESSAGES + 1), 0, 0)
    assert fake_telegram.sent_texts(chat) == [*expected_replies(chat, MESSAGES + 1), notice]
