"""Images out of the stored history: a message is stored with a reference to each of its
images, the bytes kept once per session by their digest (`core/store/images.py`).

Only the turn that received an image sends its bytes to the model (`IMAGE_TURNS`, the
turns `strip_old_images` keeps them in); older turns carry a line saying what was there
(`described`). `kept_apart` splits a message for the store, `with_recent_images` puts the
bytes back into the turns that send them (docs/decisions/0033-images-kept-apart.md).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from typing import Final

from core.messages import ImagePart, Message, TextPart
from core.store.images import StoredImages

__all__ = [
    "IMAGE_TURNS",
    "described",
    "dimensions",
    "image_digest",
    "kept_apart",
    "with_image_bytes",
    "with_recent_images",
    "without_bytes",
]

# How many of the newest turns (a turn begins at a person's message) send image bytes.
IMAGE_TURNS: Final = 1
# JPEG markers that begin a frame, and so carry its size (all SOFn but DHT, JPG and DAC).
_JPEG_FRAMES: Final = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def image_digest(data: bytes) -> str:
    """The SHA-256 of the image bytes, in hex: the image's name in its session."""
    return hashlib.sha256(data).hexdigest()


def dimensions(data: bytes) -> tuple[int, int] | None:
    """(width, height) of a PNG, GIF or JPEG from its header; None for anything else."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return (width, height) if width and height else None
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return (width, height) if width and height else None
    if data.startswith(b"\xff\xd8"):
        return _jpeg_dimensions(data)
    return None


def _jpeg_dimensions(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 9 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker in _JPEG_FRAMES:
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return (width, height) if width and height else None
        (length,) = struct.unpack(">H", data[at + 2 : at + 4])
        at += 2 + length
    return None


def described(part: ImagePart, note: str = "sent earlier") -> str:
    """What stands in for an image the model is not sent: "[image: 640x480 png, sent earlier]"."""
    kind = part.media_type.removeprefix("image/")
    # An image stored inline (before revision 0013) has its bytes and no size yet.
    known = (part.width, part.height) if part.width and part.height else dimensions(part.data)
    size = f"{known[0]}x{known[1]} " if known else ""
    return f"[image: {size}{kind}, {note}]"


def kept_apart(message: Message) -> tuple[Message, list[ImagePart]]:
    """`message` as the store keeps it (each image a reference with its size, no bytes) and
    its images to keep, each with its reference and bytes. A message without image bytes
    comes back as it is."""
    if not any(isinstance(p, ImagePart) and p.data for p in message.content):
        return message, []
    body: list[TextPart | ImagePart] = []
    kept: list[ImagePart] = []
    for part in message.content:
        if isinstance(part, ImagePart) and part.data:
            size = dimensions(part.data)
            part = part.model_copy(
                update={
                    "ref": image_digest(part.data),
                    "width": size[0] if size else None,
                    "height": size[1] if size else None,
                }
            )
            kept.append(part)
            part = part.model_copy(update={"data": b""})
        body.append(part)
    return message.model_copy(update={"content": body}), kept


def without_bytes(message: Message) -> Message:
    """`message` without the bytes of the images it refers to (the store keeps those)."""
    if not any(isinstance(p, ImagePart) and p.ref and p.data for p in message.content):
        return message
    content = [
        p.model_copy(update={"data": b""}) if isinstance(p, ImagePart) and p.ref else p
        for p in message.content
    ]
    return message.model_copy(update={"content": content})


async def with_image_bytes(
    images: StoredImages, session_id: str, messages: Sequence[Message]
) -> list[Message]:
    """`messages` with the bytes of each image they refer to read back from the store; an
    image no longer kept stays a reference (and is described instead of sent)."""
    result = []
    for message in messages:
        if any(isinstance(p, ImagePart) and p.ref and not p.data for p in message.content):
            content: list[TextPart | ImagePart] = []
            for part in message.content:
                if isinstance(part, ImagePart) and part.ref and not part.data:
                    data = await images.image(session_id, part.ref)
                    part = part if data is None else part.model_copy(update={"data": data})
                content.append(part)
            message = message.model_copy(update={"content": content})
        result.append(message)
    return result


async def with_recent_images(
    images: StoredImages,
    session_id: str,
    history: Sequence[Message],
    keep_last_turns: int = IMAGE_TURNS,
) -> list[Message]:
    """`history` with the image bytes of its last `keep_last_turns` turns (a turn begins at
    a person's message) read back from the store: those the model is sent."""
    start = len(history)
    turns = 0
    while start > 0 and turns < keep_last_turns:
        start -= 1
        if history[start].role == "user":
            turns += 1
    return [*history[:start], *await with_image_bytes(images, session_id, history[start:])]
