"""Numbered input lines: sources read as line streams, launcher prefixes stripped."""

from __future__ import annotations

import contextlib
import gzip
import importlib
import io
import itertools
import lzma
import os
import queue
import re
import threading
import weakref
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, NamedTuple, Protocol, TypeVar, cast

from ncclparse.errors import InputError
from ncclparse.formatting import shown_name

from ._nccl_topology import Facts, holds_facts, scan_cached

# The native line scanner (issue 17): the block filter of without_nccl_debug in C.
# Optional: an install without a C compiler has none, and NCCLPARSE_NO_EXTENSION=1
# (any non-empty value but 0) turns it off; the Python filter below is the reference
# and gives the same lines (tests/test_scanner.py). Tests switch it with this name.
NO_EXTENSION = "NCCLPARSE_NO_EXTENSION"
ScanResult = tuple[int, list[int], list[int], list[str], list[str | None]]
ScanBlock = Callable[[str, int], ScanResult]
_T = TypeVar("_T")
_END = object()
# Per line: (its number of tokens, its row dicts), or None for the parser to read.
RowsRead = list[tuple[int, tuple[dict[str, Any], ...]] | None]
# (numbers, raws, spec, start, limit): see _scan.c.
ReadRows = Callable[[list[int], list[str], tuple[Any, ...], int, int], RowsRead]


def _native() -> Any:
    """The extension module, or None (not built, or turned off)."""
    if os.environ.get(NO_EXTENSION, "") not in ("", "0"):
        return None
    try:
        from . import _scan  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        return None
    return _scan


_NATIVE = _native()
scan_block: ScanBlock | None = None if _NATIVE is None else _NATIVE.scan_block
_NATIVE_SCAN = scan_block  # tests patch scan_block; the bytes path is native only
# The native reader of plain data rows (nccl_tests._Parser.feed_rows). With it, the
# block reader hands lines that may be rows over in Rows batches; without it, every
# line is a Line as before (the reference: the tables are the same).
read_rows: ReadRows | None = None if _NATIVE is None else _NATIVE.read_rows
# The same rows as column buffers (_native_rows), for rows that go to a spill.
read_rows_columns: Callable[..., tuple[Any, ...]] | None = (
    None if _NATIVE is None else _NATIVE.read_rows_columns
)

# The columns of row dicts as C buffers (_model.Collector.flush), or None.
dict_columns: Callable[..., list[Any]] | None = (
    None if _NATIVE is None else _NATIVE.dict_columns
)

# Launchers and log collectors put these before every line; they are not part of the
# benchmark's output (schema.md: stripped before reading, `line` unchanged).
_PREFIXES = re.compile(
    r"""^(?:
        [ \t]*\[(?P<ompi>\d+,\d+)\]<std(?:out|err)>:[ ]?  # OpenMPI --tag-output,
        # indented too: `kubectl logs` of an MPIJob, pasted (aws-k8s-tester #585)
      | \[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}     # ISO timestamps
        (?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?[ ]
      | (?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[ ]                # Open MPI --timestamp-output:
        (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)  # ctime(), the tag after it
        [ ]{1,2}\d{1,2}[ ]\d{2}:\d{2}:\d{2}[ ]\d{4}
      | \d{2}:\d{2}:\d{2}[ ]{2}                        # Jenkins Timestamper
      | [ ]*(?P<srun>\d+):[ ]                          # srun --label
      | \[(?P<rank>\d+)\][ ]                          # MPICH / Intel MPI -prepend-rank
    )""",
    re.VERBOSE | re.ASCII,
)


# What a launcher prefix starts with (each alternative of _PREFIXES).
_PREFIX_FIRST = frozenset("[ \t0123456789MTWFS")


class Line(NamedTuple):
    """One input line: 1-based number, text without prefix or line ending."""

    number: int
    text: str
    complete: bool  # False for a last line cut off by the end of input (no newline)
    stream: str | None = None  # launcher rank tag, when the line carried one


class Skipped(NamedTuple):
    """Plain NCCL debug lines a fast reader counted without reading (see below)."""

    lines: int  # how many (not `count`: that would hide tuple.count)
    last: int  # number of the last of them
    topology: Facts | None = None  # the topology facts they state, if any


def strip_prefix(text: str) -> tuple[str, str | None]:
    """Remove launcher prefixes; return the text and the rank tag (or None)."""
    stream = None
    for _ in range(3):
        if text[:1] not in _PREFIX_FIRST:  # most lines: no prefix can start there
            break
        match = _PREFIXES.match(text)
        if match is None:
            break
        tag = match.group("ompi") or match.group("srun") or match.group("rank")
        if tag is not None:
            stream = tag
        text = text[match.end() :]
        if match.group("rank") is not None and "[" in text:
            # MPICH/Intel -prepend-rank tags every write(), so a row printed in pieces
            # carries the tag mid-line too (`-1[0]    1626.5`). A glued tag follows a
            # non-space; NCCL's own `host:pid:tid [0]` device tag follows a space.
            text = re.sub(rf"(?<=\S)\[{tag}\]", " ", text)
        elif match.group("ompi") is not None and "]<std" in text:
            # Open MPI's --tag-output does the same with its own tag (real:
            # `-1[1,0]<stdout>:    85.14`, a p5 run with NCCL 2.20).
            text = re.sub(rf"\[{re.escape(tag)}\]<std(?:out|err)>:", " ", text)
    return text, stream


# Longer lines are cut here and marked incomplete (parsers read no value from them):
# this bounds the memory parsers use per line (docs/robustness.md).
MAX_LINE = 1 << 20


# A "line" longer than this is not text a benchmark printed (/dev/zero, a core dump,
# a binary): the input is refused rather than scanned for ever in search of its end.
MAX_SKIPPED = 64 << 20


def _too_long(source: str) -> InputError:
    return InputError(
        f"{source}: a line longer than {MAX_SKIPPED >> 20} MiB characters: not a "
        "text log"
    )


def read_lines(handle: IO[str], source: str) -> Iterator[str]:
    """The lines of ``handle`` as iteration gives them (with their endings), except
    that a line longer than MAX_LINE is given cut (no ending, so it reads as cut off)
    and the rest of it is never held in memory.

    Raises InputError naming ``source`` for a line longer than MAX_SKIPPED.
    """
    while raw := handle.readline(MAX_LINE + 1):
        if len(raw) > MAX_LINE and not raw.endswith(("\n", "\r")):
            skipped = 0
            while rest := handle.readline(_CHUNK):
                if rest.endswith(("\n", "\r")):
                    break
                skipped += len(rest)
                if skipped > MAX_SKIPPED:
                    raise _too_long(source)
        yield raw


class Rows(NamedTuple):
    """Lines that start with a blank (where data rows are) with nothing but plain
    NCCL debug lines between them: the lines between two numbers are such lines.
    The parser may read the rows among them natively."""

    numbers: list[int]
    raws: list[str]  # with their endings
    # The topology facts the plain lines before numbers[k] state, by k.
    facts: dict[int, Facts]


def numbered(raw_lines: Iterable[str], start: int = 1) -> Iterator[Line]:
    """Number raw lines (with their endings) from ``start``, strip CR/LF and launcher
    prefixes."""
    for number, raw in enumerate(raw_lines, start=start):
        # Most lines: a newline at the end, no \r, and no launcher prefix (each of
        # _PREFIXES that can start with a blank holds `:`): as_line would keep the
        # text as it is. (raw[:1] is "" for no line: iteration gives none.)
        if (
            raw[-1:] == "\n"
            and (raw[0] not in _PREFIX_FIRST or (raw[0] == " " and ":" not in raw))
            and "\r" not in raw
            and len(raw) <= MAX_LINE
        ):
            yield Line(number, raw[:-1], True)
        else:
            yield as_line(number, raw)


def mentions(lines: Sequence[Line], texts: Sequence[str]) -> bool:
    """Whether any of ``texts`` (none holding a line end) is in the text of
    ``lines``: False proves that no line holds any; True may be a match across
    two lines."""
    joined = "\n".join(line.text for line in lines)
    return any(text in joined for text in texts)


def as_line(number: int, raw: str) -> Line:
    """The Line of raw line ``raw`` (with its ending), numbered ``number``."""
    if (
        raw[-1:] == "\n"
        and raw[:1] not in _PREFIX_FIRST
        and "\r" not in raw
        and len(raw) <= MAX_LINE
    ):  # most lines (`#` lines): nothing below would change them
        return Line(number, raw[:-1], True)
    # The reader splits at \r too (newline=""), so a lone \r also ends a line.
    complete = raw.endswith(("\n", "\r"))
    text = raw.rstrip("\r\n")
    if len(text) > MAX_LINE:  # no tool prints this; bound what parsers split
        text, complete = text[:MAX_LINE], False
    if "\r" in text:  # a carriage-return redraw: keep what was shown last
        text = text.rsplit("\r", 1)[-1] or text.replace("\r", "")
    text, stream = strip_prefix(text)
    return Line(number, text, complete, stream)


_CHUNK = 1 << 22
# A line starting with one of these may carry a launcher prefix, a table row or
# Markdown: it is never passed over.
_READ_FIRST = frozenset(" \t#[|>0123456789")


def without_nccl_debug(
    handle: IO[str], first: int, source: str, before: str = ""
) -> Iterator[Line | Skipped | Rows]:
    """The lines of ``before`` then ``handle`` (numbered from ``first``), runs of NCCL
    debug as Skipped. ``before``: whole lines already read from ``handle`` (with their
    endings; the last may have none only if ``handle`` is at its end).

    A plain NCCL debug line (``host:pid:tid [dev] NCCL INFO ...`` with no launcher
    prefix, mentioning no version, failure, timeout or benchmark binary) can only be
    noise, so it is counted in bulk instead of being read: with NCCL_DEBUG=INFO such
    lines are 95 % of a log. Blocks are split exactly as line iteration would split
    them (newline=""), so numbering and line ends are the same as :func:`numbered`.

    The few of them that state the topology (network, NICs, GDR, NVLS, CollNet, local
    ranks) are not read one by one either: a search of the block (a substring, then a
    regular expression with a literal prefix: C speed) tells whether it has any, and
    only then each run of skipped lines is scanned as one text; the facts it states
    (not its lines) ride on its :class:`Skipped`.

    With the native row reader, kept lines that start with a blank come in
    :class:`Rows` batches instead of one Line each.
    """
    number = first - 1
    batching = read_rows is not None
    blocks = _scanned(handle, source, before)
    for block in blocks:
        if isinstance(block, str):  # a line outside the blocks (see _scanned)
            number += 1
            yield as_line(number, block)
            continue
        total, kept, _, raws, facts = block
        if batching and raws and all(raw[0] == " " for raw in raws):
            # Every kept line may be a row (a long run in NCCL chatter): one batch,
            # as the loop below would make it, without a Python step per line.
            yield from _one_batch(number, total, kept, raws, facts)
            number += total
            continue
        previous = -1  # the last kept line
        numbers: list[int] = []  # the Rows batch being gathered
        batch: list[str] = []
        batch_facts: dict[int, Facts] = {}
        for i, raw, text in zip(kept, raws, facts, strict=False):
            gap = i - previous - 1
            topology = scan_cached(text) if gap and text is not None else None
            row = batching and raw[0] == " "
            within = row and bool(numbers)  # the plain lines before go with the batch
            if numbers and not within:
                yield Rows(numbers, batch, batch_facts)
                numbers, batch, batch_facts = [], [], {}
            if gap and not within:
                yield Skipped(gap, number + i, topology)
            elif topology is not None:
                batch_facts[len(numbers)] = topology
            if row:
                numbers.append(number + i + 1)
                batch.append(raw)
            else:
                yield as_line(number + i + 1, raw)
            previous = i
        if numbers:
            yield Rows(numbers, batch, batch_facts)
        if total - previous > 1:
            topology = scan_cached(facts[-1]) if facts[-1] is not None else None
            yield Skipped(total - previous - 1, number + total, topology)
        number += total


def _one_batch(
    number: int,
    total: int,
    kept: list[int],
    raws: list[str],
    facts: list[str | None],
) -> Iterator[Skipped | Rows]:
    """The items of a scanned block whose kept lines all start with a blank (the
    block's first line is number + 1): the plain lines before the first, one Rows
    batch (the facts of the plain lines between them by index), the plain lines
    after the last."""
    if kept[0]:
        before = scan_cached(facts[0]) if facts[0] is not None else None
        yield Skipped(kept[0], number + kept[0], before)
    scanned = ((k, scan_cached(t)) for k, t in enumerate(facts[1:-1], 1) if t)
    yield Rows(
        [number + i + 1 for i in kept],
        raws,
        {k: topology for k, topology in scanned if topology is not None},
    )
    last = kept[-1]
    if total - last > 1:
        after = scan_cached(facts[-1]) if facts[-1] is not None else None
        yield Skipped(total - last - 1, number + total, after)


def _scanned(handle: IO[str], source: str, before: str) -> Iterator[ScanResult | str]:
    """The blocks of ``before`` then ``handle`` as the scan found them, and between
    them, as raw lines (str), the lines no block holds: one cut at MAX_LINE, and the
    last ones, with no line end.

    With the native scan, the blocks after the first are read and scanned by a
    second thread while the parser reads the ones before (the scan releases the
    GIL): the same items in the same order, errors raised where they happened.
    """
    scan_native = scan_block
    if scan_native is None:
        return _scan_blocks(handle, source, before, _scan_block)
    binary = _binary_of(handle) if scan_native is _NATIVE_SCAN else None
    if binary is None:
        return _ahead(_scan_blocks(handle, source, before, scan_native))
    blocks = _scan_binary(binary, source, before)
    # A file with at most one block left (most logs: all of it was in the head read
    # for detection) is not worth a thread: starting one costs more than the block.
    return blocks if _bytes_left(binary) <= _CHUNK else _ahead(blocks)


def _bytes_left(binary: io.BufferedIOBase) -> int:
    """How many bytes ``binary`` (a regular file) has after its position now."""
    try:
        return os.fstat(binary.fileno()).st_size - binary.tell()
    except (OSError, ValueError):  # no descriptor (not a real file)
        return _CHUNK + 1


def _binary_of(handle: IO[str]) -> io.BufferedIOBase | None:
    """The file under ``handle``, at the byte where ``handle`` is, when ``handle`` is
    a reader :func:`open_source` made of a seekable file (else None). ``handle`` is
    not to be read after this."""
    if handle not in _READERS:
        return None
    binary = cast("io.BufferedIOBase", cast("io.TextIOWrapper", handle).buffer)
    try:
        if not binary.seekable():
            return None
        # tell() gives the byte offset, with the decoder's state above bit 64 when
        # it holds any (a "\r" read last may await its "\n"): then the text reader
        # goes on, which has that state.
        position = handle.tell()
        if position >> 64:
            return None
        binary.seek(position)
    except (OSError, ValueError):
        return None
    return binary


def _scan_binary(
    binary: io.BufferedIOBase, source: str, before: str
) -> Iterator[ScanResult | str]:
    """:func:`_scan_blocks` reading the bytes of ``binary`` (UTF-8, decoded as the
    reader decodes it): blocks are scanned as bytes, and only the lines Python
    reads are decoded."""
    assert _NATIVE is not None
    scan_bytes = _NATIVE.scan_bytes
    cut = _last_line_end(before)
    if cut:
        yield _NATIVE.scan_block(before, cut)
    tail = before[cut:]  # a whole line too (see without_nccl_debug)
    if tail and not tail.endswith("\r"):  # the input's last line, with no ending
        yield tail
        return
    # Blocks of _CHUNK bytes: 16 MiB blocks were 9 % faster on the 1 GiB benchmark
    # log (each block costs the parser some Python and Arrow calls, whatever its
    # size), but a log of rows alone is kept whole, so blocks in flight (read,
    # queued, parsed) grew past 100 MB of Python strings and row columns.
    chunk = _CHUNK
    data = binary.read(chunk)
    if tail:  # ended by a lone "\r": as the text reader gives it, last or not
        yield _NATIVE.scan_block(tail, len(tail)) if data else tail
    if not data:
        return
    # Read into one buffer (a fresh bytes object per block, and the copy of the line
    # begun in the last block, cost a tenth of the parse, under the GIL). A line
    # begun may take MAX_LINE of it, a read at least what the first one gave.
    buffer = bytearray(MAX_LINE + len(data))
    filled = len(data)
    buffer[:filled] = data
    start = binary.tell() - filled  # where the buffer begins in the file
    with memoryview(buffer) as view:
        while True:
            newline = buffer.rfind(b"\n", 0, filled)
            # Not at filled - 1: a "\r" there may be the first half of a "\r\n".
            cut = 1 + max(newline, buffer.rfind(b"\r", newline + 1, filled - 1))
            if cut:
                yield scan_bytes(buffer, cut)
            begun = filled - cut  # a line begun: moved to the start
            buffer[:begun] = buffer[cut:filled]
            start += cut
            if begun > MAX_LINE:  # rare: a line cut at MAX_LINE characters
                yield from _scan_text_from(binary, start, source)
                return
            read = binary.readinto(view[begun : begun + chunk])
            if not read:
                break
            filled = begun + read
        if begun:
            text = buffer[:begun].decode("utf-8", "replace")
            yield from io.StringIO(text, newline="")


def _scan_text_from(
    binary: io.BufferedIOBase, start: int, source: str
) -> Iterator[ScanResult | str]:
    """:func:`_scan_blocks` of ``binary`` from byte ``start`` on."""
    assert _NATIVE is not None
    binary.seek(start)
    text = cast("io.TextIOWrapper", _text(cast("IO[bytes]", binary)))
    try:
        yield from _scan_blocks(text, source, "", _NATIVE.scan_block)
    finally:  # collected, the wrapper would close the file
        with contextlib.suppress(ValueError):
            text.detach()


def _scan_blocks(
    handle: IO[str], source: str, before: str, scan_one: ScanBlock
) -> Iterator[ScanResult | str]:
    """:func:`_scanned` reading text."""
    carry = ""
    blocks = itertools.chain((before,), iter(lambda: handle.read(_CHUNK), ""))
    for block in blocks:
        block = carry + block
        cut = _last_line_end(block)
        carry = block[cut:]
        yield scan_one(block, cut)
        if len(carry) > MAX_LINE:  # a line with no end in sight: cut it, skip the rest
            yield carry
            if carry.endswith("\r"):  # its end is here; a "\n" may follow
                following = handle.read(1)
                carry = "" if following == "\n" else following
            else:
                carry = _skip_rest_of_line(handle, source)
    yield from io.StringIO(carry, newline="")


# Scanned blocks a reader thread may hold ahead of the parser (bounds memory: each is
# the kept lines of one block, a few hundred KB at most beside its raw block).
_AHEAD = 2


def _ahead(items: Iterator[_T]) -> Iterator[_T]:
    """``items``, with all but the first produced by a daemon thread up to _AHEAD
    ahead of the consumer; what the thread raises is raised here, after the items
    before it. Closing this generator stops the thread."""
    first = next(items, _END)
    if first is _END:
        return
    yield cast("_T", first)
    queued: queue.Queue[tuple[bool, Any]] = queue.Queue(_AHEAD)
    stop = threading.Event()

    def put(item: tuple[bool, Any]) -> bool:
        while not stop.is_set():
            try:
                queued.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put((True, item)):
                    return
        except BaseException as exc:  # raised again in the consumer's thread
            put((False, exc))
        else:
            put((False, None))

    thread = threading.Thread(target=produce, name="ncclparse-scan", daemon=True)
    thread.start()
    try:
        while True:
            more, value = queued.get()
            if not more:
                if value is not None:
                    raise value
                return
            yield value
    finally:
        stop.set()
        # A thread blocked reading a pipe ends with its read; the parse does not wait.
        thread.join(timeout=1.0)


def is_whole(raw: str) -> bool:
    """Whether ``raw``, a line from :func:`read_lines`, is the whole line: it has its
    ending, or is the input's last line (one cut at MAX_LINE is longer)."""
    return raw.endswith(("\n", "\r")) or len(raw) <= MAX_LINE


def _last_line_end(block: str) -> int:
    """Where the last whole line of ``block`` ends: after its last "\n", or after a
    lone "\r" (iteration with newline="" ends lines there too), but not after a
    "\r" that ends the block, which may be the first half of a "\r\n"."""
    newline = block.rfind("\n")
    return max(newline, block.rfind("\r", newline + 1, len(block) - 1)) + 1


def _skip_rest_of_line(handle: IO[str], source: str) -> str:
    """Read past the end of an overlong line ("\n", "\r\n" or a lone "\r"); return
    what follows its ending."""
    skipped = 0
    while block := handle.read(_CHUNK):
        ends = [i for i in (block.find("\n"), block.find("\r")) if i >= 0]
        if ends:
            end = min(ends)
            if block[end] == "\r":
                if end + 1 == len(block):  # a "\n" may follow in the next read
                    following = handle.read(1)
                    return "" if following == "\n" else following
                if block[end + 1] == "\n":
                    end += 1
            return block[end + 1 :]
        skipped += len(block)
        if skipped > MAX_SKIPPED:
            raise _too_long(source)
    return ""


def _scan_block(block: str, end: int) -> ScanResult:
    """The lines of ``block[:end]`` that are not plain NCCL debug, and where they are.

    Returns (number of lines, indices of the kept lines, their start offsets, their
    texts with their endings, facts). Lines are split as line iteration splits them
    (newline=""). A plain NCCL debug line (not kept) has " NCCL INFO " or
    " NCCL WARN ", does not start with a character of _READ_FIRST and mentions no
    version, failure, timeout or benchmark binary. ``facts[k]`` is the text of the
    skipped lines before kept line ``k`` (``facts[-1]``: after the last one) for
    :func:`scan`, or None when the block holds no fact at all.

    The reference of the native scanner (``_scan.scan_block``), which returns the
    same, except that its ``facts`` texts keep only the skipped lines that may state
    a fact, a channel line only from its ``" via NET/"`` on (the facts :func:`scan`
    reads in them are the same).
    """
    raws = io.StringIO(block[:end], newline="").readlines()
    kept: list[int] = []
    starts: list[int] = []
    texts: list[str] = []
    facts: list[str | None] = []
    any_facts = holds_facts(block, end)
    offset = after = 0
    for i, raw in enumerate(raws):
        if (
            raw[0] in _READ_FIRST  # readlines() gives no empty line
            or (" NCCL INFO " not in raw and " NCCL WARN " not in raw)
            or "version" in raw
            or "ailure" in raw
            or "imeout" in raw
            or "_perf" in raw
        ):
            kept.append(i)
            starts.append(offset)
            texts.append(raw)
            facts.append(block[after:offset] if any_facts and offset > after else None)
            after = offset + len(raw)
        offset += len(raw)
    facts.append(block[after:offset] if any_facts and offset > after else None)
    return len(raws), kept, starts, texts, facts


Source = str | Path | IO[str] | IO[bytes]


def _is_text(stream: IO[str] | IO[bytes]) -> bool:
    """Whether ``stream`` reads str: a TextIOBase, or a text-mode stream outside the io
    hierarchy such as ``tempfile.SpooledTemporaryFile(mode="w+")``."""
    if isinstance(stream, io.TextIOBase):
        return True
    if isinstance(stream, io.RawIOBase | io.BufferedIOBase):
        return False  # binary whatever its mode says (ZipExtFile's mode is "r")
    mode = getattr(stream, "mode", None)
    return isinstance(mode, str) and "b" not in mode


def _shown(name: str) -> str:
    """``name`` as a table and every output can hold it, on one line
    (:func:`ncclparse.formatting.shown_name`): control characters as escapes, and
    the bytes of a file name that are not UTF-8, which Python keeps as lone
    surrogates, as ``\\xff``, so the file can still be told."""
    return shown_name(name)


def open_source(source: Source, name: str | None = None) -> tuple[str, IO[str], bool]:
    """Return (display name, text stream, whether the caller must close it).

    A ``str`` containing a newline (or empty) is log text; any other ``str`` is a
    path. Bytes are decoded as UTF-8 with invalid sequences replaced (logs are not
    always clean). A path or binary stream whose first bytes are the magic number of
    gzip, xz or zstd is decompressed as it is read (:func:`decompressed`). Raises
    InputError for a path that cannot be opened.
    """
    if isinstance(source, Path) or (
        isinstance(source, str) and source and "\n" not in source
    ):
        path = Path(source)
        display = _shown(name or str(source))
        try:
            if path.is_dir():
                raise InputError(f"{display}: is a directory, not a log file")
            binary = path.open("rb")
        except OSError as exc:
            raise InputError(f"{display}: cannot read: {exc.strerror}") from exc
        except ValueError as exc:  # e.g. a NUL byte: no file can have that name
            raise InputError(f"{display}: not a valid path ({exc})") from exc
        try:
            return display, _text(decompressed(binary, display, owned=True)), True
        except BaseException:
            binary.close()
            raise
    if isinstance(source, str):
        return _shown(name or "<string>"), io.StringIO(source, newline=""), True
    display = name or getattr(source, "name", None) or "<stream>"
    if isinstance(display, int):  # a file opened from its descriptor
        display = "<stream>"
    elif isinstance(display, bytes):  # a file opened by a bytes path
        display = os.fsdecode(display)
    display = _shown(str(display))
    if _is_text(source):
        return display, cast("IO[str]", source), False
    # Not text: a binary stream (the Source union cannot say which member it is).
    stream = decompressed(cast("IO[bytes]", source), display, owned=False)
    return display, _text(stream), False


def _text(binary: IO[bytes]) -> IO[str]:
    text = io.TextIOWrapper(binary, encoding="utf-8", errors="replace", newline="")
    # Decoded a block at a time, not 8 KiB (the default): the UTF-8 decoder is
    # called through Python for each, which cost a third of reading a large log.
    text._CHUNK_SIZE = _DECODE_CHUNK  # type: ignore[attr-defined]
    _READERS.add(text)
    return text


# The readers _text made: their bytes may be read instead (_binary_of).
_READERS: weakref.WeakSet[IO[str]] = weakref.WeakSet()


_DECODE_CHUNK = 1 << 20


# --- compressed input -----------------------------------------------------------
# Told by their first bytes, not by the file name: `x.log.gz`, a gzip file named
# `x.log`, and `zcat`-less standard input read alike. Text never starts with these.
COMPRESSIONS = (
    (b"\x1f\x8b", "gzip"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
)
_MAGIC_SIZE = max(len(magic) for magic, _ in COMPRESSIONS)
ZSTD_PACKAGE = "zstandard"
# Compressed bytes given to the zstd decompressor at a time: its output for them
# (held at once) is at most about 32768 times as much, 16 MiB.
_ZSTD_STEP = 512


def compression(binary: IO[bytes]) -> str | None:
    """The compression of ``binary`` (``"gzip"``, ``"xz"``, ``"zstd"``) from its
    first bytes, which are not consumed, or None (not compressed, or a stream that
    can neither peek nor seek)."""
    head = b""
    try:
        peek = getattr(binary, "peek", None)
        if callable(peek):
            head = peek(_MAGIC_SIZE)
        elif binary.seekable():
            position = binary.tell()
            head = binary.read(_MAGIC_SIZE)
            binary.seek(position)
    except (OSError, ValueError):  # the read that follows names the problem
        return None
    return next((kind for magic, kind in COMPRESSIONS if head.startswith(magic)), None)


def decompressed(binary: IO[bytes], name: str, *, owned: bool) -> IO[bytes]:
    """``binary`` itself, or (compressed) a stream of its decompressed bytes.

    Decompression is streamed: the whole file is never held. Corrupt or cut-off
    compressed data raises InputError naming ``name`` where it is met; with
    ``owned`` closing the returned stream closes ``binary`` too. Raises InputError
    for zstd data when the ``zstandard`` package is not installed.
    """
    kind = compression(binary)
    if kind is None:
        return binary
    reader: _Reader
    if kind == "gzip":
        reader = gzip.GzipFile(fileobj=binary, mode="rb")
    elif kind == "xz":
        reader = lzma.LZMAFile(binary)  # noqa: SIM115 (closed with the stream)
    else:
        reader = _ZstdReader(binary, _zstandard(name))
    return io.BufferedReader(
        _Decompressed(reader, binary if owned else None, kind, name), _BUFFER
    )


_BUFFER = 1 << 16


class _Reader(Protocol):
    def read1(self, size: int = ..., /) -> bytes: ...

    def close(self) -> None: ...


def _zstandard(name: str) -> Any:
    """The ``zstandard`` module, or InputError saying how to install it."""
    try:
        module = importlib.import_module(ZSTD_PACKAGE)
        usable = all(
            hasattr(_zstd_frame(module), attribute)
            for attribute in ("eof", "unused_data")
        )
    except ImportError:
        usable = False
    if not usable:  # missing, or older than 0.18 (no frame end to tell a cut by)
        raise InputError(
            f"{name}: zstd-compressed: reading it needs the {ZSTD_PACKAGE} package "
            f"(0.19 or later): pip install {ZSTD_PACKAGE}"
        )
    return module


def _zstd_frame(module: Any) -> Any:
    """A zstandard decompressor of one frame (that stops at its end)."""
    try:
        return module.ZstdDecompressor().decompressobj(read_across_frames=False)
    except TypeError:  # before 0.22, one frame is all it reads
        return module.ZstdDecompressor().decompressobj()


class _Decompressed(io.RawIOBase):
    """The bytes of a decompressing reader; what the decompressor raises on bad data
    becomes an InputError naming the file. The runs parsed before it stay parsed, as
    for a read error (none while the parsers are still looking at the first lines)."""

    def __init__(
        self, reader: _Reader, source: IO[bytes] | None, kind: str, name: str
    ) -> None:
        super().__init__()
        self._reader = reader
        self._source = source
        self._kind = kind
        self.name = name

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            data = self._reader.read1(len(buffer))
        except EOFError:
            raise InputError(
                f"{self.name}: truncated {self._kind} file: the compressed data ends "
                f"before its end marker (`{self._kind} -dc` recovers the text "
                "before the cut)"
            ) from None
        except (gzip.BadGzipFile, zlib.error, lzma.LZMAError, _ZstdError) as exc:
            raise InputError(f"{self.name}: corrupt {self._kind} data: {exc}") from None
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            try:
                self._reader.close()
            finally:
                if self._source is not None:
                    self._source.close()
        super().close()


class _ZstdError(Exception):
    """zstandard's ZstdError (its module is imported only when needed)."""


class _ZstdReader:
    """zstd frames decompressed a few compressed bytes at a time (``zstandard``'s
    stream reader ends quietly at a cut; this says so with EOFError, as gzip and
    lzma do). Frames that follow one another are read on."""

    def __init__(self, source: IO[bytes], zstandard: Any) -> None:
        self._source = source
        self._module = zstandard
        self._frame = _zstd_frame(zstandard)
        self._fed = False  # the current frame has had input
        self._pending = memoryview(b"")
        self._ended = False

    def read1(self, size: int = -1, /) -> bytes:
        while not self._pending:
            if self._ended:
                return b""
            self._pending = memoryview(self._step())
        size = len(self._pending) if size < 0 else size
        data, self._pending = self._pending[:size], self._pending[size:]
        return bytes(data)

    def _step(self) -> bytes:
        chunk = self._source.read(_ZSTD_STEP)
        if not chunk:
            self._ended = True
            if self._fed:
                raise EOFError("compressed file ended before the end of its frame")
            return b""
        out = []
        try:
            while chunk:
                self._fed = True
                out.append(self._frame.decompress(chunk))
                chunk = b""
                if self._frame.eof:  # the next frame (if any) starts in unused_data
                    chunk = self._frame.unused_data
                    self._frame = _zstd_frame(self._module)
                    self._fed = False
        except self._module.ZstdError as exc:
            raise _ZstdError(str(exc)) from None
        return b"".join(out)

    def close(self) -> None:
        self._pending = memoryview(b"")
