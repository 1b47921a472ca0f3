"""Subcommands that live in their own modules (see `EXTRA_COMMANDS` in advisor/cli/main.py): each has
`add_parser(subparsers)` and `run(args) -> int`, and imports its heavy code inside `run`."""
