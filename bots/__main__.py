"""`python -m bots` is the same as the `switchboard` command."""

from bots.cli import main

main()
