"""The access rules of `core/access.py` on a real SQLite store: who is answered, refused or
given a pairing code, and how a turn's mode is fitted to its person."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel

from core.access import (
    GROUP_REFUSAL_TEXT,
    NOT_ADMIN,
    NOT_APPROVED,
    REFUSAL_TEXT,
    Entry,
    Gate,
    Pairing,
    PairingReply,
    new_code,
)
from core.backends.sql.store import SqlStore
from core.envelopes import Address, Inbound
from core.errors import ConfigError
from core.modes import FULL, SAFE_CHAT, ModeCatalog
from core.policy import AllowList, ChannelPolicy, PlatformAccess
from core.profile import Profile
from core.runtime import ChannelContext
from core.store.access import PAIRING_ALPHABET, AccessRecords
from core.tools.base import SafetyTier, Tool, ToolContext

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def codes(*values: str) -> Callable[[], str]:
    found = iter(values)
    return lambda: next(found)


def dm(user: str, text: str = "hi", platform: str = "telegram") -> Inbound:
    return Inbound(
        address=Address(platform=platform, bot="b", chat=user),
        user_id=user,
        user_name=f"name {user}",
        text=text,
        is_direct=True,
    )


def in_group(user: str, *, chat: str = "g1", mention: bool = True) -> Inbound:
    return Inbound(
        address=Address(platform="telegram", bot="b", chat=chat),
        user_id=user,
        text="hey bot",
        mentions_bot=mention,
    )


def gate(store: SqlStore, clock: Clock | None = None, **fields: object) -> Gate:
    policy = ChannelPolicy.model_validate(
        {"default_access": PlatformAccess(), "local_platforms": {"terminal"}, **fields}
    )
    return Gate(policy=policy, pairing=Pairing(store, clock=clock or Clock()), modes=ModeCatalog())


async def approve(store: SqlStore, inbound: Inbound, *, admin: bool = False) -> None:
    pairing = Pairing(store, clock=lambda: T0, codes=new_code)
    reply = await pairing.request(inbound)
    assert reply.text is not None
    [request] = [r for r in await pairing.pending() if r.user_id == inbound.user_id]
    assert await pairing.approve(inbound.address.platform, request.code, admin=admin)


# --- pairing -------------------------------------------------------------------------------


def test_codes_are_eight_characters_without_look_alikes() -> None:
    drawn = {new_code() for _ in range(200)}

    assert all(len(code) == 8 and set(code) <= set(PAIRING_ALPHABET) for code in drawn)
    assert not set("".join(drawn)) & set("0O1I")
    assert len(drawn) == 200


async def test_one_request_per_person_whose_code_comes_back_and_expires_after_an_hour(
    store: SqlStore,
) -> None:
    clock = Clock()
    pairing = Pairing(store, clock=clock, codes=codes("ABCDEFGH", "STUVWXYZ", "JKLMNPQR"))

    first = await pairing.request(dm("u1"))
    again = await pairing.request(dm("u1"))
    waiting = [r.code for r in await pairing.pending()]
    clock.now = T0 + timedelta(hours=1)
    renewed = await pairing.request(dm("u1"))

    assert first.outcome == "created"
    assert first.text is not None and "ABCDEFGH" in first.text
    assert "switchboard pairing approve telegram ABCDEFGH" in first.text
    # Writing again brings the same code back: one request per person, no new code.
    assert (again.outcome, again.text) == ("exists", first.text)
    assert waiting == ["ABCDEFGH"]
    assert renewed.outcome == "created"
    assert renewed.text is not None and "JKLMNPQR" in renewed.text


async def test_at_most_three_requests_wait_per_platform_and_the_oldest_gives_way(
    store: SqlStore,
) -> None:
    clock = Clock()
    pairing = Pairing(store, clock=clock)

    replies = []
    for n in range(5):
        clock.now = T0 + timedelta(minutes=n)
        replies.append(await pairing.request(dm(f"u{n}")))
    other_platform = await pairing.request(dm("u9", platform="slack"))

    # Three strangers do not lock out a fourth and a fifth: each gets a code, and the list
    # keeps the three newest.
    assert [r.outcome for r in replies] == ["created"] * 5
    assert all(r.text is not None and "pairing code is" in r.text for r in replies)
    assert [r.user_id for r in await pairing.pending("telegram")] == ["u2", "u3", "u4"]
    assert other_platform.outcome == "created"
    # The one that gave way asks again and is back in, with a new code.
    clock.now += timedelta(minutes=1)
    again = await pairing.request(dm("u0"))
    assert again.outcome == "created"
    assert [r.user_id for r in await pairing.pending("telegram")] == ["u3", "u4", "u0"]


async def test_a_denied_person_gets_no_code_until_it_expires(store: SqlStore) -> None:
    pairing = Pairing(store, clock=Clock(), codes=codes("ABCDEFGH", "JKLMNPQR"))
    await pairing.request(dm("u1"))
    assert await pairing.deny("telegram", "ABCDEFGH") is not None

    assert await pairing.request(dm("u1")) == PairingReply("exists", None)


async def test_a_taken_code_is_drawn_again(store: SqlStore) -> None:
    pairing = Pairing(store, clock=Clock(), codes=codes("ABCDEFGH", "ABCDEFGH", "JKLMNPQR"))

    await pairing.request(dm("u1"))
    second = await pairing.request(dm("u2"))

    assert second.text is not None and "JKLMNPQR" in second.text


# --- who may talk --------------------------------------------------------------------------


async def test_pairing_is_the_default_for_strangers(store: SqlStore) -> None:
    assert await gate(store).entry(dm("u1")) == Entry("pair")


async def test_approved_people_are_answered_and_trusted(store: SqlStore) -> None:
    await approve(store, dm("u1"))

    assert await gate(store).entry(dm("u1")) == Entry("answer", admin=False, trusted=True)


async def test_approved_admins_and_profile_admins_are_admins(store: SqlStore) -> None:
    await approve(store, dm("u1"), admin=True)
    checked = gate(store, admins=frozenset({"telegram:boss"}))

    assert await checked.entry(dm("u1")) == Entry("answer", admin=True, trusted=True)
    assert await checked.entry(dm("boss")) == Entry("answer", admin=True, trusted=True)


async def test_allowlisted_people_are_let_in_under_pairing(store: SqlStore) -> None:
    checked = gate(store, allow={"telegram": AllowList(users=frozenset({"u1"}))})

    assert await checked.entry(dm("u1")) == Entry("answer", trusted=True)
    assert await checked.entry(dm("u2")) == Entry("pair")


@pytest.mark.parametrize(
    ("dm_policy", "stranger", "listed"),
    [
        ("allowlist", "refuse", "answer"),
        ("open", "answer", "answer"),
        ("disabled", "refuse", "refuse"),
    ],
)
async def test_the_other_dm_policies(
    store: SqlStore, dm_policy: str, stranger: str, listed: str
) -> None:
    checked = gate(
        store,
        access={"telegram": PlatformAccess.model_validate({"dm_policy": dm_policy})},
        allow={"telegram": AllowList(users=frozenset({"u1"}))},
        admins=frozenset({"telegram:boss"}),
    )

    assert (await checked.entry(dm("u2"))).action == stranger
    assert (await checked.entry(dm("u1"))).action == listed
    # Admins are always let in.
    assert (await checked.entry(dm("boss"))).action == "answer"
    if stranger == "refuse":
        assert (await checked.entry(dm("u2"))).text == REFUSAL_TEXT


async def test_local_chats_are_the_operators(store: SqlStore) -> None:
    entry = await gate(store).entry(dm("anyone", platform="terminal"))

    assert entry == Entry("answer", admin=True, trusted=True)


async def test_groups_answer_mentions_and_trust_only_approved_people(store: SqlStore) -> None:
    await approve(store, dm("u1"))
    checked = gate(store)

    assert await checked.entry(in_group("u1")) == Entry("answer", trusted=True)
    assert await checked.entry(in_group("u2")) == Entry("answer", trusted=False)
    assert await checked.entry(in_group("u2", mention=False)) == Entry("ignore")


async def test_group_policies(store: SqlStore) -> None:
    listed = gate(
        store,
        access={"telegram": PlatformAccess(group_policy="allowlist", groups=frozenset({"g1"}))},
    )
    everything = gate(store, access={"telegram": PlatformAccess(group_policy="all")})
    disabled = gate(store, access={"telegram": PlatformAccess(group_policy="disabled")})

    assert (await listed.entry(in_group("u1", chat="g1"))).action == "answer"
    assert await listed.entry(in_group("u1", chat="g2")) == Entry("refuse", text=GROUP_REFUSAL_TEXT)
    assert (await everything.entry(in_group("u1", mention=False))).action == "answer"
    assert (await disabled.entry(in_group("u1"))).action == "refuse"


async def test_group_replies_is_still_read_when_no_group_policy_is_set(
    store: SqlStore,
) -> None:
    checked = gate(store, group_replies="all")

    assert (await checked.entry(in_group("u1", mention=False))).action == "answer"


async def test_a_group_allowlist_refuses_people_not_on_it_nor_approved(store: SqlStore) -> None:
    await approve(store, dm("u3"))
    checked = gate(store, allow={"telegram": AllowList(users=frozenset({"u1"}))})

    assert (await checked.entry(in_group("u1"))).action == "answer"
    assert (await checked.entry(in_group("u3"))).action == "answer"
    assert await checked.entry(in_group("u2")) == Entry("refuse", text=REFUSAL_TEXT)


async def test_a_revocation_is_seen_on_the_next_message(store: SqlStore) -> None:
    await approve(store, dm("u1"))
    checked = gate(store)
    assert (await checked.entry(dm("u1"))).action == "answer"

    assert await Pairing(store).revoke("telegram", "u1")

    assert (await checked.entry(dm("u1"))).action == "pair"


# --- the turn's mode -----------------------------------------------------------------------


def context(mode_name: str = "safe-chat") -> ChannelContext:
    return ChannelContext(platform="telegram", mode=ModeCatalog().get(mode_name))


class NoArgs(BaseModel):
    pass


def tool(tier: SafetyTier) -> Tool[NoArgs]:
    return Tool(name=f"a_{tier.value}", description="x", args=NoArgs, tier=tier, run=_run)


async def _run(_args: NoArgs, _context: ToolContext) -> str:
    return "ran"


async def test_an_admins_dm_runs_in_full(store: SqlStore) -> None:
    shaped = gate(store).shape(context(), dm("boss"), Entry("answer", admin=True, trusted=True))

    assert shaped.mode.name == FULL.name
    assert shaped.is_admin is True
    assert shaped.mode.allows(tool(SafetyTier.PRIVILEGED))


async def test_a_chat_mode_set_by_the_operator_wins_over_full(store: SqlStore) -> None:
    checked = gate(store, chat_modes={"telegram:b:boss": "no-tools"})

    shaped = checked.shape(context("no-tools"), dm("boss"), Entry("answer", admin=True))

    assert shaped.mode.name == "no-tools"


async def test_privileged_tools_are_withheld_from_non_admins_with_the_reason(
    store: SqlStore,
) -> None:
    shaped = gate(store).shape(context("full"), dm("u1"), Entry("answer", trusted=True))
    privileged = tool(SafetyTier.PRIVILEGED)

    assert shaped.is_admin is False
    assert not shaped.mode.allows(privileged)
    assert shaped.mode.allows(tool(SafetyTier.SIDE_EFFECTING))
    assert shaped.mode.refusal(privileged) == f"Tool 'a_privileged' was not run: {NOT_ADMIN}"
    assert NOT_ADMIN in shaped.mode.prompt_rules


async def test_in_groups_unapproved_people_get_only_read_only_tools(store: SqlStore) -> None:
    checked = gate(store)
    stranger = checked.shape(context("full"), in_group("u2"), Entry("answer", trusted=False))
    approved = checked.shape(context("full"), in_group("u1"), Entry("answer", trusted=True))

    assert not stranger.mode.allows(tool(SafetyTier.SIDE_EFFECTING))
    assert stranger.mode.allows(tool(SafetyTier.READ_ONLY))
    assert NOT_APPROVED in stranger.mode.refusal(tool(SafetyTier.SIDE_EFFECTING))
    assert approved.mode.allows(tool(SafetyTier.SIDE_EFFECTING))
    assert SAFE_CHAT.withheld == {}


# --- the profile ---------------------------------------------------------------------------


def test_the_profile_reads_access_tables() -> None:
    profile = Profile.parse(
        "p",
        {
            "access": {
                "telegram": {"dm_policy": "open"},
                "slack": {"group_policy": "allowlist", "groups": ["C1"]},
            }
        },
        source="profile.toml",
        identity=None,
    )

    access = profile.settings.access
    assert access["telegram"].dm_policy == "open"
    assert (access["slack"].dm_policy, access["slack"].groups) == ("pairing", frozenset({"C1"}))


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"access": {"telegram": {"dm_policy": "maybe"}}}, "access.telegram.dm_policy"),
        ({"access": {"telegram": {"groups": ["g"]}}}, "groups` only applies"),
        ({"access": {"telegram": {"dm_policy": "allowlist"}}}, "needs an [allow.telegram] table"),
    ],
)
def test_bad_access_tables_are_one_clear_error(data: dict[str, object], problem: str) -> None:
    with pytest.raises(ConfigError, match=r"profile\.toml") as caught:
        Profile.parse("p", data, source="profile.toml", identity=None)

    assert problem in str(caught.value)


# --- several workers -----------------------------------------------------------------------


async def test_every_worker_sees_an_approval_and_a_revocation_at_once(postgres_url: str) -> None:
    # Two workers and the CLI, each with its own connection to the shared database.
    stores = [await SqlStore.open(postgres_url) for _ in range(3)]
    try:
        first, second = (gate_on(s) for s in stores[:2])
        cli = Pairing(stores[2])
        assert await first.entry(dm("u1")) == Entry("pair")
        reply = await first.pairing.request(dm("u1"))
        assert reply.outcome == "created"
        [request] = await cli.pending("telegram")

        assert await cli.approve("telegram", request.code)
        assert [(await g.entry(dm("u1"))).action for g in (first, second)] == ["answer"] * 2

        assert await cli.revoke("telegram", "u1")
        assert [(await g.entry(dm("u1"))).action for g in (first, second)] == ["pair"] * 2
    finally:
        for store in stores:
            await store.close()


def gate_on(store: AccessRecords) -> Gate:
    return Gate(
        policy=ChannelPolicy(default_access=PlatformAccess()),
        pairing=Pairing(store),
        modes=ModeCatalog(),
    )


async def test_modes_that_refuse_privileged_tools_anyway_keep_their_prompt(
    store: SqlStore,
) -> None:
    shaped = gate(store).shape(context("safe-chat"), dm("u1"), Entry("answer", trusted=True))

    assert shaped.mode == SAFE_CHAT
