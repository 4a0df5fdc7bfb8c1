"""``python -m ncclparse``: the command line."""

from ncclparse.cli.app import cli

if __name__ == "__main__":  # not when imported (a worker process's start-up)
    cli()
