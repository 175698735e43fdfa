"""`switchboard` subprocesses for the end-to-end tests of the distributed deployment.

Every process gets a clean environment (no keys, tokens or Redis of the machine), runs in the
test's temporary directory (so no `.env` is read), and writes stdout and stderr to files of
its own there; `Deployment.describe()` puts them all in an assertion message. Leaving a
`Deployment` stops every process it started: SIGTERM, then SIGKILL, and always a wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import sys
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, NamedTuple, Self

from tests.fakes import FakeOpenAI, FakeTelegram

__all__ = [
    "REPO",
    "SWITCHBOARD",
    "Deployment",
    "Finished",
    "Launched",
    "clean_env",
    "communicate",
    "open_profiles",
    "run_once",
    "until",
]

REPO = Path(__file__).resolve().parents[2]
SWITCHBOARD = Path(sys.executable).with_name("switchboard")
# Starting a process imports python-telegram-bot and the SDKs; only a broken start waits this.
START_PATIENCE = 20.0
# A process stopped with SIGTERM that has not exited by then is killed (and reported).
STOP_PATIENCE = 10.0
# How often a wait for another process's state looks again (logs, Redis, exit).
_POLL = 0.1

_DROPPED_SUFFIXES = ("_TOKEN", "_API_KEY", "_BASE_URL")
_DROPPED_PREFIXES = ("SWITCHBOARD_", "TELEGRAM_")


def open_profiles(tmp_path: Path, *, busy: str = "queue") -> Path:
    """A copy of the repo's profiles whose default profile lets anyone write on every chat
    platform: the fakes' users are strangers, who would otherwise get a pairing code.

    `busy` (the first call for a `tmp_path` decides): "queue" unless a test asks for another,
    because these tests count one answer per message sent, often several at once in one chat;
    under the product's default, "steer", such messages join one turn and one answer
    (`tests/e2e/test_serve_busy.py` runs that)."""
    target = tmp_path / "open-profiles"
    if not target.exists():
        shutil.copytree(REPO / "profiles", target)
        tables = "".join(
            f'\n[access.{name}]\ndm_policy = "open"\n' for name in ("telegram", "slack", "discord")
        )
        path = target / "default" / "profile.toml"
        # A top-level key goes before the file's tables.
        path.write_text(f'busy = "{busy}"\n' + path.read_text(encoding="utf-8") + tables)
    return target


def clean_env(
    tmp_path: Path,
    *,
    redis_url: str | None,
    telegram: FakeTelegram | None = None,
    openai: FakeOpenAI | None = None,
    **extra: str,
) -> dict[str, str]:
    """The machine's environment without credentials, endpoints or Switchboard settings.

    Then: the fakes' URLs and the test key, the repo's profiles with open DMs
    (`open_profiles`), a data directory in `tmp_path`, info logs, and `REDIS_URL` when given.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(_DROPPED_SUFFIXES) and not k.startswith(_DROPPED_PREFIXES)
    }
    env.pop("REDIS_URL", None)
    env.pop("DATABASE_URL", None)
    env.pop("SEARXNG_URL", None)  # a search API only when a test names one
    env.update(
        SWITCHBOARD_PROFILES_DIR=str(open_profiles(tmp_path)),
        SWITCHBOARD_DATA_DIR=str(tmp_path / "data"),
        SWITCHBOARD_LOG_LEVEL="info,httpx=info",
        PTB_TIMEDELTA="1",
        PYTHONFAULTHANDLER="1",
    )
    if redis_url is not None:
        env["REDIS_URL"] = redis_url
    if telegram is not None:
        env.update(TELEGRAM_BOT_TOKEN=telegram.token, TELEGRAM_API_URL=telegram.url)
    if openai is not None:
        env.update(
            SWITCHBOARD_PROVIDER="openai", OPENAI_API_KEY=openai.api_key, OPENAI_BASE_URL=openai.url
        )
    env.update(extra)
    return env


@dataclass(eq=False)
class Launched:
    """One running (or finished) `switchboard` process and the files it writes to."""

    name: str
    args: tuple[str, ...]
    process: asyncio.subprocess.Process
    stdout_path: Path
    stderr_path: Path
    # Set once the test signalled it: its exit is then expected, not a failure to report.
    signalled: bool = False

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    @property
    def log(self) -> str:
        """What it wrote on stderr so far."""
        return _read(self.stderr_path)

    @property
    def output(self) -> str:
        """What it wrote on stdout so far."""
        return _read(self.stdout_path)

    def describe(self) -> str:
        state = "running" if self.returncode is None else f"exit {self.returncode}"
        command = " ".join(("switchboard", *self.args))
        return f"--- {self.name}: {command} ({state}) ---\n{self.log}"

    def send_signal(self, signum: int) -> None:
        self.signalled = True
        if self.returncode is None:
            self.process.send_signal(signum)

    async def wait(self, timeout: float = STOP_PATIENCE) -> int:  # noqa: ASYNC109
        """The exit code, which must come within `timeout` seconds."""
        try:
            async with asyncio.timeout(timeout):
                return await self.process.wait()
        except TimeoutError:
            raise AssertionError(
                f"{self.name} did not exit within {timeout}s\n{self.describe()}"
            ) from None

    async def stop(self) -> int:
        """SIGTERM and the exit code; a process not gone in `STOP_PATIENCE` is aborted.

        SIGABRT makes Python's fault handler write every thread's stack to the log (see
        `clean_env`), so a hang shows where it was; SIGKILL if even that does not end it.
        """
        self.send_signal(signal.SIGTERM)
        for signum, patience in ((signal.SIGABRT, STOP_PATIENCE), (signal.SIGKILL, 2.0)):
            try:
                async with asyncio.timeout(patience):
                    return await self.process.wait()
            except TimeoutError:
                self.send_signal(signum)
        return await self.process.wait()

    async def until_logged(
        self,
        pattern: str,
        timeout: float = START_PATIENCE,  # noqa: ASYNC109
        *,
        after: int = 0,
    ) -> re.Match[str]:
        """The first match of the regex `pattern` in the log from character `after` on.

        Fails (with the log) when the process exits or `timeout` passes first.
        """
        compiled = re.compile(pattern)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            found = compiled.search(self.log, after)
            if found is not None:
                return found
            if self.returncode is not None or loop.time() >= deadline:
                why = "exited" if self.returncode is not None else f"waited {timeout}s"
                raise AssertionError(
                    f"{self.name} never logged {pattern!r} ({why})\n{self.describe()}"
                )
            # Another process's log: nothing to await but time.
            await asyncio.sleep(_POLL)


class Deployment:
    """The `switchboard` processes of one test, all stopped (and awaited) on exit."""

    def __init__(self, env: dict[str, str], workdir: Path) -> None:
        self.env = env
        self.workdir = workdir
        self.processes: list[Launched] = []

    async def start(self, *args: str, name: str | None = None, **env: str) -> Launched:
        """Start `switchboard <args>`; `env` adds to (or overrides) the deployment's env."""
        label = name or "-".join(a for a in args if not a.startswith("-"))
        label = f"{label}-{len(self.processes)}"
        stdout_path = self.workdir / f"{label}.out"
        stderr_path = self.workdir / f"{label}.log"
        with _create(stdout_path) as stdout, _create(stderr_path) as stderr:
            process = await asyncio.create_subprocess_exec(
                str(SWITCHBOARD),
                *args,
                env={**self.env, **env},
                cwd=self.workdir,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
            )
        launched = Launched(label, args, process, stdout_path, stderr_path)
        self.processes.append(launched)
        return launched

    async def ready(self, awaitable: Awaitable[Any], timeout: float = START_PATIENCE) -> Any:  # noqa: ASYNC109
        """Await `awaitable` (e.g. the fake's idle poll); fail at once if a process exits.

        Processes the test signalled may exit: that is what it asked for.
        """
        waiting = asyncio.ensure_future(awaitable)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while not waiting.done():
                exited = [p for p in self.processes if p.returncode is not None and not p.signalled]
                if exited:
                    raise AssertionError(f"{exited[0].name} exited early\n{self.describe()}")
                if loop.time() >= deadline:
                    raise AssertionError(f"not ready within {timeout}s\n{self.describe()}")
                await asyncio.wait({waiting}, timeout=_POLL)
            try:
                return waiting.result()
            except (TimeoutError, AssertionError) as exc:
                # A fake's own deadline: the processes' logs say why nothing came.
                raise AssertionError(f"{exc}\n{self.describe()}") from exc
        finally:
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await waiting

    def describe(self) -> str:
        """Every process's command, state and stderr, for an assertion message."""
        return "\n".join(p.describe() for p in self.processes)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.gather(*(p.stop() for p in self.processes if p.returncode is None))


async def until(
    check: Callable[[], Awaitable[bool]],
    timeout: float,  # noqa: ASYNC109
    what: str,
    describe: Callable[[], str] = lambda: "",
) -> None:
    """Poll `check` (state owned by another process, e.g. in Redis) until it holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() >= deadline:
            raise AssertionError(f"{what}: not within {timeout}s\n{describe()}")
        await asyncio.sleep(_POLL)


class Finished(NamedTuple):
    """The outcome of a one-shot command (unpacks as `code, out, err`)."""

    returncode: int
    stdout: str
    stderr: str


async def run_once(
    args: Iterable[str],
    env: dict[str, str],
    cwd: Path,
    stdin: str | None = None,
    *,
    timeout: float = 45.0,  # noqa: ASYNC109
) -> Finished:
    """Run `switchboard ARGS` (lines piped in as `stdin`), which exits by itself; its exit code
    and output."""
    process = await asyncio.create_subprocess_exec(
        str(SWITCHBOARD),
        *args,
        env=env,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL if stdin is None else asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    piped = None if stdin is None else stdin.encode()
    stdout, stderr = await communicate(process, piped, timeout=timeout)
    assert process.returncode is not None
    return Finished(process.returncode, stdout.decode(), stderr.decode())


async def communicate(
    process: asyncio.subprocess.Process,
    stdin: bytes | None = None,
    timeout: float = 30.0,  # noqa: ASYNC109
) -> tuple[bytes, bytes]:
    """`process.communicate(stdin)`, which must end within `timeout` seconds.

    A process still running then (or when the test is cancelled) is killed and its pipes read
    to their end, so neither it nor its transport outlives the test.
    """
    try:
        async with asyncio.timeout(timeout):
            return await process.communicate(stdin)
    finally:
        if process.returncode is None:
            process.kill()
            await process.communicate()


def _create(path: Path) -> BinaryIO:
    return path.open("wb")


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""
