"""The subcommands of `switchboard`, one module per family."""
