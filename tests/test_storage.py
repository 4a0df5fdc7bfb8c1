"""Tables on disk: round trips keep types and metadata; writes are atomic."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import ncclparse
from ncclparse import schema, storage
from tests.conftest import FIXTURES

LOG = (
    FIXTURES
    / "nccl"
    / "nccltests-214_sendrecv_a40_2node_sum_redop_inplace_NA_truncated.log"
)


@pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
def test_round_trip_keeps_types_values_and_metadata(
    tmp_path: Path, suffix: str
) -> None:
    result = ncclparse.parse(LOG)
    for table in (result.measurements, result.runs):
        path = tmp_path / f"t{suffix}"
        storage.write_table(table, path)
        back = storage.read_table(path)
        assert back.schema.equals(table.schema, check_metadata=True)
        assert back.equals(table)
    assert schema.conform(back, schema.RUNS_SCHEMA).num_rows == 1


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "m.parquet"
    target.write_text("previous")

    def interrupted_write() -> None:
        with storage.atomic_output(target, binary=True) as out:
            out.write(b"half")
            raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        interrupted_write()
    assert target.read_text() == "previous"
    assert [p.name for p in tmp_path.iterdir()] == ["m.parquet"]


def test_unwritable_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ncclparse.NcclParseError, match="cannot write"):
        storage.write_table(
            ncclparse.parse(LOG).measurements, tmp_path / "missing" / "m.parquet"
        )


def test_conform_rejects_other_schema_versions() -> None:
    table = ncclparse.parse(LOG).measurements
    old = table.replace_schema_metadata({schema.VERSION_KEY: b"0"})
    with pytest.raises(ncclparse.SchemaError) as caught:
        schema.conform(old, schema.MEASUREMENTS_SCHEMA)
    assert str(caught.value) == (
        "table was written with ncclparse schema 0; this version reads schema 1: "
        "upgrade ncclparse"
    )


def test_streamed_batches_hold_exactly_the_rows_of_the_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ncclparse.parsers import _model
    from tests.conftest import NCCL_LOGS

    whole = ncclparse.parse_many(NCCL_LOGS)
    monkeypatch.setattr(_model, "BATCH_ROWS", 10)
    monkeypatch.setattr(_model, "BATCH_RUNS", 3)
    batches: list[pa.RecordBatch] = []
    streamed = ncclparse.parse_many(NCCL_LOGS, on_batch=batches.append)
    assert streamed.measurements.num_rows == 0
    assert len(batches) > 10
    assert pa.Table.from_batches(batches).equals(whole.measurements)
    assert streamed.runs.equals(whole.runs)


def test_written_files_get_the_usual_mode_not_a_private_one(tmp_path: Path) -> None:
    import os

    target = tmp_path / "m.csv"
    storage.write_table(ncclparse.parse(LOG).measurements, target)
    mask = os.umask(0)
    os.umask(mask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~mask
