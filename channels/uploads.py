"""Files for a chat (`file` Outbounds): each platform's limits and the one-line note that
stands in for a file the platform refused or that is over its limit.

Each adapter supplies the upload itself (its client library's way) and how to post a note;
`upload_each` decides, per file, which of the two happens. A rate limit (`retry_after`) is
raised for the gateway to wait out; any other failure becomes the note, so the person is never
left without a word.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from core.envelopes import MAX_ATTACHMENT_BYTES, Attachment, Outbound
from core.errors import ChannelError
from core.tools.outgoing import size_text

__all__ = ["UploadLimits", "upload_each", "upload_note"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UploadLimits:
    """The largest file a bot may upload on a platform, and the largest picture it shows as
    one (a larger image goes as a file); from the platform's `ChannelSpec`."""

    file_bytes: int = MAX_ATTACHMENT_BYTES
    image_bytes: int | None = None

    def refusal(self, attachment: Attachment) -> str | None:
        """Why `attachment` cannot go up here, or None when it can."""
        if attachment.size > self.file_bytes:
            return (
                f"it is {size_text(attachment.size)} and this platform takes at most "
                f"{size_text(self.file_bytes)}"
            )
        return None

    def as_picture(self, attachment: Attachment) -> bool:
        """Whether to show `attachment` as a picture rather than as a file."""
        limit = self.image_bytes if self.image_bytes is not None else self.file_bytes
        return attachment.image and attachment.size <= limit


def upload_note(attachment: Attachment, reason: str) -> str:
    """The line shown instead of a file that did not go up."""
    return f"⚠️ Could not send the file {attachment.name} ({size_text(attachment.size)}): {reason}."


async def upload_each(
    outbound: Outbound,
    limits: UploadLimits,
    upload: Callable[[Attachment, str], Awaitable[None]],
    note: Callable[[str], Awaitable[None]],
) -> None:
    """Upload each of `outbound`'s files with `upload(file, caption)` (the caption goes with
    the first); `note(line)` for each that is over the limit or refused."""
    for index, attachment in enumerate(outbound.attachments):
        caption = outbound.text if index == 0 else ""
        reason = limits.refusal(attachment)
        if reason is None:
            try:
                await upload(attachment, caption)
                continue
            except ChannelError as exc:
                if exc.retry_after and not exc.permanent:
                    raise  # a rate limit: the gateway waits it out and tries again
                log.warning(
                    "%s refused the file %s: %s",
                    outbound.address.platform,
                    attachment.name,
                    exc,
                )
                reason = "the platform refused it"
        await note(upload_note(attachment, reason))
