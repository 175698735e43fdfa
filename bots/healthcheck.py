"""`python -m bots.healthcheck`: exit 0 when this container's `/healthz` answers, else 1.

For a container's HEALTHCHECK: it reads the same settings as the process it probes
(`SWITCHBOARD_METRICS_PORT`, `SWITCHBOARD_METRICS_TOKEN`) and asks on loopback.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request


def main() -> int:
    """Probe `/healthz`; print one line on failure."""
    port = os.environ.get("SWITCHBOARD_METRICS_PORT")
    token = os.environ.get("SWITCHBOARD_METRICS_TOKEN", "")
    if not port:
        print("SWITCHBOARD_METRICS_PORT is not set: nothing to probe", file=sys.stderr)
        return 1
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
