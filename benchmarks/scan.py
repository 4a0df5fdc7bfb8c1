"""Issue 17 benchmark: the native line scanner, parse time as a multiple of grep.

For each log, in one run: ``grep -cE '^ +[0-9]+ +[0-9]+ '`` (its count to a pipe, not
/dev/null, where GNU grep stops at the first match), ``ncclparse parse -q LOG -o
out.parquet`` with the native scanner and with it turned off
(``NCCLPARSE_NO_EXTENSION=1``), and the peer per-line regex parser of run.py; the
median wall time of each, its ratio to grep, and the parse's peak RSS.

Logs (built deterministically into ``--data``, reused):

* ``big``: run.py's benchmark log (the corpus' small runs in NCCL_DEBUG=INFO chatter,
  data rows 5 % of lines);
* ``longruns``: the real NCCL_DEBUG=INFO shape, few long runs: the 16-rank example's
  sweep repeated (``-N``) in 8 runs, each after an init burst, with per-call COLL
  lines after every data row so that data rows are 5 % of lines;
* ``tree``: run.py's 2,000 small logs (oneCCL, IMB, nccl-tests) to one Parquet, with
  ``-j 1`` and the default workers, against the same command on one log (start-up).

With ``--floor``, two lower bounds on any parse that keeps the nccl-tests state machine
in Python and hands it what the scanner keeps (the issue's design), per log: ``scan
only``, a fresh interpreter that iterates over the scanner's hand-over (lines, row
batches, skipped spans) and parses none of it; ``runs only``, timed in-process, making
each of the log's runs (a ``Run`` holding the values its parse found, no rows) and
handing it to the Collector, then the runs table and the log's measurements, already
columns, written as Parquet. Their sum is what such a parse costs before it reads a
single structure line or row.

Usage::

    python benchmarks/scan.py                # 256 MiB logs
    python benchmarks/scan.py --size 1GiB    # the issue's target size
    python benchmarks/scan.py --size 1GiB --logs big --floor
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # run.py beside this file: builders and measurement

LONG_RUNS = 8


def build_long_runs(path: Path, size: int) -> None:
    """Few long runs in NCCL_DEBUG=INFO chatter (see the module docstring)."""
    stamp = path.with_suffix(".stamp")
    key = f"{run.GENERATOR_VERSION} {run.SEED} {size} {LONG_RUNS}"
    if path.exists() and stamp.exists() and stamp.read_text() == key:
        return
    rng = random.Random(run.SEED)
    info = run.InfoLines(rng)
    lines = run.ONE_RUN_SOURCE.read_text().splitlines()
    rows = [i for i, line in enumerate(lines) if run.DATA_ROW.match(line)]
    head, sweep = lines[: rows[0]], lines[rows[0] : rows[-1] + 1]
    tail = lines[rows[-1] + 1 :]
    per_run = size // LONG_RUNS
    with path.open("w", encoding="utf-8", newline="\n") as out:
        for _ in range(LONG_RUNS):
            chunk = [*info.init(), *head]
            written, total, data = 0, len(chunk), 0
            while written < per_run:
                block = []
                for line in sweep:
                    block.append(line)
                    if run.DATA_ROW.match(line):
                        data += 1
                        while data > run.DATA_FRACTION * (total + len(block)):
                            block.append(info.call())
                total += len(block)
                text = "\n".join(chunk + block) + "\n"
                out.write(text)
                written += len(text)
                chunk = []
            out.write("\n".join([*tail, *info.teardown()]) + "\n")
    stamp.write_text(key)


def timed(
    cmd: Sequence[str | Path], env: dict[str, str] | None = None
) -> tuple[float, float | None, int, str]:
    """Wall time, peak RSS (MB, with /usr/bin/time -v), exit code, stdout."""
    argv = [str(c) for c in cmd]
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tv:
        if run.TIME_V.exists():
            argv = [str(run.TIME_V), "-v", "-o", tv.name, *argv]
        t0 = time.perf_counter()
        proc = subprocess.run(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            check=False,
        )
        wall = time.perf_counter() - t0
        text = tv.read()
    peak = None
    for line in text.splitlines():
        if "Maximum resident set size" in line:
            peak = int(line.rsplit(":", 1)[1]) / 1024
    return wall, peak, proc.returncode, proc.stdout.decode(errors="replace")


def median(cmd: Sequence[str | Path], reps: int, env: dict[str, str] | None = None):
    samples = sorted((timed(cmd, env) for _ in range(reps)), key=lambda s: s[0])
    return samples[len(samples) // 2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=run.parse_size, default=run.parse_size("256MiB"))
    ap.add_argument("--data", type=Path, default=run.DEFAULT_DATA)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument(
        "--logs", default="big,longruns,tree", help="comma list: big,longruns,tree"
    )
    ap.add_argument("--python", type=Path, default=Path(sys.executable))
    ap.add_argument(
        "--floor", action="store_true", help="also the design floor (see above)"
    )
    ap.add_argument("--scan-only", metavar="LOG", help=argparse.SUPPRESS)
    ap.add_argument("--runs-only", metavar="LOG", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.scan_only:
        print(scan_only(args.scan_only))
        return 0
    if args.runs_only:
        print(json.dumps(runs_only(args.runs_only, args.data / "out")))
        return 0

    python = args.python
    tool = python.parent / "ncclparse"
    if not tool.exists():
        tool = Path(shutil.which("ncclparse") or "ncclparse")
    native = subprocess.run(
        [
            python,
            "-c",
            "from ncclparse.parsers import _lines; "
            "print(_lines.scan_block is not None)",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    info = run.machine(python)
    info["native scanner"] = native
    for k, v in info.items():
        run.log(f"{k:>16}: {v}")
    if native != "True":
        run.log("the native scanner is not built: pip install -e . (setup.py)")

    args.data.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    wanted = args.logs.split(",")
    if "big" in wanted:
        paths["big"] = run.build_inputs(args.data, args.size)["big"]
    if "longruns" in wanted:
        paths["longruns"] = args.data / f"longruns-{args.size}.log"
        build_long_runs(paths["longruns"], args.size)
    out = args.data / "out"
    out.mkdir(exist_ok=True)
    plain = dict(os.environ)
    plain.pop("NCCLPARSE_NO_EXTENSION", None)
    fallback = {**plain, "NCCLPARSE_NO_EXTENSION": "1"}
    grep = shutil.which("grep") or "grep"
    figures: dict[str, object] = {"machine": info}
    table = [
        "| log | lines (data rows) | grep | parse, native | parse, Python | peer "
        "| native vs grep | Python vs grep | peer vs grep | native vs peer "
        "| peak RSS native / Python |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, path in paths.items():
        lines, data_rows = run.count_lines(path)
        size = run.human(path.stat().st_size)
        run.log(f"{name}: {size}, {lines:,} lines, {data_rows:,} data rows")
        timed([grep, "-cE", run.GREP_PATTERN, path])  # warm the page cache
        g = median([grep, "-cE", run.GREP_PATTERN, path], args.reps)
        run.log(f"   grep {g[0]:.2f} s (count {g[3].strip()})")
        parse = [tool, "parse", "-q", path, "-o", out / f"{name}.parquet"]
        n = median(parse, args.reps, plain)
        run.log(f"   native {n[0]:.2f} s, exit {n[2]}, {n[1]:.0f} MB")
        p = median(parse, args.reps, fallback)
        run.log(f"   Python {p[0]:.2f} s, exit {p[2]}, {p[1]:.0f} MB")
        q = median([python, run.__file__, "--peer", path], args.reps)
        run.log(f"   peer {q[0]:.2f} s ({q[3].strip()} rows)")
        figures[name] = {
            "bytes": path.stat().st_size,
            "lines": lines,
            "data_rows": data_rows,
            "grep_s": g[0],
            "native_s": n[0],
            "python_s": p[0],
            "peer_s": q[0],
            "native_rss_mb": n[1],
            "python_rss_mb": p[1],
            "peer_rss_mb": q[1],
        }
        table.append(
            f"| {name} {size} | {lines:,} ({data_rows:,}) | {g[0]:.2f} s "
            f"| {n[0]:.2f} s | {p[0]:.2f} s | {q[0]:.2f} s | {n[0] / g[0]:.1f}x "
            f"| {p[0] / g[0]:.1f}x | {q[0] / g[0]:.1f}x | {n[0] / q[0]:.2f}x "
            f"| {n[1]:.0f} / {p[1]:.0f} MB |"
        )
        if args.floor:
            figures[f"{name}_floor"] = floor(path, python, args, g[0], n[0])
    if "tree" in wanted:
        tree = run.build_inputs(args.data, args.size)["tree"]
        figures["tree"] = many_logs(tree, args.data / "out", tool, args.reps, plain)
    (args.data / "scan.json").write_text(json.dumps(figures, indent=2))
    print("\n".join(table))
    return 0


def floor(
    path: Path, python: Path, args: argparse.Namespace, grep_s: float, parse_s: float
) -> dict[str, float]:
    """The two lower bounds of ``--floor`` for ``path``, logged against grep."""
    here = Path(__file__).resolve()
    scan = median([python, here, "--scan-only", path], args.reps)
    child = [python, here, "--data", args.data, "--runs-only", path]
    spent = json.loads(subprocess.run(child, capture_output=True, check=True).stdout)
    total = scan[0] + spent["runs_s"] + spent["write_s"]
    run.log(
        f"   floor: scan only {scan[0]:.2f} s ({scan[3].strip()} items handed over), "
        f"runs only {spent['runs_s']:.2f} s ({spent['runs']:,} runs), measurements "
        f"written {spent['write_s']:.2f} s; sum {total:.2f} s = {total / grep_s:.1f}x "
        f"grep (parse {parse_s / grep_s:.1f}x)"
    )
    return {"scan_only_s": scan[0], **spent, "sum_s": total}


def scan_only(path: str) -> int:
    """Iterate over the native scanner's hand-over for ``path``; parse none of it."""
    from ncclparse.parsers._lines import open_source, without_nccl_debug

    name, handle, _ = open_source(path)
    with handle:
        return sum(1 for _ in without_nccl_debug(handle, 1, name))


def runs_only(path: str, out: Path) -> dict[str, float]:
    """Time, in-process, what a parse does once per run and once per table, given
    the runs and rows of ``path`` (parsed first, untimed)."""
    import pyarrow.parquet as pq

    import ncclparse
    from ncclparse.parsers._model import Collector, Run

    parsed = ncclparse.parse_many([path])
    runs = parsed.runs.to_pylist()
    # Not a Run's attribute (source, run, rows), or notes (kept as Notes objects).
    skip = {"source", "run", "rows", "errors", "warnings", "refused", "tool"}
    start = time.perf_counter()
    collector = Collector()
    for index, values in enumerate(runs):
        one = Run(tool=values["tool"], first_line=values["first_line"])
        for key, value in values.items():
            if key not in skip:  # map columns (params, nccl_env) are dicts in a Run
                mapping = isinstance(getattr(one, key), dict)
                setattr(one, key, dict(value) if mapping else value)
        collector.add_run(values["source"], index, one)
    collector.runs_table()
    runs_s = time.perf_counter() - start
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    pq.write_table(parsed.measurements, out / "floor.parquet")
    write_s = time.perf_counter() - start
    return {"runs": len(runs), "runs_s": runs_s, "write_s": write_s}


def many_logs(
    tree: Path, out: Path, tool: Path, reps: int, env: dict[str, str]
) -> dict[str, float | None]:
    """Target 3's second half: run.py's 2,000 small logs to one Parquet, in one
    process (``-j 1``) and with the default workers, beyond the start-up (the same
    command on one of the logs)."""
    one = min(tree.rglob("*.log"))
    out = out / "tree.parquet"
    start = median([tool, "parse", "-q", one, "-o", out], reps, env)
    figures: dict[str, float | None] = {"one_log_s": start[0]}
    for jobs in ("1", "auto"):
        wall, peak, code, _ = median(
            [tool, "parse", "-q", "-j", jobs, tree, "-o", out], reps, env
        )
        run.log(
            f"tree, -j {jobs}: {wall:.2f} s ({wall - start[0]:.2f} s beyond the "
            f"{start[0]:.2f} s of one log), exit {code}, largest process {peak:.0f} MB"
        )
        figures[f"j{jobs}_s"], figures[f"j{jobs}_rss_mb"] = wall, peak
    return figures


if __name__ == "__main__":
    raise SystemExit(main())
