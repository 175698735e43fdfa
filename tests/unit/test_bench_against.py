"""`python -m bench w1|w3 --against REV` (issue 33, point 7): what can be checked without
running a workload. The command line (which workloads get the other tree, an unknown
revision as one line and exit 1), the temporary worktree made and removed with real git, and
the pass/fail of the tables that set this tree beside REV and the floor."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import bench.__main__ as bench_cli
from bench.against import (
    DEFAULT_REV,
    THIS_TREE,
    Tree,
    checkout,
    shown_ratio,
    shown_verdict,
    within,
)
from bench.common import ROOT, BenchError
from bench.distributed import w3_comparison, w3_cpu_target
from bench.turns import w1_comparison, w1_targets


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Tree | None]]:
    """Each workload the command line would run, with the tree it was given; none runs."""
    asked: list[tuple[str, Tree | None]] = []

    def runner(name: str, quick: bool, chats: int | None, against: Tree | None) -> Any:
        asked.append((name, against))
        if against is not None:
            # The checkout is there while the workloads run.
            assert (against.root / "pyproject.toml").is_file()
        return lambda: {"ran": name}

    monkeypatch.setattr(bench_cli, "_runner", runner)
    return asked


def _worktrees() -> str:
    listed = subprocess.run(
        ["git", "worktree", "list", "--porcelain"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return listed.stdout


def test_w1_and_w3_get_the_checkout_of_against_and_the_others_do_not(
    runs: list[tuple[str, Tree | None]], tmp_path: Path
) -> None:
    done = CliRunner().invoke(
        bench_cli.main, ["w1", "w2", "w3", "--against", "HEAD", "--results", str(tmp_path)]
    )

    assert done.exit_code == 0, done.output
    assert [name for name, _ in runs] == ["w1", "w2", "w3"]
    w1_tree, w2_tree, w3_tree = (tree for _, tree in runs)
    assert w1_tree is not None and w1_tree == w3_tree and w2_tree is None
    assert w1_tree.label == "HEAD"
    # One checkout for the run, removed at its end.
    assert not w1_tree.root.exists()
    assert str(w1_tree.root) not in _worktrees()
    assert len(list(tmp_path.glob("*.json"))) == 3


def test_alone_and_workloads_without_a_comparison_make_no_checkout(
    runs: list[tuple[str, Tree | None]], tmp_path: Path
) -> None:
    for args in (["w1", "--alone"], ["w2", "w4", "--against", "no-such-revision"]):
        done = CliRunner().invoke(bench_cli.main, [*args, "--results", str(tmp_path)])
        assert done.exit_code == 0, done.output
    assert runs == [("w1", None), ("w2", None), ("w4", None)]


def test_an_unknown_revision_is_one_line_and_exit_1_before_any_workload_runs(
    runs: list[tuple[str, Tree | None]], tmp_path: Path
) -> None:
    for rev in ("no-such-revision", "--", "0123456789abcdef0123"):
        done = CliRunner().invoke(
            bench_cli.main, ["w3", "--quick", "--against", rev, "--results", str(tmp_path)]
        )
        assert done.exit_code == 1, done.output
        assert len(done.output.strip().splitlines()) == 1
        assert done.output.startswith("bench could not start: --against")
        assert "Traceback" not in done.output
    assert runs == []


def test_the_default_revision_is_the_commit_before_the_flow_issue() -> None:
    done = CliRunner().invoke(bench_cli.main, ["--help"])

    assert done.exit_code == 0
    assert DEFAULT_REV == "f92e00d"
    assert "--against REV" in done.output and "f92e00d" in done.output


def test_a_checkout_is_the_revision_clean_and_gone_afterwards() -> None:
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    with checkout("HEAD") as tree:
        there = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=tree.root, capture_output=True, text=True, check=True
        ).stdout.strip()
        assert there == head
        assert str(tree.root) in _worktrees()
    assert not tree.root.exists()
    assert str(tree.root) not in _worktrees()


def test_a_checkout_of_something_that_is_no_commit_says_so() -> None:
    with pytest.raises(BenchError, match="no such commit"), checkout("HEAD:README.md"):
        pass


def test_a_tree_puts_itself_first_on_pythonpath_and_its_own_profiles() -> None:
    other = Tree("old", Path("/somewhere/old"))
    env = {"PYTHONPATH": str(ROOT), "SWITCHBOARD_PROFILES_DIR": str(ROOT / "profiles"), "X": "1"}

    assert other.env(env) == {
        "PYTHONPATH": "/somewhere/old",
        "SWITCHBOARD_PROFILES_DIR": "/somewhere/old/profiles",
        "X": "1",
    }
    # A profiles folder of the bench's own making stays.
    assert other.env({"SWITCHBOARD_PROFILES_DIR": "/tmp/p"})["SWITCHBOARD_PROFILES_DIR"] == "/tmp/p"
    assert THIS_TREE.env({})["PYTHONPATH"] == str(ROOT)


def test_ratios_and_verdicts_as_printed() -> None:
    assert within(3.0, 2.0, 1.5) is True
    assert within(3.01, 2.0, 1.5) is False
    assert within(1.0, 0.0, 1.5) is None
    assert shown_ratio(3.0, 2.0) == "1.50x"
    assert shown_ratio(3.0, 0.0) == "-"
    assert "pass" in shown_verdict(True) and "fail" in shown_verdict(False)
    assert shown_verdict(None) == "-"


def _w1_figures(chat_p50: float, rev_chat_p50: float) -> dict[str, dict[str, float]]:
    def engine(p50: float) -> dict[str, float]:
        return {"p50_ms": p50, "cpu_ms_per_turn": p50 / 2, "peak_rss_mb": 100.0, "growth": 1.0}

    return {
        "bare": engine(10.0),
        "ours": engine(14.0),
        "chat": engine(chat_p50),
        "rev-ours": engine(12.0),
        "rev-chat": engine(rev_chat_p50),
    }


def test_w1_passes_the_chat_path_within_twice_the_no_sdk_floor_and_fails_it_beyond() -> None:
    target = "chat piped p50 ms/turn at most 2x the no-SDK floor's"
    assert w1_targets(_w1_figures(20.0, 30.0))[target] is True
    assert w1_targets(_w1_figures(20.5, 10.0))[target] is False

    rows = w1_comparison(_w1_figures(20.0, 30.0), "f92e00d")
    first = rows[0]
    assert first[:4] == ["chat piped: p50 ms/turn", 20.0, 30.0, 10.0]
    assert first[4:] == ["2.00x", "3.00x", "0.67x"]
    verdicts = rows[-1]
    assert verdicts[0] == "target: chat piped p50 within 2x the floor"
    assert "pass" in verdicts[1] and "fail" in verdicts[2]


def _w3_phase(cpu: float, floor: float = 4.0) -> dict[str, Any]:
    paced = {
        "first_text_p50_ms": 20.0,
        "first_text_p95_ms": 30.0,
        "redis": {"server_commands_per_turn": 40.0, "round_trips_per_turn": 19.0},
        "database": {"statements_per_turn": 25.0, "transactions_per_turn": 12.0},
    }
    return {
        "cpu_ms_per_turn": {"workers": cpu},
        "yardstick_cpu_ms": floor,
        "turns_per_s": 60.0,
        "workers": 2,
        "first_text_p50_ms": 50.0,
        "first_text_p95_ms": 90.0,
        "paced": paced,
    }


def test_w3_passes_worker_cpu_within_one_and_a_half_times_revs_and_prints_the_rest() -> None:
    assert w3_cpu_target(_w3_phase(6.0), _w3_phase(4.0)) is True
    assert w3_cpu_target(_w3_phase(6.1), _w3_phase(4.0)) is False
    assert w3_cpu_target(_w3_phase(6.0), _w3_phase(0.0)) is None

    rows = w3_comparison(
        {1: _w3_phase(6.0), 2: _w3_phase(9.0)}, {1: _w3_phase(4.0), 2: _w3_phase(4.0)}
    )
    cpu_rows = [row for row in rows if row[0].endswith("worker CPU ms/turn")]
    assert [row[0] for row in cpu_rows] == [
        "1 worker(s): worker CPU ms/turn",
        "2 worker(s): worker CPU ms/turn",
    ]
    assert cpu_rows[0][1:6] == [6.0, 4.0, 4.0, "1.50x", "1.50x"]
    assert "pass" in cpu_rows[0][6] and "fail" in cpu_rows[1][6]
    printed = {row[0].strip(): row for row in rows}
    assert printed["turns/s per worker"][1] == 30.0
    assert printed["one at a time: first text p95 ms"][1:3] == [30.0, 30.0]
    assert printed["one at a time: SQL transactions/turn"][5] == "1.00x"
    assert printed["one at a time: Redis round trips/turn, workers"][1:3] == [19.0, 19.0]
    # Printed without a target: only the CPU rows carry a verdict.
    assert all(row[6] == "" for row in rows if row not in cpu_rows)


def test_without_git_the_comparison_says_so_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")

    with pytest.raises(BenchError, match="needs git"), checkout("HEAD"):
        pass
