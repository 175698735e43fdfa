"""Another revision of Switchboard measured in the same run: `python -m bench w1|w3 --against REV`.

REV is checked out into a temporary `git worktree` (removed afterwards). The bench's own
processes (the floors, the fake LLM, the stand-in gateway, PostgreSQL, redis-server) run from
this tree; the product side of a workload (`bench.child turns --engine ours`, `switchboard
chat`, the `switchboard worker` processes behind `bench.probe`) runs a second time with REV's
tree as its working folder and first on `PYTHONPATH`, in the same virtual environment. Those
child modules are REV's own, so a probe that patches REV's internals stays in step with them.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.common import ROOT, BenchError

# The commit before the flow issue's work (issue 33): what "the previous version" means.
DEFAULT_REV = "f92e00d"
# W1: a turn through `switchboard chat` within this many times the no-SDK floor's (p50).
CHAT_OVER_FLOOR = 2.0
# W3: the workers' CPU per turn within this many times REV's.
WORKER_CPU_OVER_REV = 1.5


_PROFILES = "SWITCHBOARD_PROFILES_DIR"


@dataclass(frozen=True)
class Tree:
    """A source tree the product side runs from: this one, or a checkout of a revision."""

    label: str
    root: Path

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """`env` with this tree first on `PYTHONPATH` (its `bots`, `core`, `bench` win) and
        its own shipped profiles where `env` named this checkout's."""
        changed = {**env, "PYTHONPATH": str(self.root)}
        if env.get(_PROFILES) == str(ROOT / "profiles"):
            changed[_PROFILES] = str(self.root / "profiles")
        return changed


THIS_TREE = Tree("this tree", ROOT)


def _git(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BenchError(f"--against needs git, which could not run: {exc}") from None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(git said nothing)"


def resolve(rev: str) -> str:
    """The full commit id REV names in this repository; BenchError if it names none."""
    if not rev or rev.startswith("-"):
        raise BenchError(f"--against {rev!r}: not a git revision")
    found = _git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if found.returncode != 0:
        raise BenchError(f"--against {rev}: no such commit in {ROOT}")
    return found.stdout.strip()


@contextmanager
def checkout(rev: str) -> Iterator[Tree]:
    """REV checked out (detached) into a temporary worktree, removed when the block ends."""
    commit = resolve(rev)
    with tempfile.TemporaryDirectory(prefix="switchboard-against-") as parent:
        path = Path(parent) / "tree"
        made = _git("worktree", "add", "--detach", "--quiet", str(path), commit)
        if made.returncode != 0:
            raise BenchError(f"--against {rev}: git worktree add failed: {_last_line(made.stderr)}")
        try:
            dirty = _git("status", "--porcelain", "--untracked-files=no", cwd=path)
            if dirty.returncode != 0 or dirty.stdout.strip():
                raise BenchError(f"--against {rev}: the checkout at {path} is not clean")
            yield Tree(rev, path)
        finally:
            _git("worktree", "remove", "--force", str(path))


def over(value: float, reference: float) -> float | None:
    """`value / reference`, or None when there is no reference to divide by."""
    return value / reference if reference > 0 else None


def within(value: float, reference: float, factor: float) -> bool | None:
    """Whether `value` is at most `factor` times `reference` (None: nothing to judge by)."""
    share = over(value, reference)
    return None if share is None else share <= factor


def shown_ratio(value: float, reference: float) -> str:
    """`value / reference` as the tables show it (`-` when it cannot be made)."""
    share = over(value, reference)
    return "-" if share is None else f"{share:.2f}x"


def shown_verdict(met: bool | None) -> str:
    """A target's outcome as printed: pass, fail, or `-` when it could not be judged."""
    if met is None:
        return "-"
    return "[green]pass[/green]" if met else "[red]fail[/red]"
