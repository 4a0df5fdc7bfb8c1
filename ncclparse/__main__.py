"""``python -m ncclparse``: the command line."""

from ncclparse.cli.app import cli

cli()
