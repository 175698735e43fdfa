"""Slack's `switchboard doctor` checks: the token (`auth.test`), and the Events API endpoint's
signing secret and port."""

from __future__ import annotations

from collections.abc import Mapping

from channels.checks import Finding, PlatformChecks, json_object, listening

__all__ = ["CHECKS", "DEFAULT_API_URL", "DEFAULT_PORT"]

DEFAULT_API_URL = "https://slack.com/api/"
DEFAULT_PORT = 3000


async def _reach(env: Mapping[str, str]) -> Finding:
    import httpx

    root = env.get("SLACK_API_URL") or DEFAULT_API_URL
    root = root if root.endswith("/") else f"{root}/"
    # No timeout of its own: doctor bounds the whole check.
    async with httpx.AsyncClient(timeout=None) as client:
        response = await client.post(
            f"{root}auth.test", headers={"Authorization": f"Bearer {env['SLACK_BOT_TOKEN']}"}
        )
    body = json_object(response)
    if body.get("ok"):
        return Finding("ok", "slack", f"the token works (team {body.get('team', '?')})")
    return Finding(
        "critical",
        "slack",
        f"auth.test failed ({body.get('error', response.status_code)})",
        "check SLACK_BOT_TOKEN (xoxb-...) and SLACK_API_URL",
    )


def _events_api(env: Mapping[str, str]) -> bool:
    """Whether the adapter serves the Events API over HTTP (no app token: no Socket Mode)."""
    return not env.get("SLACK_APP_TOKEN")


def _exposure(env: Mapping[str, str]) -> list[Finding]:
    if _events_api(env) and not env.get("SLACK_SIGNING_SECRET"):
        return [
            Finding(
                "critical",
                "slack",
                "Events API without SLACK_SIGNING_SECRET: requests cannot be verified",
                "set SLACK_SIGNING_SECRET (the app's Basic Information page), or "
                "SLACK_APP_TOKEN for Socket Mode",
            )
        ]
    return []


def _listeners(env: Mapping[str, str]) -> list[Finding]:
    if not _events_api(env):
        return []
    port = env.get("SLACK_PORT") or str(DEFAULT_PORT)  # shown, not parsed: the adapter checks it
    return [
        listening(
            "slack",
            "the Slack Events API endpoint",
            "0.0.0.0",
            port,
            "only the signing secret stands between the internet and the bot",
            "put a TLS reverse proxy in front and firewall the port from anything else, "
            "or use Socket Mode (SLACK_APP_TOKEN), which listens on nothing",
        )
    ]


CHECKS = PlatformChecks(reach=_reach, exposure=_exposure, listeners=_listeners)
