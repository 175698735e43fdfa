"""Each deployment's backends are a package of `core/backends/` opened by one function with
plain arguments (issue 33, point 4), and importing the packages loads no backend library."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

from core.backends.redis import open_distributed
from core.backends.redis.bus import RedisBus
from core.backends.redis.keys import RedisKeys
from core.backends.redis.mailboxes import RedisMailboxes
from core.backends.sql import open_embedded
from core.backends.sql.bus import SqliteBus
from core.backends.sql.mailboxes import SqliteMailboxes
from core.backends.sql.store import SqlStore, sqlite_url
from core.store.replies import HeldReplyRecords


async def test_open_embedded_gives_sql_records_and_sqlite_queues(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "records.db")

    async with open_embedded(url, tmp_path / "queues.db", lease_seconds=30.0) as found:
        assert isinstance(found.store, SqlStore)
        assert isinstance(found.bus, SqliteBus)
        assert isinstance(found.mailboxes, SqliteMailboxes)
        assert not found.distributed
        assert found.redis is None
        report = await found.readiness.report()

    assert report.ready, report.details
    assert (tmp_path / "queues.db").exists()


async def test_open_distributed_gives_sql_records_and_redis_coordination(
    tmp_path: Path, redis_url: str
) -> None:
    url = sqlite_url(tmp_path / "records.db")
    keys = RedisKeys(f"t{uuid.uuid4().hex[:12]}")

    async with open_distributed(
        url, redis_url, keys, bus_lease_seconds=30.0, turn_lease_seconds=10.0
    ) as found:
        assert isinstance(found.store, SqlStore)
        assert isinstance(found.bus, RedisBus)
        assert isinstance(found.mailboxes, RedisMailboxes)
        assert isinstance(found.replies, HeldReplyRecords)
        assert found.distributed
        assert found.redis is not None
        assert await found.redis.ping()
        report = await found.readiness.report()

    assert report.ready, report.details
    assert set(report.details) >= {"store", "bus"}


def test_importing_the_backend_packages_loads_neither_redis_nor_sqlalchemy() -> None:
    probe = (
        "import json, sys\nimport core.backends, core.backends.sql, core.backends.redis\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=30, check=True
    )
    loaded = {name.split(".")[0] for name in json.loads(done.stdout.strip().splitlines()[-1])}

    assert not loaded & {"redis", "sqlalchemy", "alembic"}
