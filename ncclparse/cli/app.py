"""The ``ncclparse`` command group: errors shown once, commands loaded when called.

Library errors (:class:`~ncclparse.errors.NcclParseError`) become one ``Error: ...``
line here; the commands themselves live in one module per group (``tables``,
``report``, ``models``, ``nightly``, ``history``) and are imported only when called,
so that ``ncclparse --help`` stays cheap.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import click

from ncclparse._version import __version__
from ncclparse.errors import NcclParseError

_COMMANDS = {
    "parse": "ncclparse.cli.parse",
    "analyze": "ncclparse.cli.parse",
    "report": "ncclparse.cli.report",
    "ideal": "ncclparse.cli.costmodels",
    "model": "ncclparse.cli.costmodels",
    "profiles": "ncclparse.cli.costmodels",
    "check": "ncclparse.cli.nightly",
    "ingest": "ncclparse.cli.nightly",
    "compare": "ncclparse.cli.nightly",
    "history": "ncclparse.cli.history",
    "trend": "ncclparse.cli.trend",
}


# Arrow's memory pool for the command's own process, unless the user chose one.
# Rows are built in the parsing thread and Parquet row groups encoded in another
# (storage.batch_writer): mimalloc, pyarrow's default, then kept about 110 MB more
# resident for one run of 18 M rows (355 MB against 242 MB), for no speed.
MEMORY_POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"
MEMORY_POOL = "system"
# NumPy's OpenBLAS starts a thread per core that spins waiting for work: a tenth of
# the CPU of a large parse on two cores (which the scanner thread needs), for no
# BLAS work (the fits here are tiny), unless the user chose a thread count.
BLAS_THREADS_VARIABLE = "OPENBLAS_NUM_THREADS"
BLAS_THREADS = "1"


class _Cli(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        # Read by pyarrow when it makes its default pool, after this (the commands
        # import it when they run).
        os.environ.setdefault(MEMORY_POOL_VARIABLE, MEMORY_POOL)
        os.environ.setdefault(BLAS_THREADS_VARIABLE, BLAS_THREADS)  # before NumPy
        try:
            return super().invoke(ctx)
        except NcclParseError as exc:
            raise click.ClickException(str(exc)) from exc

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in _COMMANDS:
            return None
        command = getattr(importlib.import_module(_COMMANDS[name]), name)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ncclparse")
def cli() -> None:
    """Parse NCCL/RCCL/oneCCL/IMB benchmark logs and judge fabric efficiency."""
