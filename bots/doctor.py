"""`switchboard doctor`'s checks: can this bot run, and is it safe to put in front of strangers?

Each check gives `Finding`s: one line each, with the fix. Three kinds of check:

- reachability, each bounded by a short timeout: the model provider (a one-token request),
  the configured platforms (each its own check), Redis (`PING`, then whether it persists:
  `CONFIG GET appendonly` and `save`) and the search API of `web_search` when one is
  configured (one search);
- posture, read from the settings and the profile: DM policies open to anyone while tools are
  on, what each configured platform's settings leave open (a webhook without its secret),
  listeners `serve` would refuse (the same checks) or that listen on every interface, no
  admins, no budgets, no rate limits, secret-shaped values inside profile files (the
  Redactor's patterns), a data folder others can read;
- the settings and the profile themselves (the caller loads them; a failure is one finding).

A `critical` finding makes `doctor` exit 1: the bot would not work, or would leak.

No platform is named here: what is checked of a platform is in its `ChannelSpec`'s `checks`
(`channels/checks.py`, and `checks.py` in the platform's package), run for every registered
platform the environment configures.
"""

from __future__ import annotations

import asyncio
import ipaddress
import stat
from collections.abc import Awaitable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import httpx

from bots.limits import effective_budgets
from bots.platforms import REGISTERED, Platforms
from bots.providers import PROVIDER_NAMES, build_registry
from bots.settings import ENV_FILE, Settings
from channels.base import ChannelSpec
from channels.checks import Finding, Severity, listening
from core.errors import ConfigError, ProviderError, SwitchboardError, ToolError
from core.messages import Message
from core.profile import Profile
from core.providers.base import ModelRequest, complete
from core.redact import Redactor
from core.tools.browser import unavailable

if TYPE_CHECKING:
    from core.tools.web_search import WebSearchSettings

__all__ = ["Finding", "Severity", "diagnose", "posture"]

# Seconds each reachability check may take.
TIMEOUT: Final = 10.0


async def diagnose(
    settings: Settings,
    profile: Profile,
    profile_folder: Path | None,
    *,
    reach: bool = True,
    platforms: Platforms = REGISTERED,
) -> list[Finding]:
    """Every finding for these settings and this profile; `reach` also asks the provider,
    the platforms and Redis (concurrently, each within `TIMEOUT`)."""
    found = posture(settings, profile, profile_folder, platforms)
    if reach:
        redact = settings.redactor()
        checks: list[tuple[str, Awaitable[Finding]]] = []
        if not any(f.area == "provider" for f in found):  # a provider it does not know
            checks.append(("provider", _provider(settings, profile)))
        checks.extend(_platform_checks(settings.environ, platforms))
        if settings.redis_url is not None:
            checks.append(("redis", _redis(settings.redis_url)))
        if (search := settings.web_search()) is not None:
            checks.append(("web_search", _web_search(search)))
        if settings.redis_url is None or settings.database_url:
            checks.append(("database", _database(settings)))
        found.extend(
            await asyncio.gather(*(_bounded(area, check, redact) for area, check in checks))
        )
    return found


def posture(
    settings: Settings,
    profile: Profile,
    profile_folder: Path | None,
    platforms: Platforms = REGISTERED,
) -> list[Finding]:
    """What the settings and profile expose, without reaching anything."""
    configured = [spec for spec in platforms.specs if spec.configured(settings.environ)]
    found: list[Finding] = []
    found.extend(_provider_name(settings))
    found.extend(_dm_policies(configured, profile))
    for spec in configured:
        found.extend(spec.checks.exposure(settings.environ))
    found.extend(_listeners(settings, profile))
    for spec in configured:
        found.extend(spec.checks.listeners(settings.environ))
    found.extend(_admins(profile, platforms))
    found.extend(_spending(profile))
    found.extend(_browser(profile))
    if profile_folder is not None:
        found.extend(_secrets_in(profile_folder, settings.redactor()))
    found.extend(_data_folder(settings.data_dir))
    found.extend(_env_file(ENV_FILE))
    found.extend(_database_placement(settings))
    return found


def _database_placement(settings: Settings) -> list[Finding]:
    """With Redis (processes on several machines), where the records are kept."""
    if settings.redis_url is None:
        return []
    if not settings.database_url:
        return [
            Finding(
                "warning",
                "database",
                "no DATABASE_URL: the records (history, approvals, schedules, costs) are kept "
                f"in the SQLite file {settings.database_path}, which works only when every "
                "process runs on one machine and uses that data folder",
                "set DATABASE_URL to a PostgreSQL database (postgresql://host/db) for processes "
                "on several machines",
            )
        ]
    if settings.database_is_sqlite:
        return [
            Finding(
                "warning",
                "database",
                "DATABASE_URL is a SQLite file: this works only when every process runs on "
                "one machine",
                "use PostgreSQL (DATABASE_URL=postgresql://...) for processes on several machines",
            )
        ]
    return []


# --- posture -------------------------------------------------------------------------------


def _provider_name(settings: Settings) -> list[Finding]:
    """A SWITCHBOARD_PROVIDER this build does not know: every turn would fail (the profile's
    own `provider` is checked when the profile is read)."""
    if settings.provider is None or settings.provider in PROVIDER_NAMES:
        return []
    return [
        Finding(
            "critical",
            "provider",
            f"SWITCHBOARD_PROVIDER: unknown provider {settings.provider!r}",
            f"set it to one of {', '.join(PROVIDER_NAMES)}, or unset it",
        )
    ]


def _dm_policy(profile: Profile, platform: str) -> str:
    """The platform's DM policy: `[access.<platform>] dm_policy`, pairing when unset."""
    entry = profile.settings.access.get(platform)
    return entry.dm_policy if entry is not None else "pairing"


def _dm_policies(configured: Sequence[ChannelSpec], profile: Profile) -> list[Finding]:
    found: list[Finding] = []
    options = profile.settings
    for spec in configured:
        mode = options.modes.get(spec.name, spec.default_mode)
        if _dm_policy(profile, spec.name) != "open" or mode == "no-tools":
            continue
        severity: Severity = "critical" if mode == "full" else "warning"
        found.append(
            Finding(
                severity,
                spec.name,
                f"anyone can DM the bot and use its tools (mode {mode!r})",
                f'set [access.{spec.name}] dm_policy = "pairing" (or an [allow.{spec.name}] '
                "users list) in profile.toml",
            )
        )
    return found


def _listeners(settings: Settings, profile: Profile) -> list[Finding]:
    """What `serve` would refuse to listen with (its own checks, run here), and each of its
    own listeners that would be reachable from other machines (the platforms' are theirs)."""
    # Imported here: they bring aiohttp's server, which the rest of doctor does not need.
    from bots.commands.notify import check_hooks
    from bots.operations import operations_settings
    from bots.web import web_settings

    found: list[Finding] = []
    try:
        page = web_settings(settings.environ)
    except ConfigError as exc:
        found.append(Finding("critical", "web", str(exc), _REFUSED))
    else:
        if page is not None and not _loopback(page.host):
            found.append(listening("web", "the web page", page.host, page.port, _PAGE_RISK))
    for area, check, what in (
        ("hooks", lambda: check_hooks(settings, profile), "the hooks listener"),
        ("metrics", lambda: operations_settings(settings), "the operations endpoints"),
    ):
        try:
            checked = check()
        except ConfigError as exc:
            found.append(Finding("critical", area, str(exc), _REFUSED))
            continue
        if checked is not None and not _loopback(checked.host):
            risk = "anyone who can reach it is one token away from it"
            found.append(listening(area, what, checked.host, checked.port, risk))
    return found


_REFUSED: Final = (
    "correct it: `serve` refuses to start with it (`openssl rand -hex 24` makes a token)"
)
_PAGE_RISK: Final = (
    "it runs tools in full mode for whoever holds its token, and a token sent over plain HTTP "
    "can be read on the way"
)


def _loopback(host: str) -> bool:
    """Whether only this machine can reach a listener bound to `host`."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _admins(profile: Profile, platforms: Platforms) -> list[Finding]:
    local = platforms.local_platforms()
    remote = [a for a in profile.settings.admins if a.split(":", 1)[0] not in local]
    if remote:
        return [Finding("ok", "admins", f"{len(remote)} admin(s) on chat platforms")]
    served = platforms.served()
    example = served[0] if served else "<platform>"
    return [
        Finding(
            "warning",
            "admins",
            "no admins on any chat platform: nobody there can approve or confirm",
            f'add admins = ["{example}:<your user id>"] to profile.toml',
        )
    ]


def _spending(profile: Profile) -> list[Finding]:
    found: list[Finding] = []
    if not effective_budgets(profile.settings).any_set():
        found.append(
            Finding(
                "warning",
                "budgets",
                "no spending limits: strangers and schedules can run up costs",
                "add a [budgets] table (per_user_daily, global_daily...; docs/budgets.md)",
            )
        )
    limits = profile.settings.limits
    if not (limits.rate_limit.strip() or limits.chat_rate_limit.strip() or limits.daily_turns):
        found.append(
            Finding(
                "warning",
                "limits",
                "every rate limit is off",
                'set [limits] rate_limit = "20/minute" in profile.toml',
            )
        )
    return found


def _browser(profile: Profile) -> list[Finding]:
    """`[browser] enabled` where it cannot run: the tool is not offered, and this says why."""
    options = profile.settings.browser
    if not options.enabled:
        return []
    found: list[Finding] = []
    why = unavailable(options)
    if why is not None:
        found.append(
            Finding(
                "warning",
                "browser",
                f"[browser] is enabled but the browser tool is not offered: {why}",
                "install what is missing, or set [browser] enabled = false",
            )
        )
    if options.allow_loopback:
        found.append(
            Finding(
                "warning",
                "browser",
                "[browser] allow_loopback = true: pages reach this machine's own services",
                "it is meant for tests; remove it",
            )
        )
    return found


def _secrets_in(folder: Path, redact: Redactor) -> list[Finding]:
    """A finding per profile file line that the Redactor would scrub (the value is not shown)."""
    found: list[Finding] = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if redact(line) != line:
                found.append(
                    Finding(
                        "critical",
                        "profile",
                        f"{path}:{number} holds a secret-shaped value",
                        "move the secret to the environment (.env) and rotate it",
                    )
                )
    return found


def _data_folder(folder: Path) -> list[Finding]:
    """The data folder must keep other users out: not readable, nor passable to reach the
    SQLite file; a database file counts only where the folder lets others through."""
    if not folder.exists():
        return [Finding("ok", "data", f"{folder} does not exist yet (the store makes it 0700)")]
    found: list[Finding] = []
    mode = stat.S_IMODE(folder.stat().st_mode)
    if mode & (stat.S_IROTH | stat.S_IXOTH):
        found.append(_exposed(folder, mode, "every user of this machine", "critical"))
        files = [p for p in sorted(folder.glob("*.db*")) if p.stat().st_mode & stat.S_IROTH]
        found.extend(
            _exposed(p, stat.S_IMODE(p.stat().st_mode), "anyone", "critical") for p in files
        )
    elif mode & (stat.S_IRGRP | stat.S_IXGRP):
        found.append(_exposed(folder, mode, "its group", "warning"))
    return found or [Finding("ok", "data", f"{folder} is private to its owner")]


def _exposed(path: Path, mode: int, whom: str, severity: Severity) -> Finding:
    return Finding(
        severity,
        "data",
        f"{path} is open to {whom} (mode {mode:o})",
        f"chmod {'700' if path.is_dir() else '600'} {path}",
    )


def _env_file(path: Path) -> list[Finding]:
    """`.env` holds the keys and tokens: other users of the machine must not read it."""
    if not path.is_file():
        return []
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & stat.S_IROTH:
        return [
            Finding(
                "critical",
                "env",
                f"{path} (keys and tokens) is readable by every user (mode {mode:o})",
                f"chmod 600 {path}",
            )
        ]
    return []


# --- reachability --------------------------------------------------------------------------


async def _bounded(area: str, check: Awaitable[Finding], redact: Redactor) -> Finding:
    """The check's finding; a timeout or a failure to connect is a critical one; scrubbed."""
    try:
        async with asyncio.timeout(TIMEOUT):
            finding = await check
    except TimeoutError:
        return Finding("critical", area, f"no answer within {TIMEOUT:g} s", "check the network")
    except (OSError, httpx.HTTPError, SwitchboardError) as exc:
        return Finding("critical", area, redact(f"unreachable: {exc}"), "check the network")
    return Finding(finding.severity, finding.area, redact(finding.text), finding.fix)


async def _web_search(search: WebSearchSettings) -> Finding:
    """One search for one result: the key, the address and the JSON format all work."""
    from core.tools import ToolContext, web_search_tool

    # Within the check's own bound, so a slow API is this warning, not a critical timeout.
    bound = TIMEOUT * 0.8
    tool = web_search_tool(search.model_copy(update={"max_results": 1, "timeout": bound}))
    try:
        await tool({"query": "switchboard"}, ToolContext(session_id="doctor"))
    except ToolError as exc:
        fix = (
            "check BRAVE_API_KEY (and BRAVE_BASE_URL if set)"
            if search.api == "brave"
            else "check SEARXNG_URL and that the instance's settings.yml lists json in "
            "search.formats"
        )
        return Finding("warning", "web_search", f"{exc} The model gets this error too.", fix)
    return Finding("ok", "web_search", f"{search.api_name} answers searches")


async def _provider(settings: Settings, profile: Profile) -> Finding:
    options = profile.settings
    try:
        resolved = build_registry(settings).resolve(
            settings.provider or options.provider, settings.model or options.model
        )
    except SwitchboardError as exc:
        return Finding("critical", "provider", str(exc), "fix SWITCHBOARD_PROVIDER or the key")
    provider = resolved.provider
    try:
        if resolved.fell_back_from is not None:
            return Finding(
                "warning",
                "provider",
                f"{resolved.fell_back_from} is not available; {provider.name} answers instead",
                f"set the {resolved.fell_back_from} API key",
            )
        if provider.name == "demo":
            return Finding(
                "warning",
                "provider",
                "no model provider key: answers come from the offline demo",
                "set ANTHROPIC_API_KEY or OPENAI_API_KEY",
            )
        request = ModelRequest(
            model=resolved.model, messages=[Message.user("Reply with OK.")], max_tokens=1
        )
        try:
            await complete(provider, request)
        except ProviderError as exc:
            fixes = {
                "auth": f"check the {provider.name.upper()}_API_KEY",
                "model_not_found": "check SWITCHBOARD_MODEL or the profile's model",
                "billing": "check the account's credit",
            }
            return Finding(
                "critical",
                "provider",
                f"{provider.name} did not answer a one-token request ({exc.kind}): {exc}",
                fixes.get(exc.kind, "check the provider's status and base URL"),
            )
        return Finding("ok", "provider", f"{provider.name} answers with {resolved.model}")
    finally:
        await provider.aclose()


def _platform_checks(
    env: Mapping[str, str], platforms: Platforms
) -> list[tuple[str, Awaitable[Finding]]]:
    """The reachability check of each configured platform that has one."""
    return [
        (spec.name, spec.checks.reach(env))
        for spec in platforms.specs
        if spec.configured(env) and spec.checks.reach is not None
    ]


async def _database(settings: Settings) -> Finding:
    """Connect to the records' database and read its schema revision (a missing SQLite file
    is not made: the first start makes it)."""
    from bots.commands.db import describe_revision
    from core.backends.sql.store import database_revision, head_revision, sqlite_file

    path = sqlite_file(settings.store_url)
    if path is not None and not path.exists():
        return Finding("ok", "database", f"{path} is not created yet; the first start makes it")
    revision = await database_revision(settings.store_url)
    said = describe_revision(revision)
    if revision.current == head_revision() and not revision.old_store:
        return Finding("ok", "database", f"connected; schema revision {said}")
    return Finding(
        "warning",
        "database",
        f"connected; schema {said}",
        "run `switchboard db upgrade` (every process also upgrades it on start)",
    )


async def _redis(url: str) -> Finding:
    from redis.exceptions import RedisError

    from core.backends.redis.client import connect_redis, describe_redis_error

    try:
        client = connect_redis(url, socket_connect_timeout=TIMEOUT)
    except ValueError as exc:
        return Finding("critical", "redis", str(exc), "check REDIS_URL")
    try:
        await client.ping()
    except RedisError as exc:
        await client.aclose()
        return Finding(
            "critical",
            "redis",
            f"PING failed: {describe_redis_error(exc)}",
            "check REDIS_URL and the server",
        )
    try:
        return await _persistence(client)
    finally:
        await client.aclose()


async def _persistence(client: Any) -> Finding:
    """Whether Redis keeps what it holds over a restart: the work in flight (queued messages,
    replies and schedule runs, mailboxes); the records are in the database. Managed servers
    may refuse CONFIG."""
    from redis.exceptions import ResponseError

    try:
        appendonly = await client.config_get("appendonly")
        save = await client.config_get("save")
    except ResponseError as exc:
        return Finding(
            "warning",
            "redis",
            f"PING answered, but could not tell whether Redis persists (CONFIG GET refused: "
            f"{exc}); without persistence a restart loses the work in flight (queued "
            "messages, replies, schedule runs)",
            "check with the provider that AOF (appendonly) is on",
        )
    aof = _config_value(appendonly, "appendonly") == "yes"
    snapshots = _config_value(save, "save").strip()
    if aof:
        return Finding("ok", "redis", "PING answered; it persists (appendonly yes)")
    fix = "set `appendonly yes` in redis.conf (or `CONFIG SET appendonly yes`, then CONFIG REWRITE)"
    if snapshots:
        return Finding(
            "warning",
            "redis",
            f"Redis only snapshots (save {snapshots!r}, appendonly no): a restart loses the "
            "work queued since the last snapshot",
            fix,
        )
    return Finding(
        "warning",
        "redis",
        "Redis does not persist (appendonly no, save ''): a restart loses every queued "
        "message, reply and schedule run (the work in flight; the records are in the database)",
        fix,
    )


def _config_value(answer: Any, name: str) -> str:
    """One value of a `CONFIG GET` answer (a dict, with bytes or str keys)."""
    if not isinstance(answer, dict):
        return ""
    value = answer.get(name, answer.get(name.encode(), ""))
    return value.decode() if isinstance(value, bytes) else str(value)
