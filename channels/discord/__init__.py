"""The Discord channel: discord.py adapter (`adapter`), Discord markdown (`format`) and the
prompt hint (`hint`). The package stays light so the hint loads without discord.py."""

from channels.discord.hint import PROMPT_HINT

__all__ = ["PROMPT_HINT"]
