"""Discord's `switchboard doctor` check: the token's shape, then `GET /users/@me`."""

from __future__ import annotations

import re
from collections.abc import Mapping

from channels.checks import Finding, PlatformChecks, json_object

__all__ = ["CHECKS", "DEFAULT_API_URL", "TOKEN_SHAPE"]

DEFAULT_API_URL = "https://discord.com/api/v10"
# A bot token: the bot's id in base64, a timestamp, an HMAC, dot-separated.
TOKEN_SHAPE = r"(?<![\w-])[A-Za-z0-9_\-]{23,28}\.[A-Za-z0-9_\-]{6,7}\.[A-Za-z0-9_\-]{27,}"


async def _reach(env: Mapping[str, str]) -> Finding:
    import httpx

    token = env["DISCORD_BOT_TOKEN"]
    if not re.fullmatch(TOKEN_SHAPE, token):
        return Finding(
            "critical",
            "discord",
            "DISCORD_BOT_TOKEN does not have a bot token's shape (three dotted parts)",
            "copy the token again from the Developer Portal's Bot page",
        )
    root = (env.get("DISCORD_API_URL") or DEFAULT_API_URL).rstrip("/")
    # No timeout of its own: doctor bounds the whole check.
    async with httpx.AsyncClient(timeout=None) as client:
        response = await client.get(f"{root}/users/@me", headers={"Authorization": f"Bot {token}"})
    if response.status_code == 200:
        name = json_object(response).get("username", "?")
        return Finding("ok", "discord", f"the token works (bot {name})")
    return Finding(
        "critical",
        "discord",
        f"/users/@me failed ({response.status_code})",
        "check DISCORD_BOT_TOKEN and DISCORD_API_URL",
    )


# The gateway is a websocket the bot opens: Discord needs no listener of it.
CHECKS = PlatformChecks(reach=_reach)
