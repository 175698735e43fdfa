"""`core/stored_images.py`: images split out of a message for the store, put back for the
turn that sends them, and described where they are not sent."""

from __future__ import annotations

import hashlib

from core.context import strip_old_images
from core.history import HistoryCache
from core.messages import ImagePart, Message
from core.stored_images import (
    described,
    dimensions,
    kept_apart,
    with_image_bytes,
    with_recent_images,
)

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + (640).to_bytes(4) + (480).to_bytes(4) + b"\x08"
GIF = b"GIF89a\x03\x00\x02\x00\x00"
# SOI, an APP0 segment of 4 bytes, then a baseline frame (SOF0) of 120 high, 160 wide.
JPEG = b"\xff\xd8\xff\xe0\x00\x04ab\xff\xc0\x00\x11\x08\x00\x78\x00\xa0\x03"


class _Kept:
    """The images a store keeps, by (session, digest)."""

    def __init__(self, **kept: bytes) -> None:
        self.kept = {("s", hashlib.sha256(data).hexdigest()): data for data in kept.values()}
        self.asked: list[str] = []

    async def image(self, session_id: str, digest: str) -> bytes | None:
        self.asked.append(digest)
        return self.kept.get((session_id, digest))


def _photo(data: bytes = PNG, text: str = "look") -> Message:
    return Message.user(text, [ImagePart(media_type="image/png", data=data)])


def test_the_size_is_read_from_png_gif_and_jpeg_headers_only() -> None:
    assert dimensions(PNG) == (640, 480)
    assert dimensions(GIF) == (3, 2)
    assert dimensions(JPEG) == (160, 120)
    assert dimensions(b"RIFF\x00\x00WEBP") is None
    assert dimensions(b"\xff\xd8\x00") is None
    assert dimensions(b"") is None


def test_an_image_not_sent_is_described_by_size_and_kind() -> None:
    ref, _ = kept_apart(_photo())
    assert described(ref.images[0]) == "[image: 640x480 png, sent earlier]"
    assert described(ImagePart(media_type="image/webp", data=b"x")) == (
        "[image: webp, sent earlier]"
    )


def test_kept_apart_leaves_a_reference_and_hands_out_the_bytes() -> None:
    body, kept = kept_apart(_photo())

    assert body.text == "look"
    assert body.images[0].data == b""
    assert body.images[0].ref == hashlib.sha256(PNG).hexdigest() == kept[0].ref
    assert kept[0].data == PNG
    plain = Message.user("no image")
    assert kept_apart(plain) == (plain, [])


async def test_only_the_last_turns_images_are_read_back() -> None:
    old, _ = kept_apart(_photo(GIF, "old"))
    new, _ = kept_apart(_photo(PNG, "new"))
    history = [old, Message.assistant("a gif"), new]
    store = _Kept(gif=GIF, png=PNG)

    filled = await with_recent_images(store, "s", history)

    assert filled[0] is old and filled[1] is history[1]
    assert filled[2].images[0].data == PNG
    assert store.asked == [new.images[0].ref]


async def test_an_image_no_longer_kept_stays_a_reference_and_is_described() -> None:
    body, _ = kept_apart(_photo())

    [still] = await with_image_bytes(_Kept(), "s", [body])

    assert still.images[0].data == b""
    [sent] = strip_old_images([still])
    assert sent.text == "look[image: 640x480 png, no longer kept]"


def test_old_turns_are_described_and_the_last_sends_its_bytes() -> None:
    body, kept = kept_apart(_photo())
    with_bytes = body.model_copy(update={"content": [body.content[0], kept[0]]})

    old, _answer, last = strip_old_images([body, Message.assistant("ok"), with_bytes])

    assert old.images == [] and "[image: 640x480 png, sent earlier]" in old.text
    assert last.images[0].data == PNG


def test_the_history_cache_keeps_no_bytes_the_store_has() -> None:
    body, kept = kept_apart(_photo())
    with_bytes = body.model_copy(update={"content": [body.content[0], kept[0]], "seq": 1})
    cache = HistoryCache()

    cache.keep("s", [with_bytes], after_seq=0)

    joined = cache.join("s", 0, [], read_after=1)
    assert joined is not None
    [held] = joined[0]
    assert held.images[0].data == b"" and held.images[0].ref == kept[0].ref
