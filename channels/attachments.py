"""Images that came with a message, and a note for the model about those that could not be read.

A photo whose download fails, or one too large to send, must not turn a message into silence:
the turn still runs, and the model is told an image was there so it can say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.messages import ImagePart

__all__ = ["ReceivedImages"]


@dataclass
class ReceivedImages:
    """The images of one incoming message: those read, and how many could not be."""

    images: list[ImagePart] = field(default_factory=list)
    unreadable: int = 0

    def add(self, image: ImagePart | None) -> None:
        """An image that was read, or None for one that could not be."""
        if image is None:
            self.unreadable += 1
        else:
            self.images.append(image)

    def text_with_note(self, text: str) -> str:
        """`text`, with a note for the model when an image could not be read."""
        if not self.unreadable:
            return text
        count = "An image" if self.unreadable == 1 else f"{self.unreadable} images"
        note = (
            f"[{count} came with this message but could not be read (too large, or the "
            "download failed); tell the person if it matters.]"
        )
        return f"{text}\n\n{note}" if text.strip() else note
