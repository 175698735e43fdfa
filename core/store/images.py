"""Images people sent, kept once per session by the digest of their bytes; a stored message
holds only the reference (`core/stored_images.py`, docs/decisions/0033-images-kept-apart.md)."""

from __future__ import annotations

from typing import Protocol

__all__ = ["StoredImages"]


class StoredImages(Protocol):
    """The bytes of the images of each session's messages, by digest.

    They are written with the message that carries them (`ConversationLog.append_message`
    keeps each image apart and stores the message with its reference); this reads them back.
    """

    async def image(self, session_id: str, digest: str) -> bytes | None:
        """The bytes of the image `digest` of `session_id`; None if it is not kept (erased,
        or the session deleted)."""
        ...
