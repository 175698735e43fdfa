"""Telegram's `switchboard doctor` checks: the token (`getMe`), and a webhook's secret and port."""

from __future__ import annotations

from collections.abc import Mapping

from channels.checks import Finding, PlatformChecks, json_object, listening

__all__ = ["CHECKS", "DEFAULT_API_URL", "DEFAULT_WEBHOOK_PORT"]

DEFAULT_API_URL = "https://api.telegram.org"
DEFAULT_WEBHOOK_PORT = 8443


async def _reach(env: Mapping[str, str]) -> Finding:
    import httpx

    root = (env.get("TELEGRAM_API_URL") or DEFAULT_API_URL).rstrip("/")
    # No timeout of its own: doctor bounds the whole check.
    async with httpx.AsyncClient(timeout=None) as client:
        response = await client.get(f"{root}/bot{env['TELEGRAM_BOT_TOKEN']}/getMe")
    body = json_object(response)
    if response.status_code == 200 and body.get("ok"):
        name = (body.get("result") or {}).get("username", "?")
        return Finding("ok", "telegram", f"the token works (bot @{name})")
    return Finding(
        "critical",
        "telegram",
        f"getMe failed ({response.status_code}: {body.get('description', 'no description')})",
        "check TELEGRAM_BOT_TOKEN (from @BotFather) and TELEGRAM_API_URL",
    )


def _exposure(env: Mapping[str, str]) -> list[Finding]:
    if env.get("TELEGRAM_WEBHOOK_URL") and not env.get("TELEGRAM_WEBHOOK_SECRET"):
        return [
            Finding(
                "critical",
                "telegram",
                "webhook mode without TELEGRAM_WEBHOOK_SECRET: anyone can post updates",
                "set TELEGRAM_WEBHOOK_SECRET to 16-256 random letters and digits",
            )
        ]
    return []


def _listeners(env: Mapping[str, str]) -> list[Finding]:
    if not env.get("TELEGRAM_WEBHOOK_URL"):
        return []  # long polling listens on nothing
    port = env.get("TELEGRAM_WEBHOOK_PORT") or str(DEFAULT_WEBHOOK_PORT)
    return [
        listening(
            "telegram",
            "the Telegram webhook",
            "0.0.0.0",
            port,
            "only the webhook secret stands between the internet and the bot",
            "put a TLS reverse proxy in front and firewall the port from anything else, "
            "or drop TELEGRAM_WEBHOOK_URL for long polling, which listens on nothing",
        )
    ]


CHECKS = PlatformChecks(reach=_reach, exposure=_exposure, listeners=_listeners)
