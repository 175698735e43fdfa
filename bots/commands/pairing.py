"""`switchboard pairing`: answer the pairing requests of people who wrote to the bot, and take
approvals back (`docs/access.md`)."""

from __future__ import annotations

import asyncio

import click

from bots.app import open_store
from bots.commands.common import AS_JSON, echo_json, listing, settings_from, stdout, whole, wrapped
from bots.commands.where import require_data
from bots.platforms import REGISTERED
from bots.settings import Settings
from core.access import Pairing
from core.errors import ConfigError
from core.scheduling.book import ScheduleBook

__all__ = ["pairing"]


@click.group()
def pairing() -> None:
    """Let people in who asked with a pairing code, or keep them out.

    Under `dm_policy = "pairing"` (the default), a stranger's direct message gets an
    8-character code and nothing else; approve it here and their next message is answered.
    The store is the one the settings name: DATABASE_URL, else SWITCHBOARD_DATA_DIR's SQLite
    file; every worker sees a change at once.
    """


@pairing.command("list")
@click.argument("platform", required=False)
@AS_JSON
@click.pass_context
def pairing_list(ctx: click.Context, platform: str | None, as_json: bool) -> None:
    """List pending requests and approved people (of PLATFORM, or every platform)."""
    settings = settings_from(ctx)
    checked = _platform(platform) if platform else None
    require_data(settings)
    asyncio.run(_list(settings, checked, as_json))


@pairing.command("approve")
@click.argument("platform")
@click.argument("code")
@click.option("--admin", is_flag=True, help="Approve the person as an admin of the bot.")
@click.pass_context
def pairing_approve(ctx: click.Context, platform: str, code: str, admin: bool) -> None:
    """Let in the person whose request has CODE on PLATFORM."""
    settings = settings_from(ctx)
    checked = _platform(platform)
    require_data(settings)
    asyncio.run(_approve(settings, checked, code, admin))


@pairing.command("deny")
@click.argument("platform")
@click.argument("code")
@click.pass_context
def pairing_deny(ctx: click.Context, platform: str, code: str) -> None:
    """Refuse the request with CODE; its person cannot ask again until it would have expired."""
    settings = settings_from(ctx)
    checked = _platform(platform)
    require_data(settings)
    asyncio.run(_deny(settings, checked, code))


@pairing.command("revoke")
@click.argument("platform")
@click.argument("user_id")
@click.pass_context
def pairing_revoke(ctx: click.Context, platform: str, user_id: str) -> None:
    """Take back the approval of USER_ID on PLATFORM; their next message is not answered."""
    settings = settings_from(ctx)
    checked = _platform(platform)
    require_data(settings)
    asyncio.run(_revoke(settings, checked, user_id))


def _platform(name: str) -> str:
    """A platform with access policies (not a local one), in lower case; else `ConfigError`."""
    platform = name.strip().lower()
    known = sorted(set(REGISTERED.default_modes()) - REGISTERED.local_platforms())
    if platform not in known:
        raise ConfigError(f"unknown platform {name!r} (known: {', '.join(known)})")
    return platform


async def _list(settings: Settings, platform: str | None, as_json: bool) -> None:
    async with open_store(settings) as store:
        book = Pairing(store)
        pending = await book.pending(platform)
        approved = await book.approvals(platform)
    if as_json:
        echo_json(
            {
                "pending": [request.model_dump(mode="json") for request in pending],
                "approved": [approval.model_dump(mode="json") for approval in approved],
            }
        )
        return
    console = stdout()
    if pending:
        table = listing(
            whole("platform"),
            whole("code"),
            whole("user id"),
            wrapped("name"),
            whole("expires (UTC)"),
        )
        for request in pending:
            table.add_row(
                request.platform,
                request.code,
                request.user_id,
                request.user_name,
                f"{request.expires_at:%Y-%m-%d %H:%M}",
            )
        console.print("Pending requests:", markup=False)
        console.print(table)
    else:
        console.print("No pending requests.", markup=False)
    if approved:
        table = listing(
            whole("platform"),
            whole("user id"),
            wrapped("name"),
            whole("admin"),
            whole("approved (UTC)"),
            wrapped("by"),
        )
        for approval in approved:
            table.add_row(
                approval.platform,
                approval.user_id,
                approval.user_name,
                "yes" if approval.admin else "",
                f"{approval.approved_at:%Y-%m-%d %H:%M}",
                approval.approved_by,
            )
        console.print("Approved people:", markup=False)
        console.print(table)
    else:
        console.print("Nobody approved yet.", markup=False)


async def _approve(settings: Settings, platform: str, code: str, admin: bool) -> None:
    async with open_store(settings) as store:
        approval = await Pairing(store).approve(platform, code, admin=admin, by="cli")
    if approval is None:
        raise ConfigError(_no_request(platform, code))
    role = " as an admin" if approval.admin else ""
    name = f" ({approval.user_name})" if approval.user_name else ""
    click.echo(f"Approved {platform} user {approval.user_id}{name}{role}.")


async def _deny(settings: Settings, platform: str, code: str) -> None:
    async with open_store(settings) as store:
        request = await Pairing(store).deny(platform, code)
    if request is None:
        raise ConfigError(_no_request(platform, code))
    click.echo(f"Denied the request of {platform} user {request.user_id}.")


async def _revoke(settings: Settings, platform: str, user_id: str) -> None:
    async with open_store(settings) as store:
        revoked = await Pairing(store).revoke(platform, user_id)
        if not revoked:
            raise ConfigError(
                f"{platform} user {user_id} is not approved (see `switchboard pairing list`)"
            )
        # Their schedules would go on running (and spending) without them.
        paused = await ScheduleBook(store).pause_all_of(f"{platform}:{user_id}")
    click.echo(f"Revoked the approval of {platform} user {user_id}.")
    if paused:
        ids = ", ".join(s.id for s in paused)
        click.echo(f"Paused their schedules ({ids}); `switchboard schedule resume ID` resumes one.")


def _no_request(platform: str, code: str) -> str:
    return (
        f"no pending pairing request on {platform} has the code {code.strip().upper()} "
        "(codes expire after an hour; see `switchboard pairing list`)"
    )
