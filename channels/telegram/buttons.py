"""Buttons on Telegram: Allow / Refuse under a confirmation question, read back as an `answer`
Inbound (`core/confirm.py`), and Stop under an answer being written, read back as a `cancel`
Inbound (`core/stopping.py`); a press arrives as a `callback_query`."""

from __future__ import annotations

from telegram import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup

from core.confirm import BUTTONS, answer_inbound, button_value
from core.envelopes import Address, Inbound
from core.stopping import STOP_BUTTON, STOP_LABEL, stop_inbound

__all__ = ["press_inbound", "question_keyboard", "stop_keyboard"]


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


def stop_keyboard() -> InlineKeyboardMarkup:
    """The Stop button under an answer while it is written."""
    return InlineKeyboardMarkup([[InlineKeyboardButton(STOP_LABEL, callback_data=STOP_BUTTON)]])


def press_inbound(query: CallbackQuery, bot_key: str) -> Inbound | None:
    """The answer or stop request a button press gives; None for a press we cannot place (not
    our button, or the message is too old for Telegram to say where it was)."""
    message = query.message
    if not isinstance(query.data, str) or message is None:
        return None
    chat = message.chat
    thread = getattr(message, "message_thread_id", None)
    topic = thread if getattr(message, "is_topic_message", False) else None
    address = Address(
        platform="telegram", bot=bot_key, chat=str(chat.id), thread=str(topic) if topic else None
    )
    user_id, user_name = str(query.from_user.id), query.from_user.full_name
    is_direct = chat.type == "private"
    return answer_inbound(
        query.data,
        address=address,
        user_id=user_id,
        user_name=user_name,
        press_id=query.id,
        is_direct=is_direct,
    ) or stop_inbound(
        query.data, address=address, user_id=user_id, user_name=user_name, is_direct=is_direct
    )
