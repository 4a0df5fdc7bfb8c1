"""Issue 14 benchmark: ``check --history`` against a year of nightly history, and the
cost of one ``ingest`` as the history grows.

Inputs (built deterministically into ``--data``, default ``benchmarks/data/history``,
reused while the generator and fixtures are unchanged):

* ``tonight/``: 1,000 logs, copies of the four real nccl-tests fixtures with full
  sweeps (62-68 rows each), laid out as a 32 x 32 pairwise sweep; each copy ends in a
  comment line naming it, so every log has its own content (and ingest key).
* ``year/``: 365 nightly partitions, each holding what ``ncclparse ingest`` writes for
  those 1,000 logs (66,500 rows a night, 24.3 million in all): the first night is a
  real ingest, the others are that file with the night's own keys, ingest id, date
  and time (the rows do not change: the figures are about volume, not values).
* ``month/``: the last 30 of those nights (the ingest comparison).

Measured, each in a fresh process (median of ``--reps``; peak RSS from
``/usr/bin/time -v``):

1. ``ncclparse check tonight --tag cluster=a`` (reference: no history);
2. ``ncclparse check tonight --history year --tag cluster=a``: target < 10 s for
   the whole check (and for its history work, 2 minus 1) and < 1 GB peak RSS;
3. ``ncclparse ingest tonight --history H`` into ``month/`` and ``year/`` (the new
   file removed after each run): target, the year's ingest within 1.5x the month's.

Usage: ``python benchmarks/history.py [--reps N] [--data DIR]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "nccl"
DEFAULT_DATA = ROOT / "benchmarks" / "data" / "history"
TIME_V = Path("/usr/bin/time")
GENERATOR_VERSION = "2"  # 2: each file keeps its runs in its footer, as ingest writes
NIGHTS = 365
LOGS = 1000
LAST_NIGHT = dt.date(2026, 11, 26)
# Real full sweeps (62-68 rows): SOURCES.md in tests/fixtures/nccl says where from.
SWEEPS = (
    "repo-ztan-a3mega_allreduce_16rank_2node_h100_complete.log",
    "superbench-testdata_alltoall_a100_8gpu_c0_blank_redop_complete.log",
    "superbench-testdata_broadcast_a100_8gpu_c0_root_col_ncclinfo_line_complete.log",
    "superbench-testdata_reduce_a100_8gpu_c0_redop_root_cols_complete.log",
)


@dataclass(frozen=True)
class Sample:
    wall: float
    rss_mb: float | None
    code: int


def build(data: Path) -> dict[str, Path]:
    """Build (or reuse, when the stamp matches) tonight/, year/ and month/."""
    paths = {name: data / name for name in ("tonight", "year", "month")}
    digest = hashlib.sha256(GENERATOR_VERSION.encode())
    for name in SWEEPS:
        digest.update((FIXTURES / name).read_bytes())
    stamp = data / "stamp"
    if stamp.exists() and stamp.read_text() == digest.hexdigest():
        return paths
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    started = time.perf_counter()
    print(f"building inputs in {data} ...", file=sys.stderr, flush=True)
    texts = [(FIXTURES / name).read_text() for name in SWEEPS]
    for k in range(LOGS):
        directory = paths["tonight"] / f"node{k // 32:03d}-node{k % 32:03d}"
        directory.mkdir(parents=True)
        text = texts[k % len(texts)] + f"# copy {k} for the history benchmark\n"
        (directory / SWEEPS[k % len(SWEEPS)]).write_text(text)
    _year(paths["tonight"], paths["year"])
    for partition in sorted(paths["year"].glob("date=*"))[-30:]:
        shutil.copytree(partition, paths["month"] / partition.name)
    stamp.write_text(digest.hexdigest())
    elapsed = time.perf_counter() - started
    print(f"  built in {elapsed:.1f} s", file=sys.stderr, flush=True)
    return paths


def _year(tonight: Path, year: Path) -> None:
    """A real ingest of ``tonight`` for the first night, copied to every other."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import ncclparse

    # The footer's run summary is written by ingest's own (private) function, so
    # that each copy carries its own runs, not the first night's.
    from ncclparse.store.history import _with_runs, ingest

    first = LAST_NIGHT - dt.timedelta(days=NIGHTS - 1)
    result = ncclparse.parse_many(sorted(str(p) for p in tonight.rglob("*.log")))
    at = dt.datetime.combine(first, dt.time(2), tzinfo=dt.UTC)
    done = ingest(result, year, tags={"cluster": "a"}, date=first, now=at)
    assert done.path is not None
    table = pq.read_table(done.path)
    keys = table["ingest_key"].to_pylist()

    def replaced(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
        return table.set_column(table.schema.get_field_index(name), name, values)

    for night in range(1, NIGHTS):
        day = first + dt.timedelta(days=night)
        at = dt.datetime.combine(day, dt.time(2), tzinfo=dt.UTC)
        ingest_id = f"{night:016x}"
        new_keys = [hashlib.sha256(f"{night}/{k}".encode()).hexdigest() for k in keys]
        copy = replaced(table, "ingest_key", pa.array(new_keys, pa.string()))
        n = copy.num_rows
        copy = replaced(copy, "ingest_id", pa.array([ingest_id] * n, pa.string()))
        stamp = pa.array([at] * n, pa.timestamp("us", tz="UTC"))
        copy = replaced(copy, "ingested_at", stamp)
        partition = year / f"date={day.isoformat()}"
        partition.mkdir()
        path = partition / f"{at:%Y%m%dT%H%M%S}-{ingest_id}.parquet"
        pq.write_table(_with_runs(copy), path)


def run(argv: list[str]) -> Sample:
    """Run ``ncclparse ARGV`` in a fresh process: wall time and peak RSS."""
    command = [sys.executable, "-m", "ncclparse", *argv]
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        if TIME_V.exists():
            command = [str(TIME_V), "-v", "-o", report.name, *command]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, check=False)
        wall = time.perf_counter() - started
        found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", report.read())
    if done.returncode not in (0, 1):
        sys.exit(f"ncclparse {' '.join(argv)} failed: {done.stderr.decode()[-2000:]}")
    return Sample(wall, int(found.group(1)) / 1024 if found else None, done.returncode)


def median(samples: list[Sample]) -> tuple[float, float | None]:
    rss = [s.rss_mb for s in samples if s.rss_mb is not None]
    return (
        statistics.median(s.wall for s in samples),
        statistics.median(rss) if rss else None,
    )


def ingest_once(tonight: Path, history: Path) -> Sample:
    """One ingest of tonight, dated the day after the last night; its file removed."""
    date = (LAST_NIGHT + dt.timedelta(days=1)).isoformat()
    argv = ["ingest", str(tonight), "--history", str(history), "-q", "--date", date]
    sample = run([*argv, "--tag", "cluster=a"])
    shutil.rmtree(history / f"date={date}")
    return sample


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    paths = build(args.data)
    tonight, year, month = paths["tonight"], paths["year"], paths["month"]
    load = os.getloadavg()[0]
    check = ["check", str(tonight), "--tag", "cluster=a", "-q"]
    alone = median([run(check) for _ in range(args.reps)])
    with_year = median(
        [run([*check, "--history", str(year)]) for _ in range(args.reps)]
    )
    into_month = median([ingest_once(tonight, month) for _ in range(args.reps)])
    into_year = median([ingest_once(tonight, year) for _ in range(args.reps)])
    history_work = with_year[0] - alone[0]
    ratio = into_year[0] / into_month[0]
    rows = [
        ("check, no history (reference)", alone, ""),
        ("check --history (365 nights)", with_year, _ok(with_year[0] < 10)),
        ("  history work (difference)", (history_work, None), _ok(history_work < 10)),
        ("  peak RSS of the whole check", (with_year[1] or 0, None), ""),
        ("ingest into 30 nights", into_month, ""),
        ("ingest into 365 nights", into_year, f"{ratio:.2f}x {_ok(ratio < 1.5)}"),
    ]
    print(f"load average at start {load:.2f}; {args.reps} reps, medians")
    print(f"{'measured':34} {'wall s':>8} {'peak MB':>8}  target")
    for name, (wall, rss), verdict in rows:
        shown = f"{rss:8.0f}" if rss is not None else " " * 8
        print(f"{name:34} {wall:8.2f} {shown}  {verdict}")
    peak_ok = (with_year[1] or 0) < 1024
    print(f"peak RSS < 1 GB: {_ok(peak_ok)}")
    return 0


def _ok(passed: bool) -> str:
    return "MET" if passed else "MISSED"


if __name__ == "__main__":
    sys.exit(main())
