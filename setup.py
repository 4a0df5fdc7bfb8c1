"""The optional native line scanner (issue 17); everything else is in pyproject.toml.

``ncclparse.parsers._scan`` is a small C extension (CPython API, no other
dependency). It is optional: without a C compiler or the Python headers the install
goes on without it, says so, and ncclparse reads every line in Python (the reference
path; the tables are the same, only slower).
"""

from __future__ import annotations

import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SCANNER = "ncclparse.parsers._scan"


class OptionalBuildExt(build_ext):
    """build_ext that never fails the install: a scanner that cannot be built is
    reported and left out."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler at all, broken toolchain
            self._fallback(exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # compile or link error
            self._fallback(exc)

    @staticmethod
    def _fallback(exc: Exception) -> None:
        sys.stderr.write(
            f"ncclparse: the native line scanner ({SCANNER}) was not built ({exc}); "
            "ncclparse works without it, reading every line in Python (slower on "
            "large NCCL_DEBUG logs). Install a C compiler and the Python headers, "
            "then reinstall, to have it.\n"
        )


setup(
    ext_modules=[
        Extension(
            SCANNER,
            sources=["ncclparse/parsers/_scan.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
