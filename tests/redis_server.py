"""A real `redis-server` for the tests, on a free port, started and stopped by the suite.

Nothing here uses a Redis already running on the machine: the suite must pass where none is.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

__all__ = ["RedisServer", "free_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """One `redis-server` process; `restart()` keeps its port.

    Data is lost on restart unless `persistent`: then every write is appended to a file in
    `workdir` and fsynced before Redis answers (`appendfsync always`), and a restart reloads it.
    """

    def __init__(self, workdir: Path, port: int | None = None, *, persistent: bool = False) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (`make test-deps` installs it)")
        self.binary = binary
        self.workdir = workdir
        self.port = port or free_port()
        self.persistent = persistent
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                *(
                    ("--appendonly", "yes", "--appendfsync", "always")
                    if self.persistent
                    else ("--appendonly", "no")
                ),
                "--dir",
                str(self.workdir),
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            self._until_answering()
        except BaseException:
            self.stop()  # a start that fails leaves no process behind
            raise

    def _until_answering(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.02)  # the process is starting; nothing to await but the socket
        raise RuntimeError("redis-server did not answer within 30 s")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it lingers; always reaped."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()
