"""`generate_image`: an image made from a prompt, sent to the chat as a picture.

Read-only tier: it changes nothing beyond the conversation (the image goes only to the chat
that asked), so `safe-chat` and `discord` offer it. It exists only when an image endpoint is
configured (`[images]`, or the OpenAI key and base URL: `bots/images.py`). Each image is a
cost-ledger entry at the profile's `price_per_image`, so budgets and `/cost` count it.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, Field

from core.budgets import spender_keys
from core.envelopes import Attachment, new_id
from core.errors import StoreError, ToolError
from core.images import ImageFailed, ImageGenerator
from core.messages import Usage
from core.store.ledger import CostEntry, CostLedger
from core.tools.base import SafetyTier, Tool, ToolContext
from core.tools.outgoing import FileDrop, size_text

__all__ = ["GENERATE_IMAGE", "GenerateImageArgs", "generate_image_tool"]

log = logging.getLogger(__name__)

GENERATE_IMAGE = "generate_image"
# The ledger's provider name for images (a model call's entries name the chat provider).
_PROVIDER = "images"


class GenerateImageArgs(BaseModel):
    prompt: str = Field(
        description="What the image shows, described in full (style, subject, setting).",
        min_length=1,
        max_length=4000,
    )
    caption: str = Field(
        default="", description="A short line shown with the image (optional).", max_length=900
    )


def generate_image_tool(
    images: ImageGenerator, drop: FileDrop, ledger: CostLedger, *, price: float
) -> Tool[Any]:
    """The `generate_image` tool: one image per call, charged `price` USD, sent to the chat."""

    async def run(args: GenerateImageArgs, context: ToolContext) -> str:
        if context.address is None:
            raise ToolError("This conversation has no chat to send an image to.")
        try:
            image = await images.generate(args.prompt)
        except ImageFailed as exc:
            raise ToolError(f"No image was made: {exc}.") from None
        await _charge(ledger, context, images.model, price)
        name = f"image-{new_id()[:8]}{image.suffix}"
        attachment = Attachment(name=name, media_type=image.media_type, data=image.data, image=True)
        await drop.send(context, attachment, caption=args.caption.strip())
        return (
            f"Made an image ({image.media_type}, {size_text(attachment.size)}) and sent it to "
            f"this chat as a picture named {name}; it cost ${price:.3f}. Do not describe "
            "it as if you could see it."
        )

    return Tool(
        name=GENERATE_IMAGE,
        description=(
            "Make an image from a text prompt and send it to this chat as a picture. Each "
            "image costs money: make one only when the person asks for an image."
        ),
        args=GenerateImageArgs,
        tier=SafetyTier.READ_ONLY,
        run=run,
    )


async def _charge(ledger: CostLedger, context: ToolContext, model: str, price: float) -> None:
    """One ledger entry for the image; a store that fails is logged (the image is made)."""
    user, chat = spender_keys(
        context.platform, context.user_id, context.address, scheduled=context.scheduled
    )
    entry = CostEntry(
        session_id=context.charge_session or context.session_id,
        run_id=context.run_id,
        provider=_PROVIDER,
        model=model,
        usage=Usage(),
        cost_usd=price,
        at=context.clock(),
        user=user,
        chat=chat,
        id=new_id(),
    )
    try:
        await ledger.record_cost(entry)
    except StoreError as exc:
        log.warning("could not record the cost of an image in %s: %s", context.session_id, exc)
