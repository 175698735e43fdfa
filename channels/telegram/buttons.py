"""Confirmation buttons on Telegram: an inline keyboard under the question, and the
`callback_query` a press sends back, read as an `answer` Inbound (`core/confirm.py`)."""

from __future__ import annotations

from telegram import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup

from core.confirm import BUTTONS, answer_inbound, button_value
from core.envelopes import Address, Inbound

__all__ = ["press_inbound", "question_keyboard"]


def question_keyboard(question_id: str) -> InlineKeyboardMarkup:
    """One row of Allow / Refuse buttons for question `question_id`."""
    return InlineKeyboardMarkup(
        [
            [
                InlineKeyboardButton(label, callback_data=button_value(question_id, allowed))
                for label, allowed in BUTTONS
            ]
        ]
    )


def press_inbound(query: CallbackQuery, bot_key: str) -> Inbound | None:
    """The answer a button press gives; None for a press we cannot place (not our button, or
    the message is too old for Telegram to say where it was)."""
    message = query.message
    if not isinstance(query.data, str) or message is None:
        return None
    chat = message.chat
    thread = getattr(message, "message_thread_id", None)
    topic = thread if getattr(message, "is_topic_message", False) else None
    return answer_inbound(
        query.data,
        address=Address(
            platform="telegram",
            bot=bot_key,
            chat=str(chat.id),
            thread=str(topic) if topic else None,
        ),
        user_id=str(query.from_user.id),
        user_name=query.from_user.full_name,
        press_id=query.id,
        is_direct=chat.type == "private",
    )
