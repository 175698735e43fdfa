"""Per-session mailboxes and the claims that serialize a session's turns."""

from core.mailbox.base import Claim, Mailboxes
from core.mailbox.intake import accept_inbound
from core.mailbox.sqlite import SqliteMailboxes

__all__ = ["Claim", "Mailboxes", "SqliteMailboxes", "accept_inbound"]
