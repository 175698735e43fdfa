"""The Compose deployment's always-on processes, started with the settings a container of
`deploy/docker-compose.yml` gets from the copied example env: they must run, not exit (and
restart in a loop) on a setting the example leaves empty."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from dotenv import dotenv_values
from ruamel.yaml import YAML

from tests.e2e.processes import REPO, Deployment, clean_env

pytestmark = pytest.mark.e2e


def _dockerfile_env() -> dict[str, str]:
    """The `ENV` settings of the final image (its last `ENV` instruction)."""
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    [*_, line] = (line for line in text.splitlines() if line.startswith("ENV "))
    return dict(pair.split("=", 1) for pair in line.removeprefix("ENV ").split())


def _compose_env(service: str) -> dict[str, str]:
    """`environment` of a Compose service, anchors resolved."""
    compose = YAML(typ="safe").load((REPO / "deploy" / "docker-compose.yml").read_text())
    return {k: str(v) for k, v in compose["services"][service]["environment"].items()}


def _container_env(
    service: str, tmp_path: Path, redis_url: str, database_url: str
) -> dict[str, str]:
    """Image, then `env_file` (the example, as copied), then the service's `environment`, as
    Compose layers them; with this machine's paths and the test's Redis."""
    example = dotenv_values(REPO / "deploy" / "switchboard.env.example")
    env = {
        **_dockerfile_env(),
        **{k: v or "" for k, v in example.items()},
        **_compose_env(service),
    }
    # Where the container's paths and addresses are not this machine's.
    env.update(
        REDIS_URL=redis_url,
        DATABASE_URL=database_url,
        SWITCHBOARD_DATA_DIR=str(tmp_path / "data"),
        SWITCHBOARD_METRICS_HOST="127.0.0.1",
    )
    return {**clean_env(tmp_path, redis_url=redis_url), **env}


@pytest.mark.parametrize("service", ["worker", "scheduler"])
async def test_every_always_on_service_runs_with_the_example_env(
    service: str, redis_url: str, postgres_url: str, tmp_path: Path
) -> None:
    env = _container_env(service, tmp_path, redis_url, postgres_url)
    async with Deployment(env, tmp_path) as deployment:
        process = await deployment.start(service)
        await process.until_logged(rf"switchboard {service} started", 30)
        assert await process.stop() == 0, process.describe()
    assert not re.search(r"error|Traceback", process.log), process.describe()
