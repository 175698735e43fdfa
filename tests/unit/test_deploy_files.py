"""The files in deploy/: the Compose file runs what the CLI has, the dashboard shows what the
processes record."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
from ruamel.yaml import YAML

from bots.cli import cli
from bots.platforms import REGISTERED
from core.metrics import Metrics

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
CHECK_JSONSCHEMA = Path(sys.executable).with_name("check-jsonschema")


def _compose() -> dict[str, Any]:
    loaded = YAML(typ="safe").load((DEPLOY / "docker-compose.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_the_compose_file_follows_the_compose_specification() -> None:
    checked = subprocess.run(
        [str(CHECK_JSONSCHEMA), "--builtin-schema", "vendor.compose-spec", "docker-compose.yml"],
        cwd=DEPLOY,
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_compose_runs_redis_with_aof_a_gateway_per_platform_workers_a_scheduler_the_page() -> None:
    services = _compose()["services"]

    assert "--appendonly" in services["redis"]["command"]
    gateways = {
        name: service["command"] for name, service in services.items() if name.startswith("gateway")
    }
    assert gateways == {
        f"gateway-{platform}": ["gateway", platform] for platform in REGISTERED.served()
    }
    for name in gateways:
        assert services[name]["profiles"] == [name.removeprefix("gateway-")]
    assert services["worker"]["deploy"]["replicas"] == 2
    assert services["scheduler"]["command"] == ["scheduler"]
    assert services["web"]["command"] == ["web"]
    assert services["web"]["environment"]["SWITCHBOARD_WEB_HOST"] == "0.0.0.0"
    # The commands `switchboard --help` lists (most are imported only when they run).
    commands = cli.list_commands(click.Context(cli))
    assert services["postgres"]["volumes"] == ["postgres-data:/var/lib/postgresql/data"]
    for name, service in services.items():
        if name in ("redis", "postgres"):
            continue
        command = service["command"][0]
        assert command in commands, f"{name} runs `switchboard {command}`, which is no command"
        assert service["environment"]["REDIS_URL"] == "redis://redis:6379/0"
        assert service["depends_on"]["redis"]["condition"] == "service_healthy"
        # The records are in PostgreSQL, not in Redis.
        assert service["environment"]["DATABASE_URL"].startswith("postgresql://switchboard:")
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_the_dashboard_shows_only_metrics_that_exist_and_every_one_of_them() -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "switchboard.json").read_text())
    queries = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    used = {
        re.sub(r"_(total|bucket|sum|count)$", "", name)
        for query in queries
        for name in re.findall(r"switchboard_\w+", query)
    }
    recorded = {family.name for family in Metrics().registry.collect()}

    assert used == recorded


# What Procfile runners (honcho, foreman, Heroku) read as a process: `name: command`; any other
# line, a comment among them, is skipped.
_PROCFILE_LINE = re.compile(r"^([A-Za-z0-9_-]+):\s*(.+)$")


def test_the_procfile_runs_without_any_platform_token_and_offers_every_gateway() -> None:
    lines = (DEPLOY.parent / "Procfile").read_text().splitlines()
    processes = {m[1]: m[2] for line in lines if (m := _PROCFILE_LINE.match(line))}
    # A runner stops every process when one exits, and a gateway without its token exits: the
    # shipped file starts none, and has a line to uncomment for each platform.
    assert processes == {
        "worker": "switchboard worker",
        "scheduler": "switchboard scheduler",
        "web": "switchboard web",
    }
    for platform in REGISTERED.served():
        assert f"# {platform}: switchboard gateway {platform}" in lines


def test_the_image_health_check_without_metrics_asks_whether_the_store_answers(
    tmp_path: Path,
) -> None:
    # The example env leaves the metrics endpoints off: the container's HEALTHCHECK must still
    # say healthy when the process's store answers (here the embedded one: an SQLite file).
    # Before the process made its store, the check says so (a mistyped data folder must not
    # look healthy); once it exists, healthy.
    env = {
        "PATH": os.environ.get("PATH", ""),
        "SWITCHBOARD_DATA_DIR": str(tmp_path / "data"),
    }

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
        )

    before = run("-m", "bots.healthcheck")
    assert before.returncode == 1, before.stdout + before.stderr
    made = run("-m", "bots", "chat")  # input ends at once: the store is made, nothing asked
    assert made.returncode == 0, made.stdout + made.stderr
    checked = run("-m", "bots.healthcheck")
    assert checked.returncode == 0, checked.stdout + checked.stderr
