"""The ``ncclparse`` command line (:data:`cli`, the click group)."""

from ncclparse.cli.app import cli

__all__ = ["cli"]
