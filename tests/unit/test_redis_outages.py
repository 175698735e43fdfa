"""`is_outage`: which of redis-py's errors say Redis is away for now (the caller waits and
tries again) rather than that the command is wrong (the caller gives up)."""

from __future__ import annotations

import pytest
from redis.exceptions import (
    ClusterDownError,
    ConnectionError,
    MasterDownError,
    ReadOnlyError,
    RedisError,
    ResponseError,
    TryAgainError,
)

from core.backends.redis.client import is_outage


@pytest.mark.parametrize(
    "error",
    [
        ConnectionError("Error 111 connecting to 127.0.0.1:7000."),
        ReadOnlyError("You can't write against a read only replica."),
        ResponseError("MISCONF Redis is configured to save RDB snapshots"),
        ClusterDownError("The cluster is down"),
        MasterDownError("Link with MASTER is down and replica-serve-stale-data is set to 'no'."),
        TryAgainError("Multiple keys request during rehashing of slot"),
    ],
)
def test_redis_away_for_now_is_an_outage(error: RedisError) -> None:
    assert is_outage(error)


@pytest.mark.parametrize(
    "error",
    [
        ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"),
        ResponseError("CROSSSLOT Keys in request don't hash to the same slot"),
    ],
)
def test_a_wrong_command_is_no_outage(error: RedisError) -> None:
    assert not is_outage(error)
