"""The library entry points: one source or many, paths, streams and text alike."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pytest

import ncclparse
from tests import _derive as derive


def test_path_stream_and_text_give_the_same_tables() -> None:
    text = derive.healthy()
    by_path = ncclparse.parse(derive.HEALTHY, name="x.log")
    by_text = ncclparse.parse(text, name="x.log")
    by_bytes = ncclparse.parse(io.BytesIO(text.encode()), name="x.log")
    assert by_path.measurements.equals(by_text.measurements)
    assert by_path.measurements.equals(by_bytes.measurements)
    assert by_path.runs.equals(by_text.runs)
    assert by_path.measurements.num_rows == 62
    # 31 lines of the table, each with both placements.
    assert by_path.accounting["x.log"]["measurement"] == 31


def test_unrecognised_text_names_the_source_and_line() -> None:
    with pytest.raises(ncclparse.UnknownLogFormatError) as info:
        ncclparse.parse("\nhello world\nsecond line\n", name="notes.txt")
    assert str(info.value) == (
        "notes.txt:2: not a recognised benchmark log (nccl-tests, rccl-tests, "
        "oneCCL benchmark or IMB); first line: 'hello world'"
    )


def test_missing_path_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(ncclparse.InputError, match=r"no-such\.log"):
        ncclparse.parse(tmp_path / "no-such.log")


def test_parse_many_keeps_going_and_collects_failures(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("")
    result = ncclparse.parse_many([empty, derive.HEALTHY])
    assert [str(f) for f in result.failures] == [
        f"{empty}: empty input: no benchmark output to parse"
    ]
    assert result.runs.num_rows == 1
    assert result.measurements.num_rows == 62


def test_parse_many_streams_batches_and_keeps_runs() -> None:
    batches: list[pa.RecordBatch] = []
    result = ncclparse.parse_many(
        [(derive.HEALTHY, "a.log"), (derive.HEALTHY, "b.log")], on_batch=batches.append
    )
    assert result.measurements.num_rows == 0
    assert sum(b.num_rows for b in batches) == 124
    assert result.runs.column("source").to_pylist() == ["a.log", "b.log"]


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_a_callers_binary_stream_stays_open(compress: bool) -> None:
    # parse() reads the caller's stream and must not close it, even when the text
    # wrapper it made around it is collected.
    import gc
    import gzip

    data = derive.HEALTHY.read_bytes()
    stream = io.BytesIO(gzip.compress(data) if compress else data)
    result = ncclparse.parse(stream, name="caller.log")
    gc.collect()
    assert result.measurements.num_rows == 62
    assert not stream.closed
    stream.seek(0)  # still usable by the caller
    assert len(stream.read()) > 0
