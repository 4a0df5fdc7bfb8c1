"""``python -m ncclparse``: the command line."""

from .cli import cli

cli()
