"""One module per CLI subcommand; each has `register(subparsers)`.

Adding a command = adding a module here and its name to COMMANDS in mstar/cli.py.
"""
