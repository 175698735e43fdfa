"""`python -m bots.healthcheck`: exit 0 when this container's `/healthz` answers, else 1.

For a container's HEALTHCHECK: it reads the same settings as the process it probes
(`SWITCHBOARD_METRICS_PORT`, `SWITCHBOARD_METRICS_TOKEN`) and asks on loopback. With the
endpoints off (no `SWITCHBOARD_METRICS_PORT`) it runs `switchboard health` instead: the store
and Redis answer.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request


def main() -> int:
    """Probe `/healthz`; print one line on failure."""
    port = os.environ.get("SWITCHBOARD_METRICS_PORT")
    token = os.environ.get("SWITCHBOARD_METRICS_TOKEN", "")
    if not port:
        # Nothing of the process to ask: whether what it depends on answers will do.
        health = [sys.executable, "-m", "bots", "health"]
        return subprocess.run(health, check=False, stdout=subprocess.DEVNULL).returncode
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/healthz", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=4) as response:
            return 0 if response.status == 200 else 1
    except (urllib.error.URLError, OSError) as exc:
        print(f"healthz: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
