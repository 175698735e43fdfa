"""The keys one script or transaction touches share one Redis Cluster slot (their hash tag)."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from core.backends.redis.keys import RedisKeys

KEYS = RedisKeys("support")


def _slots(*keys: str) -> set[int]:
    return {key_slot(key.encode()) for key in keys}


@pytest.mark.parametrize("queue", ["inbound", "outbound.telegram", "outbound.slack"])
def test_the_keys_of_one_queue_share_a_slot(queue: str) -> None:
    keys = (
        KEYS.queue_stream(queue),
        KEYS.dead_letters(queue),
        KEYS.enqueued(queue, "telegram:update:1"),
        KEYS.enqueued(queue, "slack:event:Ev42"),
    )
    assert len(_slots(*keys)) == 1


@pytest.mark.parametrize(
    "session_key", ["telegram:bot1:chat42", "slack:T1:C9:thread.17", "odd}key{", "}"]
)
def test_the_coordination_keys_of_one_session_share_a_slot(session_key: str) -> None:
    keys = (
        KEYS.mailbox(session_key),
        KEYS.turn_lease(session_key),
        KEYS.claim_epoch(session_key),
    )
    assert len(_slots(*keys)) == 1


def test_keys_stay_in_the_bot_namespace() -> None:
    assert KEYS.queue_stream("inbound") == "sb:support:q:{q:inbound}"
    assert KEYS.turn_lease("telegram:1:2").startswith("sb:support:lease:turn:")
    assert KEYS.mailbox("telegram:1:2").startswith("sb:support:")


@pytest.mark.parametrize("reply_key", ["telegram:update:1", "slack:event:Ev42", "odd}key{"])
def test_a_reply_hold_carries_the_reply_as_its_hash_tag(reply_key: str) -> None:
    hold = KEYS.reply_hold(reply_key)
    assert hold.startswith("sb:support:reply-hold:{r:")
    # Any key tagged with the same reply lands in the hold's slot.
    assert _slots(hold, "{r:" + reply_key + "}") == _slots(hold)
