"""Streaming: the worker's one coalescer (`ReplyStream`) and the gateways' idempotent
`ReplyStreams` over a reply record, with incremental rendering."""

from __future__ import annotations

import asyncio

import pytest

from channels.streaming import IncrementalRender, ReplyStreams, ReplyTarget, sealed_parts
from core.envelopes import Address, Outbound, OutboundKind
from core.errors import ChannelError
from core.store.replies import MemoryReplyRecords
from core.turns.stream import ReplyStream

CHAT = Address(platform="slack", chat="C1")


class _Chat:
    """A platform chat: records sends (with their index) and edits; can refuse the next call."""

    def __init__(self) -> None:
        self.messages: dict[str, str] = {}
        self.sent: list[tuple[int, str]] = []
        self.edits: list[tuple[str, str]] = []
        self.refuse_next = False

    async def send(self, index: int, chunk: str) -> str:
        self._maybe_refuse()
        self.sent.append((index, chunk))
        message_id = f"m{len(self.sent)}"
        self.messages[message_id] = chunk
        return message_id

    async def edit(self, message_id: str, chunk: str) -> None:
        self._maybe_refuse()
        self.edits.append((message_id, chunk))
        self.messages[message_id] = chunk

    def _maybe_refuse(self) -> None:
        if self.refuse_next:
            self.refuse_next = False
            raise ChannelError("try later")

    def target(self) -> ReplyTarget:
        return ReplyTarget(send=self.send, edit=self.edit, render=_tens, part_size=1000)


def _tens(text: str) -> list[str]:
    """A platform whose messages hold ten characters."""
    text = text.strip()
    return [text[i : i + 10] for i in range(0, len(text), 10)]


def piece(text: str, seq: int, kind: OutboundKind = "delta") -> Outbound:
    return Outbound(kind=kind, address=CHAT, text=text, reply_key="r1", seq=seq)


# --- gateways: ReplyStreams ----------------------------------------------------------------


async def test_a_piece_older_than_what_is_shown_is_skipped() -> None:
    chat = _Chat()
    streams = ReplyStreams(MemoryReplyRecords(), IncrementalRender())
    target = chat.target()

    assert await streams.show(piece("Hello", 1), lambda _: target)
    assert await streams.show(piece("Hello there", 3), lambda _: target)
    assert not await streams.show(piece("Hello th", 2), lambda _: target)

    assert chat.sent == [(0, "Hello"), (1, "e")]
    assert chat.edits == [("m1", "Hello ther")]


async def test_a_final_text_is_shown_once_and_a_redelivery_changes_nothing() -> None:
    chat = _Chat()
    records = MemoryReplyRecords()
    target = chat.target()
    first, second = (ReplyStreams(records, IncrementalRender()) for _ in range(2))

    await first.show(piece("Partial", 1), lambda _: target)
    assert await second.show(piece("Partial answer", 2, kind="reply"), lambda _: target)
    assert not await first.show(piece("Partial answer", 2, kind="reply"), lambda _: target)
    assert not await first.show(piece("Partial", 3), lambda _: target)

    assert list(chat.messages.values()) == ["Partial an", "swer"]
    assert chat.sent == [(0, "Partial"), (1, "swer")]
    assert await first.finished("r1") and not await first.finished("other")


async def test_two_gateways_showing_pieces_at_once_never_both_send_the_first_message() -> None:
    chat = _Chat()
    records = MemoryReplyRecords()
    target = chat.target()
    gateways = [ReplyStreams(records, IncrementalRender()) for _ in range(2)]

    await asyncio.gather(
        *(
            gateways[seq % 2].show(piece("word " * seq, seq), lambda _: target)
            for seq in range(1, 9)
        )
    )
    await gateways[0].show(piece("word " * 8, 9, kind="reply"), lambda _: target)

    assert [index for index, _ in chat.sent] == list(range(len(chat.sent)))
    assert "".join(chat.messages.values()) == ("word " * 8).strip()


async def test_messages_sent_before_a_refusal_are_kept_for_the_retry() -> None:
    chat = _Chat()
    streams = ReplyStreams(MemoryReplyRecords(), IncrementalRender())
    target = chat.target()
    final = piece("0123456789abcdefghij", 1, kind="reply")
    await streams.show(piece("0123", 0), lambda _: target)

    chat.refuse_next = True
    with pytest.raises(ChannelError):
        await streams.show(final, lambda _: target)
    await streams.show(final, lambda _: target)  # the gateway's retry

    assert chat.sent == [(0, "0123"), (1, "abcdefghij")]
    assert chat.messages == {"m1": "0123456789", "m2": "abcdefghij"}


# --- incremental rendering -----------------------------------------------------------------


def test_sealed_parts_cut_at_paragraph_breaks_outside_code_blocks_and_stay_put() -> None:
    text = "a" * 30 + "\n\n```\n" + "b" * 10 + "\n\ncode\n```\n\n" + "c" * 30 + "\n\n" + "d" * 5
    parts, tail = sealed_parts(text, 40)
    assert "".join(parts) + tail == text
    assert all(part.count("```") % 2 == 0 for part in parts)
    assert parts[0] == "a" * 30 + "\n\n"
    # Growing the text never moves a cut made before.
    grown, _ = sealed_parts(text + "e" * 100, 40)
    assert grown[: len(parts)] == parts


def test_only_the_open_tail_is_rendered_again_as_an_answer_grows() -> None:
    rendered: list[str] = []

    def render(text: str) -> list[str]:
        rendered.append(text)
        return [text.strip()]

    target = ReplyTarget(send=_Chat().send, edit=_Chat().edit, render=render, part_size=20)
    incremental = IncrementalRender()
    text = "first paragraph.\n\nsecond paragraph.\n\nthird"
    whole = incremental(text, target)
    rendered.clear()
    again = incremental(text + " grows", target)

    assert again[:-1] == whole[:-1] and again[-1] == "third grows"
    assert rendered == ["third grows"]  # the sealed parts came from memory


# --- the worker's coalescer ----------------------------------------------------------------


async def test_text_added_while_a_piece_is_on_its_way_follows_it_whole() -> None:
    sent: list[tuple[str, int]] = []
    sending = asyncio.Event()
    release = asyncio.Event()
    done = asyncio.Event()

    async def send(text: str, seq: int) -> None:
        if seq == 2:
            sending.set()
            await release.wait()
        sent.append((text, seq))
        if seq == 3:
            done.set()

    stream = ReplyStream(send, interval=0.05)
    await stream.add("one")  # sent at once
    await stream.add(" two")  # within the interval: a piece later
    await sending.wait()  # that piece is on its way…
    await stream.add(" three")  # …when more text comes
    release.set()
    async with asyncio.timeout(5):
        await done.wait()
    await stream.close()

    assert sent == [("one", 1), ("one two", 2), ("one two three", 3)]
    assert stream.next_seq == 4


async def test_pieces_go_out_at_most_once_per_interval_of_the_clock() -> None:
    now = 100.0
    sent: list[tuple[str, int]] = []

    async def send(text: str, seq: int) -> None:
        sent.append((text, seq))

    # A long interval: the held piece's own timer never fires within the test.
    stream = ReplyStream(send, interval=30.0, clock=lambda: now)
    await stream.add("one")  # the first piece goes out at once
    now += 10
    await stream.add(" two")  # 10 s later: held until the interval is over
    now += 10
    await stream.add(" three")  # still inside it
    assert sent == [("one", 1)]
    now += 10
    await stream.add(" four")  # 30 s after the last piece: out at once, with what was held
    assert sent == [("one", 1), ("one two three four", 2)]
    await stream.close()
