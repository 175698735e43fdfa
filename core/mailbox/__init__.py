"""Per-session mailboxes and the claims that serialize a session's turns."""

from core.mailbox.base import Claim, Mailboxes
from core.mailbox.memory import MemoryMailboxes
from core.mailbox.sqlite import SqliteMailboxes

__all__ = ["Claim", "Mailboxes", "MemoryMailboxes", "SqliteMailboxes"]
