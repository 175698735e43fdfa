"""A real `redis-server` for the tests, on a free port, started and stopped by the suite.

Nothing here uses a Redis already running on the machine: the suite must pass where none is.
"""

from __future__ import annotations

import functools
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["RedisClusterServers", "RedisSentinelServer", "RedisServer", "free_port"]


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

    def __init__(
        self,
        workdir: Path,
        port: int | None = None,
        *,
        persistent: bool = False,
        extra: tuple[str, ...] = (),
    ) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (`make test-deps` installs it)")
        self.binary = binary
        self.workdir = workdir
        self.port = port or free_port()
        self.persistent = persistent
        # Further `redis-server` options (a cluster node's, a Sentinel's).
        self.extra = extra
        # What comes first on the command line (a config file, `--sentinel`).
        self.binary_args: tuple[str, ...] = ()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                self.binary,
                *self.binary_args,
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
                *self.extra,
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


def _info(port: int, section: str) -> str:
    """The text of `INFO <section>` (or `CLUSTER INFO` for "cluster") of the server at `port`."""
    command = ["CLUSTER", "INFO"] if section == "cluster" else ["INFO", section]
    done = subprocess.run(
        ["redis-cli", "-h", "127.0.0.1", "-p", str(port), *command],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    return done.stdout


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)  # the servers agree in their own time; nothing to await but them
    raise RuntimeError(f"{what} within 30 s")


def _free_cluster_port() -> int:
    """A free port whose cluster bus port (10000 above it) is free and valid too."""
    for _ in range(100):
        port = random.randint(20_000, 50_000)  # a port, not a secret
        try:
            for candidate in (port, port + 10_000):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        return port
    raise RuntimeError("no free pair of ports for a cluster node")


def _cluster_ok(port: int) -> bool:
    return "cluster_state:ok" in _info(port, "cluster")


class RedisClusterServers:
    """A Redis Cluster of three masters (no replicas) on free ports, made by `redis-cli`."""

    def __init__(self, workdir: Path) -> None:
        self.nodes = [
            RedisServer(
                workdir / f"node{n}",
                _free_cluster_port(),
                extra=(
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    str(workdir / f"node{n}" / "nodes.conf"),
                    "--cluster-node-timeout",
                    "5000",
                ),
            )
            for n in range(3)
        ]

    @property
    def url(self) -> str:
        """`redis+cluster://` naming every node."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)

    def start(self) -> None:
        """Start the three nodes, join them with `redis-cli --cluster create`, wait until
        every node says `cluster_state:ok`."""
        try:
            for node in self.nodes:
                node.start()
            subprocess.run(
                [
                    "redis-cli",
                    "--cluster",
                    "create",
                    *(f"127.0.0.1:{node.port}" for node in self.nodes),
                    "--cluster-replicas",
                    "0",
                    "--cluster-yes",
                ],
                capture_output=True,
                timeout=60,
                check=True,
            )
            for node in self.nodes:
                _until(
                    functools.partial(_cluster_ok, node.port),
                    f"cluster node {node.port} did not say cluster_state:ok",
                )
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop and reap every node."""
        for node in self.nodes:
            node.stop()

    def restart(self) -> None:
        """Stop every node, start them again on their ports (each keeps its slots from its
        `nodes.conf`; data is lost), and wait until the cluster says `cluster_state:ok`."""
        self.stop()
        try:
            for node in self.nodes:
                node.start()
            for node in self.nodes:
                _until(
                    functools.partial(_cluster_ok, node.port),
                    f"cluster node {node.port} did not say cluster_state:ok again",
                )
        except BaseException:
            self.stop()
            raise


class RedisSentinelServer:
    """One Sentinel (`redis-server --sentinel`) monitoring `master` as service `name`."""

    def __init__(self, workdir: Path, master: RedisServer, name: str = "switchboard") -> None:
        self.workdir = workdir
        self.master = master
        self.name = name
        self.config = workdir / "sentinel.conf"
        self.server = RedisServer(workdir, extra=())

    @property
    def url(self) -> str:
        """`redis+sentinel://` naming this Sentinel and the service."""
        return f"redis+sentinel://127.0.0.1:{self.server.port}/{self.name}"

    def start(self) -> None:
        """Write the config (a Sentinel rewrites its file) and start it; return once it
        names the master."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config.write_text(
            f"port {self.server.port}\n"
            "bind 127.0.0.1\n"
            f"sentinel monitor {self.name} 127.0.0.1 {self.master.port} 1\n"
        )
        # The config file comes first; the options after it override it.
        self.server.binary_args = (str(self.config), "--sentinel")
        try:
            self.server.start()
            _until(
                lambda: f"name={self.name},status=ok" in _info(self.server.port, "sentinel"),
                "the Sentinel did not see its master",
            )
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop and reap the Sentinel."""
        self.server.stop()
