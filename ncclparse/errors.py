"""The errors a user can fix by changing input or options.

Everything ncclparse raises on purpose derives from :class:`NcclParseError`; any other
exception is a bug and keeps its traceback.
"""

from __future__ import annotations


class NcclParseError(Exception):
    """Base class: bad input or options, with a message meant for the user."""


class UnknownLogFormatError(NcclParseError):
    """No parser recognises the input (or it is empty)."""

    def __init__(self, source: str, first_line: str | None, line_no: int = 0) -> None:
        self.source = source
        self.first_line = first_line
        self.line_no = line_no
        if first_line is None:
            message = f"{source}: empty input: no benchmark output to parse"
        else:
            shown = first_line if len(first_line) <= 80 else first_line[:77] + "..."
            message = (
                f"{source}:{line_no}: not a recognised benchmark log "
                f"(nccl-tests, rccl-tests, oneCCL benchmark or IMB); "
                f"first line: {shown!r}"
            )
        super().__init__(message)

    def __reduce__(self) -> tuple[type, tuple[str, str | None, int]]:
        # Pickled (from a worker process) by what __init__ takes, not the message.
        return type(self), (self.source, self.first_line, self.line_no)


class InputError(NcclParseError):
    """An input cannot be opened or read (missing, unreadable, a directory ...).

    ``source`` names the input when the message's text before its first colon
    does not (a URI: ``s3://...``)."""

    def __init__(self, message: str, *, source: str | None = None) -> None:
        super().__init__(message)
        self.source = source


class SchemaError(NcclParseError):
    """A table does not match the result schema (wrong column, type or version)."""


class ProfileError(NcclParseError):
    """A hardware profile or bandwidth figure is invalid or ambiguous."""


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (its repr when it has none): what an
    error from the OS or pyarrow says, without the lines of detail that follow."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else repr(exc)
