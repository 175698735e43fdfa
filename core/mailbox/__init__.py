"""Per-session mailboxes and the claims that serialize a session's turns.

The protocol is here (`base.py`); the implementations are in the backend packages
(`core/backends/sql/mailboxes.py`, `core/backends/redis/mailboxes.py`).
"""

from core.mailbox.base import Claim, Mailboxes
from core.mailbox.intake import accept_inbound

__all__ = ["Claim", "Mailboxes", "accept_inbound"]
