"""`switchboard reload` against a running `switchboard serve` (embedded, the web page alone,
the demo model): the process reads its profile again on the SIGHUP the command sends, refuses
a profile that no longer loads and keeps running, and stops cleanly afterwards."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.e2e.processes import Deployment, clean_env, run_once, until
from tests.redis_server import free_port

pytestmark = pytest.mark.e2e


async def test_reload_reaches_a_running_serve_and_a_bad_profile_keeps_it_running(
    tmp_path: Path,
) -> None:
    env = clean_env(tmp_path, redis_url=None, SWITCHBOARD_WEB_PORT=str(free_port()))
    profile = Path(env["SWITCHBOARD_PROFILES_DIR"]) / "default"
    async with Deployment(env, tmp_path) as deployment:
        served = await deployment.start("serve")
        await served.until_logged(r"Web page: open ")
        (profile / "SOUL.md").write_text("You are Beta.", encoding="utf-8")
        (profile / "knowledge").mkdir()
        (profile / "knowledge" / "hours.md").write_text("Open 9 to 5.", encoding="utf-8")
        asked: list[str] = []

        async def reloaded() -> bool:
            # The first heartbeat may not be on the board yet: ask again until it is.
            done = await run_once(["reload"], env, tmp_path)
            asked.append(done.stdout + done.stderr)
            return done.returncode == 0

        await until(reloaded, 20.0, "switchboard reload", deployment.describe)
        assert f"serve {socket.gethostname()}:{served.process.pid}: asked to reload" in asked[-1]
        await served.until_logged(r"profile default reloaded: SOUL.md, knowledge")

        toml = profile / "profile.toml"
        toml.write_text("max_stepz = 3\n" + toml.read_text(encoding="utf-8"), encoding="utf-8")
        again = await run_once(["reload"], env, tmp_path)
        assert again.returncode == 0, again
        await served.until_logged(
            r"profile reload refused, keeping the running profile: .*profile\.toml: max_stepz"
        )
        assert served.returncode is None
        assert await served.stop() == 0

        nobody = await run_once(["reload"], env, tmp_path)
        assert nobody.returncode == 1
        (line,) = nobody.stderr.strip().splitlines()
        assert line.startswith(
            "switchboard: no running serve, worker or web process on this machine"
        )
