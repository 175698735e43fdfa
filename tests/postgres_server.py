"""A real PostgreSQL server for the tests, on a free port in a temporary folder, started and
stopped by the suite (`initdb`, then `postgres` itself, from Debian's
`/usr/lib/postgresql/<version>/bin`).

Nothing here uses a PostgreSQL already running on the machine: the suite must pass where none
is. Durability is off (`fsync=off`): the data is thrown away with the folder. `halt` and `start`
restart the server on the same port and folder (the fault tests).
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

import asyncpg

from tests.redis_server import free_port

__all__ = ["PostgresServer", "postgres_bin"]

_USER = "switchboard"


def postgres_bin() -> Path | None:
    """The folder of the newest installed PostgreSQL's programs, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    return Path(found[-1]).parent if found else None


def _version(path: str) -> int:
    part = Path(path).parent.parent.name
    return int(part) if part.isdigit() else 0


class PostgresServer:
    """One `postgres` process with a password-protected user; `url(database)` to reach it."""

    def __init__(
        self, *, crash_safe: bool = False, settings: Mapping[str, str] | None = None
    ) -> None:
        """`crash_safe`: every commit is in the write-ahead log before it is acknowledged
        (`synchronous_commit=on`), so one survives an immediate shutdown (`halt`); the
        operating system's cache is trusted (`fsync=off`): the machine does not crash.
        `settings`: more server settings (`-c NAME=VALUE`), e.g. the bench's
        `shared_preload_libraries`."""
        self.crash_safe = crash_safe
        binaries = postgres_bin()
        if binaries is None:
            raise RuntimeError("PostgreSQL is not installed (`make test-deps` installs it)")
        self.bin = binaries
        self.port = free_port()
        self.password = secrets.token_hex(16)
        # Not pytest's tmp_path: as root, the server runs as the `postgres` user, who cannot
        # enter pytest's private folders.
        self.workdir = Path(tempfile.mkdtemp(prefix="switchboard-pg-"))
        self.process: subprocess.Popen[bytes] | None = None
        self.settings = dict(settings or {})
        # initdb and postgres refuse to run as root: they run as `postgres` then.
        self._as = {"user": "postgres", "group": "postgres"} if os.geteuid() == 0 else {}

    def url(self, database: str = "postgres") -> str:
        """An asyncpg URL of `database` on this server."""
        return f"postgresql+asyncpg://{_USER}:{self.password}@127.0.0.1:{self.port}/{database}"

    async def new_database(self, template: str | None = None) -> str:
        """Create a database of its own for one test, empty or a copy of the database
        `template` of this server (which nothing may be connected to); its URL."""
        database = f"test_{uuid.uuid4().hex}"
        copying = f' TEMPLATE "{template}"' if template else ""
        admin = await asyncpg.connect(self.url().replace("+asyncpg", ""))
        try:
            await admin.execute(f'CREATE DATABASE "{database}"{copying}')
        finally:
            await admin.close()
        return self.url(database)

    def start(self) -> None:
        """Create the data folder (the first time) and start the server on its port; the
        same folder and port after `halt`, so the databases made before are there again."""
        data = self.workdir / "data"
        try:
            if not data.exists():
                self._initdb(data)
            self.process = subprocess.Popen(
                [
                    str(self.bin / "postgres"),
                    "-D",
                    str(data),
                    "-p",
                    str(self.port),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    f"unix_socket_directories={self.workdir}",
                    "-c",
                    "fsync=off",
                    "-c",
                    f"synchronous_commit={'on' if self.crash_safe else 'off'}",
                    "-c",
                    "full_page_writes=off",
                    *(f"-c{name}={value}" for name, value in self.settings.items()),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                **self._as,  # type: ignore[call-overload]
            )
            self._until_ready()
        except BaseException:
            self.stop()  # a start that fails leaves no process and no folder behind
            raise

    def _initdb(self, data: Path) -> None:
        secret = self.workdir / "password"
        secret.write_text(self.password)
        if self._as:
            shutil.chown(self.workdir, **self._as)
            shutil.chown(secret, **self._as)
        subprocess.run(
            [
                str(self.bin / "initdb"),
                "--pgdata",
                str(data),
                "--username",
                _USER,
                "--pwfile",
                str(secret),
                "--auth",
                "scram-sha-256",
                "--encoding",
                "UTF8",
                "--no-sync",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            **self._as,  # type: ignore[call-overload]
        )

    def _until_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.process.returncode}")
            ready = subprocess.run(
                [str(self.bin / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-q"],
                check=False,
            )
            if ready.returncode == 0:
                return
            time.sleep(0.05)  # the server is starting; nothing to await but its answer
        raise RuntimeError("postgres did not accept connections within 60 s")

    def halt(self, *, immediate: bool = False) -> None:
        """Stop the server, keeping its folder and port for `start`: a fast shutdown
        (SIGINT: sessions ended, a checkpoint written), or an immediate one (SIGQUIT: every
        process exits at once, and the next start recovers from the write-ahead log, as
        after a crash). Reaped."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGQUIT if immediate else signal.SIGINT)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def stop(self) -> None:
        """A fast shutdown (SIGINT), then SIGKILL if it lingers; always reaped; the folder
        removed."""
        self.halt()
        shutil.rmtree(self.workdir, ignore_errors=True)
