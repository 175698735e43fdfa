"""In-memory backends for tests only: `MemoryBus` and `MemoryMailboxes`, one process, nothing
kept (the product runs on SQLite or Redis, `bots/app.py` `backends`)."""
