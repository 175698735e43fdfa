"""The playbook (`core/playbook.py`): which turns are recorded, how a request finds the
sequences recorded with its keywords, and the hints' section within its budget. The records are
a small in-memory stand-in here; the SQL store's are in the contract tests."""

from __future__ import annotations

from collections.abc import Sequence

from core.errors import StoreError
from core.messages import Message, ToolCall
from core.modes import FULL
from core.playbook import PLAYBOOK_HEADING, Playbook, PlaybookSettings, digest, sequence_of
from core.store.playbook import PlaybookEntry, PlaybookSequence
from core.turn_state import ChannelContext

CONTEXT = ChannelContext(platform="terminal", mode=FULL, session_key="terminal:default:it")


class Records:
    """`PlaybookRecords` in a dict: successes per (bot, tools, keyword)."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, tuple[str, ...], str], int] = {}
        self.kept: list[int | None] = []

    async def record_sequence(
        self, bot: str, tools: Sequence[str], keywords: Sequence[str], *, keep: int | None = None
    ) -> None:
        self.kept.append(keep)  # pruning itself is the store's (tests/contract)
        for keyword in set(keywords):
            key = (bot, tuple(tools), keyword)
            self.rows[key] = self.rows.get(key, 0) + 1

    async def find_sequences(
        self, bot: str, keywords: Sequence[str], *, limit: int, proven: int | None = None
    ) -> list[PlaybookEntry]:
        found: dict[tuple[str, ...], list[int]] = {}
        for (owner, tools, keyword), successes in self.rows.items():
            if owner == bot and keyword in keywords:
                found.setdefault(tools, []).append(successes)
        entries = [
            PlaybookEntry(tools=tools, matched=len(counts), successes=max(counts))
            for tools, counts in found.items()
        ]
        bar = proven if proven is not None else 10**9
        entries.sort(key=lambda e: (e.successes < bar, -e.matched, -e.successes, e.tools))
        return entries[:limit]

    async def list_sequences(self, bot: str, *, limit: int) -> list[PlaybookSequence]:
        raise NotImplementedError  # the operator's listing: tests/contract

    async def clear_playbook(self, bot: str) -> int:
        raise NotImplementedError


def _turn(asked: str, *steps: tuple[str, bool]) -> list[Message]:
    """The person's message, then one call and result per (tool, failed), then an answer."""
    messages = [Message.user(asked)]
    for index, (name, failed) in enumerate(steps):
        call = ToolCall(id=f"c{index}", name=name, arguments={})
        messages += [Message.assistant("", [call]), Message.tool_result(call, "x", is_error=failed)]
    return [*messages, Message.assistant("Done.")]


def test_a_sequence_counts_a_run_of_one_tool_once() -> None:
    turn = _turn("q", ("search", False), ("search", False), ("fetch", False), ("search", False))

    assert sequence_of(turn) == ["search", "fetch", "search"]


def test_a_turn_with_a_tool_error_has_no_sequence() -> None:
    assert sequence_of(_turn("q", ("search", False), ("fetch", True))) is None


def test_a_wandering_turn_has_no_sequence() -> None:
    assert sequence_of(_turn("q", *[(f"t{i}", False) for i in range(9)])) is None


def test_the_digest_is_fixed_and_hides_the_word() -> None:
    assert digest("weather") == digest("weather")
    assert digest("weather") != digest("paris")
    assert "weather" not in digest("weather")


async def test_a_turn_that_worked_is_offered_to_a_similar_request() -> None:
    records = Records()
    playbook = Playbook(records, "bot")

    assert await playbook.learn(_turn("Weather in Paris?", ("weather", False)))
    hints = await playbook.hints(CONTEXT, "what is the weather in Lyon")

    assert hints.splitlines()[0] == PLAYBOOK_HEADING
    assert hints.splitlines()[-1] == "- weather (worked once)"
    assert all("paris" not in str(key).lower() for key in records.rows)


async def test_failed_tool_turns_and_tool_free_turns_are_not_recorded() -> None:
    records = Records()
    playbook = Playbook(records, "bot")

    assert not await playbook.learn(_turn("Weather in Paris?", ("weather", True)))
    assert not await playbook.learn(_turn("Weather in Paris?"))
    assert not await playbook.learn(_turn("ok?", ("weather", False)))
    assert records.rows == {}


async def test_the_best_match_comes_first_and_the_count_shows() -> None:
    playbook = Playbook(records := Records(), "bot")
    for _ in range(2):
        await playbook.learn(_turn("convert euros to dollars", ("rates", False), ("calc", False)))
    await playbook.learn(_turn("dollars spent this month", ("ledger", False)))

    lines = (await playbook.hints(CONTEXT, "convert these dollars")).splitlines()

    assert lines[2:] == ["- rates → calc (worked 2 times)", "- ledger (worked once)"]
    assert await Playbook(records, "other").hints(CONTEXT, "convert these dollars") == ""


async def test_a_sequence_that_worked_three_times_is_proven_and_offered_first() -> None:
    playbook = Playbook(records := Records(), "bot", PlaybookSettings(keep=100))
    await playbook.learn(_turn("convert euros to dollars", ("rates", False), ("calc", False)))
    for _ in range(3):
        await playbook.learn(_turn("dollars spent", ("ledger", False)))

    lines = (await playbook.hints(CONTEXT, "convert euros to dollars")).splitlines()

    # `rates → calc` shares more keywords, but `ledger` is proven.
    assert lines[2:] == ["- ledger (proven: worked 3 times)", "- rates → calc (worked once)"]
    assert records.kept == [100] * 4  # each write asks the store to keep the bot's rows to 100


async def test_no_keyword_in_common_no_hints() -> None:
    playbook = Playbook(Records(), "bot")
    await playbook.learn(_turn("weather in Paris", ("weather", False)))

    assert await playbook.hints(CONTEXT, "translate this sentence") == ""
    assert await playbook.hints(CONTEXT, "ok?") == ""


async def test_the_hints_stay_within_their_budget() -> None:
    playbook = Playbook(Records(), "bot", PlaybookSettings(hints=10, max_chars=200))
    for index in range(6):
        await playbook.learn(_turn("weather report", (f"tool_number_{index}", False)))

    hints = await playbook.hints(CONTEXT, "weather")

    assert 0 < len(hints) <= 200
    assert hints.count("\n- ") < 6


class Broken(Records):
    """Records whose writes fail: the store down, then a bug."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    async def record_sequence(
        self, bot: str, tools: Sequence[str], keywords: Sequence[str], *, keep: int | None = None
    ) -> None:
        raise self.error


async def test_a_failed_record_is_logged_not_raised() -> None:
    for error in (StoreError("the disk is full"), RuntimeError("a bug")):
        playbook = Playbook(Broken(error), "bot")

        assert not await playbook.learn(_turn("weather in Paris", ("weather", False)))
