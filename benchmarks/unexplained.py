"""How much of each healthy log's mid-size time the expected curve leaves unexplained.

For each healthy real log (the shipped example and a few corpus fixtures), over the
rows with 1 MiB <= size <= 256 MiB: the median of ``gap_residual_us / time_us`` (the
share of the measured time the gap attribution cannot name) and the median of
``|time_us - model_time_us| / time_us`` (the model's error). Prints a Markdown table;
``--json`` prints the figures as JSON. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ncclparse import parse  # noqa: E402
from ncclparse.efficiency import analyze  # noqa: E402

MIB = 1 << 20
# Healthy real logs: (short name, path relative to the repository, a glob).
LOGS = (
    ("example 2x8 H100", "examples/all_reduce_16rank_2node_h100.log"),
    ("keitaw p5 (NCCL 2.22)", "tests/fixtures/nccl_unseen/repo-keitaw-p5_*"),
    ("nccltests-252", "tests/fixtures/nccl/nccltests-252_*"),
    ("nccltests-119", "tests/fixtures/nccl/nccltests-119_*"),
    (
        "superbench broadcast",
        "tests/fixtures/nccl/superbench-testdata_broadcast_a100_8gpu_*",
    ),
    ("superbench reduce", "tests/fixtures/nccl/superbench-testdata_reduce_a100_8gpu_*"),
    ("ztan a3mega", "tests/fixtures/nccl/repo-ztan-a3mega_*"),
)


def shares(path: Path) -> dict[str, float]:
    """The two medians (fractions of the time) and the number of rows they cover."""
    result = parse(path)
    rows = analyze(result.measurements, runs=result.runs).rows
    size = rows.column("size_bytes").to_numpy(zero_copy_only=False).astype(float)
    time = rows.column("time_us").to_numpy(zero_copy_only=False).astype(float)
    residual = rows.column("gap_residual_us").to_numpy(zero_copy_only=False)
    model = rows.column("model_time_us").to_numpy(zero_copy_only=False)
    mid = (size >= MIB) & (size <= 256 * MIB) & (time > 0)
    residual = np.asarray(residual, dtype=float)[mid] / time[mid]
    error = np.abs(time[mid] - np.asarray(model, dtype=float)[mid]) / time[mid]
    return {
        "rows": int(mid.sum()),
        "unexplained": _median(residual),
        "model_error": _median(error),
    }


def _median(values: np.ndarray) -> float:
    """The median of the known values; NaN when none is (no ideal, no size)."""
    known = values[~np.isnan(values)]
    return float(np.median(known)) if len(known) else float("nan")


def measure() -> dict[str, dict[str, float]]:
    """Every log's figures by its short name."""
    found = {}
    for name, pattern in LOGS:
        (path,) = sorted(ROOT.glob(pattern))
        found[name] = shares(path)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    found = measure()
    if args.json:
        print(json.dumps(found, indent=2))
        return
    print("| log | rows 1-256 MiB | unexplained (median) | model error (median) |")
    print("|---|---|---|---|")
    for name, f in found.items():
        cells = [
            "n/a" if np.isnan(f[k]) else f"{f[k]:.1%}"
            for k in ("unexplained", "model_error")
        ]
        print(f"| {name} | {f['rows']} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
