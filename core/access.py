"""Who may talk to the bot, and what they may make it do (`docs/access.md`).

`Pairing` keeps pairing requests and approvals (in the store's `AccessRecords`): a stranger's
direct message under the `pairing` policy files a request with an 8-character code (one per
person: writing again brings the same code back); an operator approves it from the CLI or an
admin with `/approve CODE` in a chat. At most `MAX_PENDING` requests wait per platform; a new
one takes the place of the oldest, so no handful of strangers locks the others out.

`Gate` decides, per inbound message, from the platform's `PlatformAccess`, the allowlists, the
profile's admins and the approvals read from the store on every message (so an approval or a
revocation is seen by every worker at once): answer it, ignore it, refuse it, or answer with a
pairing code. For a message it answers, `Gate.shape` fits the turn's capability mode to the
person: an admin's DM runs in `full`; privileged tools are withheld from everyone but admins,
so a non-admin is refused with the reason instead of being asked to confirm; in a group, tools
that act beyond the chat are withheld from people nobody approved or allowlisted.

The operator's own local chats (the terminal, the web page) are outside all of it: whoever
writes there is an admin.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Literal

from core.clock import utc_now
from core.commands import ChatCommand, CommandContext, CommandInfo
from core.envelopes import Inbound
from core.modes import FULL, ModeCatalog
from core.policy import ChannelPolicy
from core.runtime import ChannelContext
from core.store.access import PAIRING_ALPHABET, AccessRecords, Approval, PairingRequest
from core.tools.base import SafetyTier

__all__ = [
    "GROUP_REFUSAL_TEXT",
    "MAX_PENDING",
    "NOT_ADMIN",
    "NOT_APPROVED",
    "PAIRING_TTL",
    "REFUSAL_TEXT",
    "Entry",
    "Gate",
    "Pairing",
    "PairingReply",
    "access_commands",
    "new_code",
]

log = logging.getLogger(__name__)

PAIRING_TTL: Final = timedelta(hours=1)
# Pending requests per platform: a flood of strangers cannot make the operator's list long
# (the oldest gives way to a new one).
MAX_PENDING: Final = 3
_CODE_LENGTH: Final = 8

REFUSAL_TEXT: Final = "Sorry, this bot only answers the people it was set up for."
GROUP_REFUSAL_TEXT: Final = "Sorry, this bot does not answer in this group."

# What the model reads about tools withheld from the person of a turn (prompt and refusals).
NOT_ADMIN: Final = (
    "Only an admin of this bot may use privileged tools, and the person asking is not one; "
    "tell them so instead of trying."
)
NOT_APPROVED: Final = (
    "In this group only people an admin approved may use tools that change anything, and the "
    "person asking is not approved; tell them so instead of trying."
)


def new_code() -> str:
    """A random pairing code: 8 characters without the look-alikes 0/O and 1/I."""
    return "".join(secrets.choice(PAIRING_ALPHABET) for _ in range(_CODE_LENGTH))


def _pairing_text(request: PairingRequest, prefix: str = "/") -> str:
    """The text with a person's code; `prefix` starts a chat command typed on their
    platform (an admin there answers `<prefix>approve CODE`)."""
    return (
        "Hi! This bot only talks to people its owner let in. Your pairing code is "
        f"{request.code} (valid for an hour). Send it to the owner; they approve it with "
        f"`switchboard pairing approve {request.platform} {request.code}`, or an admin "
        f"answers `{prefix}approve {request.code}` in a chat with the bot. Then write again."
    )


@dataclass(frozen=True)
class PairingReply:
    """What filing a pairing request gave: the outcome and the text for the person, if any."""

    outcome: Literal["created", "exists", "failed"]
    text: str | None


class Pairing:
    """Pairing requests and approvals over the store's `AccessRecords`; time from `clock`."""

    def __init__(
        self,
        records: AccessRecords,
        *,
        clock: Callable[[], datetime] = utc_now,
        codes: Callable[[], str] = new_code,
        ttl: timedelta = PAIRING_TTL,
        max_pending: int = MAX_PENDING,
        command_prefixes: Mapping[str, str] | None = None,
    ) -> None:
        """`command_prefixes`: what starts a chat command typed on each platform, for the
        pairing text (unlisted: `/`)."""
        if max_pending < 1:
            raise ValueError("max_pending must be at least 1")
        self.records = records
        self._clock = clock
        self._codes = codes
        self.ttl = ttl
        self.max_pending = max_pending
        self._prefixes = dict(command_prefixes or {})

    async def request(self, inbound: Inbound) -> PairingReply:
        """File a request for the writer of `inbound`; the reply text holds its code. A person
        with a live pending request gets that one's code again (no new one); a person whose
        request was denied gets no text until it expires."""
        now = self._clock()
        platform = inbound.address.platform
        # A code in use is a one-in-a-trillion draw; three draws make a clash a non-event.
        for _ in range(3):
            wanted = PairingRequest(
                platform=platform,
                user_id=inbound.user_id,
                user_name=inbound.user_name,
                code=self._codes(),
                created_at=now,
                expires_at=now + self.ttl,
            )
            answer = await self.records.request_pairing(
                wanted, now=now, max_pending=self.max_pending
            )
            found = answer.request
            # A replayed filing (a dropped Redis connection) finds its own request.
            if answer.outcome == "created" or (found is not None and found.code == wanted.code):
                log.info("pairing request from %s user %s", platform, inbound.user_id)
                for old in answer.gave_way:
                    log.info(
                        "pairing request of %s user %s gave way to a newer one",
                        old.platform,
                        old.user_id,
                    )
                return PairingReply("created", self._text(wanted))
            if answer.outcome == "exists":
                if found is not None and found.status == "pending":
                    return PairingReply("exists", self._text(found))
                return PairingReply("exists", None)
        log.warning("no free pairing code for %s user %s", platform, inbound.user_id)
        return PairingReply("failed", None)

    def _text(self, request: PairingRequest) -> str:
        return _pairing_text(request, self._prefixes.get(request.platform, "/"))

    async def pending(self, platform: str | None = None) -> list[PairingRequest]:
        """The live pending requests, oldest first."""
        return await self.records.pairing_requests(platform, now=self._clock())

    async def approve(
        self, platform: str, code: str, *, admin: bool = False, by: str = "cli"
    ) -> Approval | None:
        """Approve the request with `code` (any case); None if no live request has it."""
        return await self.records.approve_pairing(
            platform, code.strip().upper(), now=self._clock(), admin=admin, by=by
        )

    async def deny(self, platform: str, code: str) -> PairingRequest | None:
        """Deny the request with `code` (any case); None if no live request has it."""
        return await self.records.deny_pairing(platform, code.strip().upper(), now=self._clock())

    async def revoke(self, platform: str, user_id: str) -> bool:
        """Take a person's approval back; whether there was one."""
        return await self.records.revoke_approval(platform, user_id)

    async def approvals(self, platform: str | None = None) -> list[Approval]:
        """Every approval, by platform, oldest first."""
        return await self.records.approvals(platform)


@dataclass(frozen=True)
class Entry:
    """What to do with one inbound message and who sent it.

    `answer` it (a command or a turn), `ignore` it (a group message for someone else),
    `refuse` it with `text` (once per chat), or `pair`: answer with a pairing code. `admin`:
    the profile's admins, people approved as admins, anyone in a local chat. `trusted`: an
    admin, approved, or on the allowlist by user id or team.
    """

    action: Literal["answer", "ignore", "refuse", "pair"]
    admin: bool = False
    trusted: bool = False
    text: str = ""


class Gate:
    """Applies the access policy of a `ChannelPolicy` to inbound messages."""

    def __init__(self, *, policy: ChannelPolicy, pairing: Pairing, modes: ModeCatalog) -> None:
        self.policy = policy
        self.pairing = pairing
        self.modes = modes

    async def entry(self, inbound: Inbound) -> Entry:
        """Whether and how to answer `inbound` (a person's message or command)."""
        policy = self.policy
        platform = inbound.address.platform
        if platform in policy.local_platforms:
            return Entry("answer", admin=True, trusted=True)
        if not policy.addressed(inbound):
            return Entry("ignore")  # a group message for someone else: no store read
        approval = (
            await self.pairing.records.approval(platform, inbound.user_id)
            if inbound.user_id
            else None
        )
        admin = policy.is_admin(platform, inbound.user_id) or (
            approval is not None and approval.admin
        )
        trusted = admin or approval is not None or policy.lists_person(inbound)
        let_in = approval is not None or policy.lists(inbound)
        if inbound.is_direct:
            return self._direct(inbound, admin=admin, trusted=trusted, let_in=let_in)
        access = policy.access_for(platform)
        group = policy.group_policy(platform)
        if group == "disabled" or (
            group == "allowlist" and inbound.address.chat not in access.groups
        ):
            return Entry("refuse", text=GROUP_REFUSAL_TEXT)
        if not admin and not let_in and _has_allowlist(policy, platform):
            return Entry("refuse", text=REFUSAL_TEXT)  # today's `[allow]` behaviour
        return Entry("answer", admin=admin, trusted=trusted)

    def _direct(self, inbound: Inbound, *, admin: bool, trusted: bool, let_in: bool) -> Entry:
        platform = inbound.address.platform
        dm_policy = self.policy.access_for(platform).dm_policy
        if admin or dm_policy == "open" or (dm_policy != "disabled" and let_in):
            return Entry("answer", admin=admin, trusted=trusted)
        if dm_policy == "allowlist" and not _has_allowlist(self.policy, platform):
            # As before access policies: no list means everyone (a profile cannot ask for
            # this; `ProfileSettings` wants a list with "allowlist").
            return Entry("answer", admin=admin, trusted=trusted)
        if dm_policy == "pairing" and inbound.user_id:
            return Entry("pair")
        return Entry("refuse", text=REFUSAL_TEXT)

    def shape(self, context: ChannelContext, inbound: Inbound, entry: Entry) -> ChannelContext:
        """The turn's context fitted to its person: admin flag, mode and withheld tools."""
        mode = context.mode
        address = inbound.address
        chat_key = f"{address.platform}:{address.bot}:{address.chat}"
        # An admin's DM is trusted like the terminal, unless the operator set that chat's mode.
        if entry.admin and inbound.is_direct and chat_key not in self.policy.chat_modes:
            mode = self.modes.get(FULL.name)
        # Only a mode offering every tool runs privileged ones (`CapabilityMode.allows`); other
        # modes refuse them already, and their prompts need no word about it.
        if not entry.admin and mode.tools is None:
            mode = mode.withholding([SafetyTier.PRIVILEGED], NOT_ADMIN)
        if not inbound.is_direct and not entry.trusted:
            mode = mode.withholding(
                [SafetyTier.SIDE_EFFECTING, SafetyTier.PRIVILEGED], NOT_APPROVED
            )
        return context.model_copy(update={"mode": mode, "is_admin": entry.admin})


def _has_allowlist(policy: ChannelPolicy, platform: str) -> bool:
    allowed = policy.allow.get(platform)
    return allowed is not None and bool(allowed.users or allowed.chats or allowed.teams)


# --- chat commands ----------------------------------------------------------------------------


def _platform_and_code(context: CommandContext) -> tuple[str, str] | None:
    """`/approve CODE` (this chat's platform) or `/approve PLATFORM CODE`."""
    words = context.args.split()
    if len(words) == 1:
        return context.inbound.address.platform, words[0]
    if len(words) == 2:
        return words[0].lower(), words[1]
    return None


async def _approve(context: CommandContext) -> str:
    target = _platform_and_code(context)
    if target is None:
        return "Usage: /approve CODE (or /approve PLATFORM CODE)."
    platform, code = target
    by = f"{context.inbound.address.platform}:{context.inbound.user_id}"
    approval = await Pairing(context.store).approve(platform, code, by=by)
    if approval is None:
        return f"No pending pairing request on {platform} has the code {code.upper()}."
    who = approval.user_name or approval.user_id
    return f"Approved {who} ({platform} user {approval.user_id}): they can write to me now."


async def _deny(context: CommandContext) -> str:
    target = _platform_and_code(context)
    if target is None:
        return "Usage: /deny CODE (or /deny PLATFORM CODE)."
    platform, code = target
    request = await Pairing(context.store).deny(platform, code)
    if request is None:
        return f"No pending pairing request on {platform} has the code {code.upper()}."
    who = request.user_name or request.user_id
    return f"Denied the pairing request of {who} ({platform} user {request.user_id})."


def access_commands() -> Sequence[ChatCommand]:
    """The admin-only chat commands that answer pairing requests."""
    return (
        ChatCommand(
            CommandInfo(
                name="approve",
                description="Let in the person with this pairing code",
                admin_only=True,
            ),
            _approve,
        ),
        ChatCommand(
            CommandInfo(
                name="deny", description="Refuse the person with this pairing code", admin_only=True
            ),
            _deny,
        ),
    )
