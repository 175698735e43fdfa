"""`SqlStore`: the `Store` on SQLAlchemy Core, on SQLite or PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from alembic.util import CommandError
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from core.backends.sql.store._access import SqlAccess
from core.backends.sql.store._checkpoints import SqlCheckpoints
from core.backends.sql.store._engine import open_engine
from core.backends.sql.store._facts import SqlFacts
from core.backends.sql.store._forks import SqlForks
from core.backends.sql.store._ledger import SqlLedger
from core.backends.sql.store._log import SqlLog
from core.backends.sql.store._marks import SqlProcessed, SqlSeen
from core.backends.sql.store._people import SqlPeople
from core.backends.sql.store._playbook import SqlPlaybook
from core.backends.sql.store._schedules import SqlSchedules
from core.backends.sql.store._schema import upgrade
from core.backends.sql.store._takeovers import SqlTakeovers
from core.backends.sql.store._tool_outputs import SqlToolOutputs
from core.backends.sql.store._turns import SqlTurns
from core.clock import utc_now
from core.errors import StoreError, StoreUnavailable

__all__ = ["SqlStore"]


class SqlStore(
    SqlTurns,
    SqlLog,
    SqlLedger,
    SqlSchedules,
    SqlFacts,
    SqlCheckpoints,
    SqlProcessed,
    SqlSeen,
    SqlAccess,
    SqlToolOutputs,
    SqlTakeovers,
    SqlPeople,
    SqlPlaybook,
    SqlForks,
):
    """The `Store` on a SQL database, opened with `await SqlStore.open(url)`.

    Every method is one transaction, committed before the awaited call returns; the turn's
    calls (`SqlTurns`) are made of the single-concern calls' statements.
    """

    @classmethod
    async def open(cls, url: str | URL, *, clock: Callable[[], datetime] = utc_now) -> SqlStore:
        """Open the database at `url` (`sqlite+aiosqlite:///path` or
        `postgresql+asyncpg://...`; a SQLite file and its folder are made if needed) and
        upgrade its schema to the newest revision."""
        engine = await open_engine(url)
        where = engine.url.render_as_string(hide_password=True)
        try:
            await upgrade(engine)
        except OSError as exc:
            # The server is not there (asyncpg's refused or failed connection).
            await engine.dispose()
            raise StoreUnavailable(f"cannot reach the SQL store at {where}: {exc}") from exc
        except (SQLAlchemyError, CommandError) as exc:
            # CommandError: a revision this Switchboard does not know (a newer one's database).
            await engine.dispose()
            raise StoreError(f"cannot prepare the SQL store at {where}: {exc}") from exc
        except BaseException:
            await engine.dispose()
            raise
        return cls(engine, clock=clock)
