"""Issue 7 benchmark: every performance target against its reference, in one run.

Builds its inputs deterministically from ``tests/fixtures`` into a scratch directory
(default ``benchmarks/data/``, git-ignored), then measures:

1. throughput: ``ncclparse parse big.log -o out.parquet`` vs ``grep -cE`` on the same
   file, and vs a per-line regular-expression parser (the peer reference, below);
2. peak RSS of that parse at two file sizes (does it grow with the file?);
3. 2,000 real-shaped logs in a directory tree into one Parquet file;
4. start-up: ``ncclparse --help`` vs ``python -c pass`` (and ``ncclparse report``);
5. the efficiency engine (``ncclparse.efficiency.analyze``) on 1 million rows;
6. one run as long as the big log (a real sweep repeated, as nccl-tests ``-N`` prints
   it) and a quarter of it: peak RSS of ``parse -o``, ``report`` and ``ingest`` (flat,
   < 500 MB);
7. ``check`` of 5,000 and 10,000 small logs (a real log of 62 rows copied): peak RSS
   and what each more log costs.

Each figure is the median of ``--reps`` repetitions. Usage::

    python benchmarks/run.py                  # 256 MiB big log, a few minutes
    python benchmarks/run.py --size 1GiB      # the issue's target size
    python benchmarks/run.py --profile        # also profile one parse of big.log

Internal modes (used by the script on itself): ``--peer FILE`` runs the peer parser,
``--efficiency-child N`` times the efficiency engine on N rows in a fresh interpreter.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
DEFAULT_DATA = ROOT / "benchmarks" / "data"
SEED = 7  # issue 7
GREP_PATTERN = r"^ +[0-9]+ +[0-9]+ "
DATA_ROW = re.compile(GREP_PATTERN)
DATA_FRACTION = 0.05  # share of the big log's lines that are data rows
MANY_FILES = 2000
EFFICIENCY_ROWS = 1_000_000
GENERATOR_VERSION = "1"  # bump when the input generator changes


# --------------------------------------------------------------------------------------
# Peer reference: the simple per-line regular-expression parser people write.

PEER_ROW = re.compile(
    r"^\s+(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)"
    r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)"
    r"(?:\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+))?"
)


def peer_parse(path: str) -> int:
    """For each line, ``re.match`` a data row and collect its floats."""
    rows = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            m = PEER_ROW.match(line)
            if m:
                g = m.groups()
                values = g[:2] + g[5:8] + g[9:12]
                rows.append(tuple(float(v) for v in values if v is not None))
    return len(rows)


# --------------------------------------------------------------------------------------
# Inputs


def parse_size(text: str) -> int:
    """``256MiB``, ``1GiB``, ``512M``, ``1e9`` or a plain byte count."""
    m = re.fullmatch(r"\s*([\d.e+]+)\s*([kKmMgG]?)(i?[bB])?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()]
    return int(float(m.group(1)) * scale)


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError


def corpus(kind: str) -> list[Path]:
    return sorted((FIXTURES / kind).glob("*.log"))


_HOSTS = ("dgx-a100-0017", "gpu-h100-n042", "node-b200-113", "mi250x-c07n3")
_COLLS = ("AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "Send")


class InfoLines:
    """Realistic NCCL_DEBUG=INFO lines (init burst, per-call COLL lines, teardown)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.op = 0

    def _new_job(self) -> None:
        r = self.rng
        self.host = f"{r.choice(_HOSTS)}"
        self.pid = r.randrange(1000, 4_000_000)
        self.nranks = r.choice((2, 4, 8, 16))
        self.comm = r.randrange(0x55_0000_0000, 0x56_0000_0000) * 16
        self.coll = r.choice(_COLLS)
        self.op = 0

    def _prefix(self, dev: int) -> str:
        tid = self.pid + self.rng.randrange(0, 64)
        return f"{self.host}:{self.pid}:{tid} [{dev}] NCCL INFO "

    def init(self) -> Iterator[str]:
        self._new_job()
        r, n = self.rng, self.nranks
        ip = f"10.{r.randrange(256)}.{r.randrange(256)}.{r.randrange(1, 255)}"
        p = self._prefix
        yield p(0) + f"Bootstrap : Using eth0:{ip}<0>"
        yield p(0) + (
            "NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: "
            "No such file or directory No plugin found (libnccl-net.so), using "
            "internal implementation"
        )
        yield p(0) + f"cudaDriverVersion {r.choice((12020, 12040, 12080))}"
        for dev in range(min(n, 8)):
            yield p(dev) + (
                "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB "
                f"[3]mlx5_3:1/IB ; OOB eth0:{ip}<0>"
            )
            yield p(dev) + "Using network IB"
            yield p(dev) + (
                f"comm 0x{self.comm:x} rank {dev} nranks {n} cudaDev {dev} nvmlDev "
                f"{dev} busId {dev * 0x10 + 0x1B000:x} commId 0x{r.getrandbits(64):x}"
                " - Init START"
            )
            yield p(dev) + f"Setting affinity for GPU {dev} to ffff,ffffffff"
        for ch in range(r.choice((4, 8, 16))):
            ring = " ".join(f"{(i + ch) % n:>3}" for i in range(n))
            yield p(0) + f"Channel {ch:02d}/{n * 2:02d} : {ring}"
        yield p(0) + "Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1 [2] -1/-1/-1->0->1"
        yield p(0) + "P2P Chunksize set to 524288"
        for dev in range(min(n, 8)):
            for ch in range(r.choice((2, 4))):
                peer = (dev + 1) % n
                via = r.choice(("P2P/IPC/read", "P2P/CUMEM/read", "NET/IB/0/GDRDMA"))
                yield p(dev) + (
                    f"Channel {ch:02d}/0 : {dev}[{dev}] -> {peer}[{peer}] via {via}"
                )
        yield p(0) + "Connected all rings"
        yield p(0) + "Connected all trees"
        yield p(0) + "threadThresholds 8/8/64 | 128/8/64 | 512 | 512"
        yield p(0) + (
            "32 coll channels, 32 nvls channels, 32 p2p channels, "
            "32 p2p channels per peer"
        )
        for dev in range(min(n, 8)):
            yield p(dev) + (
                f"comm 0x{self.comm:x} rank {dev} nranks {n} cudaDev {dev} nvmlDev "
                f"{dev} busId {dev * 0x10 + 0x1B000:x} commId 0x{r.getrandbits(64):x}"
                " - Init COMPLETE"
            )

    def call(self) -> str:
        """One per-collective line, as NCCL_DEBUG_SUBSYS=COLL prints it."""
        r = self.rng
        self.op += 1
        dev = r.randrange(min(self.nranks, 8))
        if r.random() < 0.08:
            peer = (dev + 1) % self.nranks
            return self._prefix(dev) + (
                f"Channel {r.randrange(32):02d}/1 : {dev}[{dev}] -> {peer}[{peer}] "
                "[send] via NET/IB/0/GDRDMA/Shared"
            )
        buf = r.randrange(0x7F00_0000_0000, 0x7FFF_0000_0000) & ~0xFFF
        return self._prefix(dev) + (
            f"{self.coll}: opCount {self.op:x} sendbuff 0x{buf:x} recvbuff 0x{buf:x} "
            f"count {1 << r.randrange(1, 30)} datatype 7 op 0 root 0 "
            f"comm 0x{self.comm:x} [nranks={self.nranks}] "
            f"stream 0x{self.comm + 0x4E60:x}"
        )

    def teardown(self) -> Iterator[str]:
        for dev in range(min(self.nranks, 8)):
            yield self._prefix(dev) + (
                f"comm 0x{self.comm:x} rank {dev} nranks {self.nranks} cudaDev {dev} "
                f"busId {dev * 0x10 + 0x1B000:x} - Destroy COMPLETE"
            )


def big_log_blocks(rng: random.Random) -> Iterator[str]:
    """Endless blocks of text: a corpus log, INFO lines before, inside and after it.

    After each data row, INFO lines (per-call COLL lines) are inserted until data rows
    are at most DATA_FRACTION of all lines so far, so the whole file holds ~5 %.
    """
    logs = [p.read_text(encoding="utf-8", errors="replace") for p in corpus("nccl")]
    info = InfoLines(rng)
    total = data = 0
    while True:
        order = list(range(len(logs)))
        rng.shuffle(order)
        for i in order:
            out = list(info.init())
            for line in logs[i].splitlines():
                out.append(line)
                if DATA_ROW.match(line):
                    data += 1
                    while data > DATA_FRACTION * (total + len(out)):
                        out.append(info.call())
            out.extend(info.teardown())
            total += len(out)
            out.append("")
            yield "\n".join(out)


def build_big(path: Path, small: Path, size: int) -> None:
    """Write ``size`` bytes of blocks to ``path``; ``small`` is its first quarter."""
    rng = random.Random(SEED)
    quarter = size // 4
    written = pending = 0
    chunk: list[str] = []
    with (
        path.open("w", encoding="utf-8", newline="\n") as big,
        small.open("w", encoding="utf-8", newline="\n") as head,
    ):
        for block in big_log_blocks(rng):
            chunk.append(block)
            pending += len(block.encode())
            limit = quarter if written < quarter else size
            if pending < 1 << 22 and written + pending < limit:
                continue
            text = "".join(chunk)
            big.write(text)
            if written < quarter:
                head.write(text)
            written += pending
            chunk, pending = [], 0
            if written >= size:
                break


def build_tree(root: Path, count: int) -> None:
    """``count`` corpus logs (NCCL, oneCCL, IMB) laid out like a pairwise sweep."""
    rng = random.Random(SEED)
    logs = [p for kind in ("nccl", "oneccl", "imb") for p in corpus(kind)]
    texts = [p.read_bytes() for p in logs]
    nodes = 64  # 64*63/2 = 2016 pairs
    pairs = [(a, b) for a in range(nodes) for b in range(a + 1, nodes)][:count]
    for k, (a, b) in enumerate(pairs):
        day = f"2024-06-{1 + k % 7:02d}"
        directory = root / day / f"node{a:03d}-node{b:03d}"
        directory.mkdir(parents=True, exist_ok=True)
        i = rng.randrange(len(texts))
        (directory / logs[i].name).write_bytes(texts[i])


def build_inputs(data: Path, size: int) -> dict[str, Path]:
    """Build (or reuse, when the stamp matches) big.log, small.log and tree/."""
    data.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256(f"{GENERATOR_VERSION} {SEED} {size} {MANY_FILES}".encode())
    for kind in ("nccl", "oneccl", "imb"):
        for p in corpus(kind):
            h.update(p.name.encode() + p.read_bytes())
    stamp_text = h.hexdigest()
    paths = {
        "big": data / f"big-{size}.log",
        "small": data / f"small-{size}.log",
        "tree": data / "tree",
    }
    stamp = data / f"stamp-{size}"
    if stamp.exists() and stamp.read_text() == stamp_text:
        return paths
    t0 = time.perf_counter()
    print(f"building inputs in {data} ...", file=sys.stderr, flush=True)
    build_big(paths["big"], paths["small"], size)
    shutil.rmtree(paths["tree"], ignore_errors=True)
    build_tree(paths["tree"], MANY_FILES)
    stamp.write_text(stamp_text)
    print(f"  built in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    return paths


def count_lines(path: Path) -> tuple[int, int]:
    total = data = 0
    with path.open("rb") as handle:
        pattern = re.compile(GREP_PATTERN.encode())
        for line in handle:
            total += 1
            data += pattern.match(line) is not None
    return total, data


# --------------------------------------------------------------------------------------
# Measurement


@dataclass
class Sample:
    wall: float
    rss_kb: int | None
    returncode: int
    stdout: str


TIME_V = Path("/usr/bin/time")


ONE_RUN_SOURCE = ROOT / "examples" / "all_reduce_16rank_2node_h100.log"


def build_one_run(path: Path, size: int) -> None:
    """One nccl-tests run of ``size`` bytes: a real log's sweep repeated (``-N``)."""
    if path.exists() and path.stat().st_size >= size:
        return
    lines = ONE_RUN_SOURCE.read_text().splitlines(keepends=True)
    rows = [i for i, line in enumerate(lines) if DATA_ROW.match(line)]
    head, sweep, tail = (
        lines[: rows[0]],
        lines[rows[0] : rows[-1] + 1],
        lines[rows[-1] + 1 :],
    )
    block = "".join(sweep) * 100
    with path.open("w") as out:
        out.write("".join(head))
        written = 0
        while written < size:
            out.write(block)
            written += len(block)
        out.write("".join(tail))


def one_run_rows(
    tool: Path, data: Path, size: int, out: Path, figures: dict[str, object]
) -> list[Row]:
    """Target 6: parse -o, report and ingest of one long run, at ``size`` and a
    quarter."""
    peaks: dict[str, dict[int, float]] = {"parse": {}, "report": {}, "ingest": {}}
    for each in (size // 4, size):
        log_path = data / f"onerun-{each}.log"
        build_one_run(log_path, each)
        history = out / f"history-{each}"
        shutil.rmtree(history, ignore_errors=True)
        for command, where in (
            ("parse", ["-o", out / "one.parquet"]),
            ("report", ["-o", out / "one.html"]),
            ("ingest", ["--history", history]),
        ):
            log(f"6. ncclparse {command} one run of {human(each)} ...")
            sample = run_once([tool, command, "-q", log_path, *where], rss=True)
            peak = (sample.rss_kb or 0) / 1024
            peaks[command][each] = peak
            log(f"   {sample.wall:.1f} s, exit {sample.returncode}, {peak:.0f} MB peak")
    figures["one_run_peak_mb"] = peaks
    return [
        Row(
            f"6. peak RSS, {command} one run of {human(size)}",
            f"{by_size[size]:.0f} MB",
            f"{human(size // 4)}: {by_size[size // 4]:.0f} MB",
            f"{by_size[size] - by_size[size // 4]:+.0f} MB for 4x",
            "< 500 MB, flat",
            verdict(by_size[size] < 500 and by_size[size] < 1.2 * by_size[size // 4]),
        )
        for command, by_size in peaks.items()
    ]


# A real log of 62 rows (tests/_derive.py HEALTHY).
SMALL_LOG = (
    ROOT
    / "tests"
    / "fixtures"
    / "nccl"
    / "repo-ztan-a3mega_allreduce_16rank_2node_h100_complete.log"
)


def many_logs_rows(tool: Path, data: Path, out: Path, figures: dict[str, object]):
    """Target 7: check of 5,000 and 10,000 copies of a small real log."""
    text = SMALL_LOG.read_text()
    peaks: dict[int, float] = {}
    for count in (5_000, 10_000):
        logs = data / f"small-{count}"
        if not logs.is_dir():
            logs.mkdir()
            for i in range(count):
                (logs / f"n{i:05d}.log").write_text(text + f"# copy {i}\n")
        log(f"7. ncclparse check {count} logs of 62 rows ...")
        sample = run_once(
            [tool, "check", "-q", logs, "--json", out / f"check-{count}.json"],
            rss=True,
        )
        peaks[count] = (sample.rss_kb or 0) / 1024
        log(f"   {sample.wall:.1f} s, exit {sample.returncode}, {peaks[count]:.0f} MB")
    figures["many_logs_peak_mb"] = peaks
    per_log_kb = (peaks[10_000] - peaks[5_000]) * 1024 / 5_000
    return [
        Row(
            "7. peak RSS, check of 10,000 logs of 62 rows",
            f"{peaks[10_000]:.0f} MB",
            f"5,000 logs: {peaks[5_000]:.0f} MB",
            f"{per_log_kb:+.0f} KB per log",
            "< 1.5x for 2x the logs",
            verdict(peaks[10_000] < 1.5 * peaks[5_000]),
        )
    ]


def run_once(cmd: Sequence[str | Path], *, rss: bool = False, cwd: Path | None = None):
    """Run ``cmd`` once: wall time (s), peak RSS (kB) when asked, exit code, stdout."""
    argv = [str(c) for c in cmd]
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tv:
        if rss and TIME_V.exists():
            argv = [str(TIME_V), "-v", "-o", tv.name, *argv]
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd
        )
        out, _ = proc.communicate()
        wall = time.perf_counter() - t0
        peak = None
        if rss:
            if TIME_V.exists():
                m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", tv.read())
                peak = int(m.group(1)) if m else None
            else:  # max over all children so far: run RSS probes largest-last
                import resource

                peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return Sample(wall, peak, proc.returncode, out.decode(errors="replace"))


def run_many(cmd: Sequence[str | Path], reps: int, **kw) -> list[Sample]:
    return [run_once(cmd, **kw) for _ in range(reps)]


def med(samples: list[Sample]) -> float:
    return statistics.median(s.wall for s in samples)


def med_rss(samples: list[Sample]) -> float | None:
    values = [s.rss_kb for s in samples if s.rss_kb is not None]
    return statistics.median(values) / 1024 if values else None


def machine(python: Path) -> dict[str, str]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    version = subprocess.run(
        [
            python,
            "-c",
            "import sys, pyarrow; print(sys.version.split()[0], "
            "'pyarrow', pyarrow.__version__)",
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    grep = subprocess.run(
        ["grep", "--version"], capture_output=True, text=True, check=False
    ).stdout.splitlines()
    try:
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        load = "?"
    return {
        "date": dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "nproc": str(len(os.sched_getaffinity(0))),
        "cpu": model,
        "python": f"{version} ({python})",
        "os": platform.platform(),
        "grep": (grep[0] if grep else "?") + f", LANG={os.environ.get('LANG', '')}",
        "loadavg at start": load,
    }


@dataclass
class Row:
    target: str
    measured: str
    reference: str
    ratio: str
    goal: str
    met: str


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("yes" if ok else "NO")


def render(rows: list[Row]) -> str:
    head = Row("target", "ncclparse", "reference", "ratio", "goal", "met")
    cols = list(
        zip(
            *[
                (r.target, r.measured, r.reference, r.ratio, r.goal, r.met)
                for r in [head, *rows]
            ],
            strict=True,
        )
    )
    widths = [max(len(c) for c in col) for col in cols]
    lines = []
    for k, r in enumerate([head, *rows]):
        cells = (r.target, r.measured, r.reference, r.ratio, r.goal, r.met)
        lines.append(
            "| "
            + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))
            + " |"
        )
        if k == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--size",
        type=parse_size,
        default=parse_size("256MiB"),
        help="size of the big log (default 256MiB; the issue's target is 1GiB)",
    )
    ap.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help="scratch directory for the inputs (default benchmarks/data)",
    )
    ap.add_argument(
        "--reps",
        type=int,
        default=3,
        help="repetitions of each long measurement (median)",
    )
    ap.add_argument(
        "--quick-reps",
        type=int,
        default=9,
        help="repetitions of each start-up measurement (median)",
    )
    ap.add_argument(
        "--python",
        type=Path,
        default=Path(sys.executable),
        help="interpreter for `python -c pass` and the peer parser",
    )
    ap.add_argument(
        "--ncclparse",
        type=Path,
        default=None,
        help="ncclparse executable (default: next to --python)",
    )
    ap.add_argument(
        "--profile",
        action="store_true",
        help="also profile one parse of the big log; print hot spots",
    )
    ap.add_argument(
        "--profiler",
        choices=("auto", "py-spy", "cprofile"),
        default="auto",
        help="profiler for --profile (auto: py-spy if installed, else cProfile)",
    )
    ap.add_argument(
        "--skip", default="", help="comma list of targets to skip: 1,2,3,4,5,6,7"
    )
    ap.add_argument("--peer", metavar="FILE", help=argparse.SUPPRESS)
    ap.add_argument("--efficiency-child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.peer:
        print(peer_parse(args.peer))
        return 0
    if args.efficiency_child:
        return efficiency_child(args.efficiency_child, args.reps)

    python = args.python
    tool = args.ncclparse or python.parent / "ncclparse"
    if not tool.exists():
        tool = Path(shutil.which("ncclparse") or "ncclparse")
    skip = set(filter(None, args.skip.split(",")))
    info = machine(python)
    for k, v in info.items():
        log(f"{k:>16}: {v}")

    paths = build_inputs(args.data, args.size)
    big, small, tree = paths["big"], paths["small"], paths["tree"]
    out = args.data / "out"
    out.mkdir(exist_ok=True)
    big_size, small_size = big.stat().st_size, small.stat().st_size
    lines, data_rows = count_lines(big)
    log(
        f"big log: {human(big_size)}, {lines:,} lines, {data_rows:,} data rows "
        f"({100 * data_rows / lines:.1f} %); small log: {human(small_size)}; "
        f"tree: {MANY_FILES} files"
    )

    rows: list[Row] = []
    figures: dict[str, object] = {
        "machine": info,
        "big_bytes": big_size,
        "lines": lines,
        "data_rows": data_rows,
    }
    t_start = time.perf_counter()

    # Start-up reference, used by targets 3 and 4.
    run_many([python, "-c", "pass"], 2)  # warm the interpreter's files
    pypass = med(run_many([python, "-c", "pass"], args.quick_reps))
    figures["python_pass_s"] = pypass

    if "1" not in skip or "2" not in skip:
        grep = [shutil.which("grep") or "grep", "-cE", GREP_PATTERN, big]
        run_once(grep)  # warm the page cache
        log("1. grep ...")
        g = run_many(grep, args.reps, rss=True)
        log(f"   grep {med(g):.2f} s, count {g[0].stdout.strip()}")
        log("1. ncclparse parse big.log ...")
        parse_big = [tool, "parse", "-q", big, "-o", out / "big.parquet"]
        p = run_many(parse_big, args.reps, rss=True)
        log(
            f"   ncclparse {med(p):.2f} s, exit {p[0].returncode}, "
            f"{med_rss(p):.0f} MB peak"
        )
        rows_out = parquet_rows(python, out / "big.parquet")
        log("1. peer regex parser ...")
        q = run_many(
            [python, Path(__file__).resolve(), "--peer", big], args.reps, rss=True
        )
        log(f"   peer {med(q):.2f} s, {q[0].stdout.strip()} rows")
        tg, tp, tq = med(g), med(p), med(q)
        mbps = big_size / 2**20 / tp
        figures.update(
            grep_s=tg,
            parse_s=tp,
            peer_s=tq,
            parse_rows=rows_out,
            peer_rows=q[0].stdout.strip(),
            parse_exit=p[0].returncode,
        )
        rows.append(
            Row(
                f"1. parse {human(big_size)} log -> Parquet vs grep -cE",
                f"{tp:.2f} s ({mbps:.0f} MiB/s, {rows_out} rows)",
                f"grep {tg:.2f} s",
                f"{tp / tg:.1f}x grep",
                "<= 2x grep",
                verdict(tp <= 2 * tg),
            )
        )
        rows.append(
            Row(
                "1. peer per-line regex parser vs grep",
                f"{tq:.2f} s ({q[0].stdout.strip()} rows)",
                f"grep {tg:.2f} s",
                f"{tq / tg:.1f}x grep",
                "~7.5x grep (reference)",
                "n/a",
            )
        )
        rows.append(
            Row(
                "1. ncclparse vs peer parser",
                f"{tp:.2f} s",
                f"peer {tq:.2f} s",
                f"{tp / tq:.2f}x peer",
                "well below 1x",
                verdict(tp < 0.5 * tq),
            )
        )

        if "2" not in skip:
            log("2. ncclparse parse small.log (RSS) ...")
            s = run_many(
                [tool, "parse", "-q", small, "-o", out / "small.parquet"],
                args.reps,
                rss=True,
            )
            rb, rs = med_rss(p), med_rss(s)
            figures.update(rss_big_mb=rb, rss_small_mb=rs, parse_small_s=med(s))
            if rb is not None and rs is not None:
                grow = (rb - rs) / ((big_size - small_size) / 2**20)
                rows.append(
                    Row(
                        f"2. peak RSS, {human(big_size)} log",
                        f"{rb:.0f} MB",
                        f"{human(small_size)} log: {rs:.0f} MB",
                        f"+{grow:.2f} MB per MiB of log",
                        "< 300 MB, flat",
                        verdict(rb < 300 and grow < 0.05),
                    )
                )
                rows.append(
                    Row(
                        "2. peak RSS of the references",
                        f"grep {med_rss(g):.0f} MB",
                        f"peer {med_rss(q):.0f} MB",
                        "-",
                        "-",
                        "n/a",
                    )
                )

    if "3" not in skip:
        log("3. ncclparse parse tree/ (2,000 files) ...")
        m = run_many([tool, "parse", "-q", tree, "-o", out / "tree.parquet"], args.reps)
        tm = med(m)
        per = (tm - pypass) / MANY_FILES * 1000
        figures.update(
            tree_s=tm,
            tree_ms_per_file=per,
            tree_rows=parquet_rows(python, out / "tree.parquet"),
            tree_exit=m[0].returncode,
        )
        rows.append(
            Row(
                f"3. {MANY_FILES} files -> one Parquet",
                f"{tm:.2f} s",
                "budget 5 s",
                f"{tm / 5:.2f}x budget",
                "< 5 s",
                verdict(tm < 5),
            )
        )
        rows.append(
            Row(
                "3. ... per file beyond start-up",
                f"{per:.2f} ms/file",
                f"python -c pass {pypass * 1000:.0f} ms",
                "-",
                "< 2 ms/file",
                verdict(per < 2),
            )
        )

    if "4" not in skip:
        log("4. start-up ...")
        h = med(run_many([tool, "--help"], args.quick_reps))
        figures["help_s"] = h
        rows.append(
            Row(
                "4. ncclparse --help",
                f"{h * 1000:.0f} ms",
                f"python -c pass {pypass * 1000:.0f} ms",
                f"+{(h - pypass) * 1000:.0f} ms",
                "<= +150 ms",
                verdict(h - pypass <= 0.15),
            )
        )
        has_report = run_once([tool, "report", "--help"]).returncode == 0
        typical = (
            FIXTURES
            / "nccl"
            / ("repo-ztan-a3mega_allreduce_16rank_2node_h100_complete.log")
        )
        if has_report:
            r = run_many(
                [tool, "report", typical, "-o", out / "report.html"], args.reps
            )
            tr = med(r)
            figures["report_s"] = tr
            rows.append(
                Row(
                    "4. ncclparse report, one typical log",
                    f"{tr:.2f} s"
                    + ("" if r[0].returncode == 0 else f" (exit {r[0].returncode})"),
                    "budget 2 s",
                    "-",
                    "< 2 s, all included",
                    verdict(tr < 2 and r[0].returncode == 0),
                )
            )
        else:
            rows.append(
                Row(
                    "4. ncclparse report, one typical log",
                    "not built yet",
                    "-",
                    "-",
                    "< 2 s",
                    "n/a",
                )
            )

    if "5" not in skip:
        log("5. efficiency engine ...")
        e = subprocess.run(
            [
                python,
                Path(__file__).resolve(),
                "--efficiency-child",
                str(EFFICIENCY_ROWS),
                "--reps",
                str(args.reps),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        result = (
            json.loads(e.stdout.strip().splitlines()[-1])
            if (e.stdout.strip())
            else {"status": f"error: {e.stderr.strip()[-300:]}"}
        )
        figures["efficiency"] = result
        if "seconds" in result:
            te = result["seconds"]
            rows.append(
                Row(
                    f"5. efficiency.analyze, {result['rows']:,} rows",
                    f"{te:.2f} s",
                    "budget 2 s",
                    f"{te / 2:.2f}x budget",
                    "< 2 s",
                    verdict(te < 2),
                )
            )
        else:
            rows.append(
                Row(
                    "5. efficiency engine, 1M rows",
                    result["status"],
                    "-",
                    "-",
                    "< 2 s",
                    "n/a",
                )
            )

    if "6" not in skip:
        rows.extend(one_run_rows(tool, args.data, big_size, out, figures))
    if "7" not in skip:
        rows.extend(many_logs_rows(tool, args.data, out, figures))

    figures["bench_s"] = time.perf_counter() - t_start
    print()
    print(render(rows))
    print()
    for k, v in info.items():
        print(f"- {k}: {v}")
    print(
        f"- big log: {human(big_size)}, {lines:,} lines, {data_rows:,} data rows "
        f"({100 * data_rows / lines:.1f} %); small log {human(small_size)}; "
        f"medians of {args.reps} runs (start-up: {args.quick_reps})"
    )
    print(f"- benchmark time: {figures['bench_s']:.0f} s")
    (args.data / "last.json").write_text(json.dumps(figures, indent=1, default=str))

    if args.profile:
        profile(python, big, out, args.profiler)
    return 0


def parquet_rows(python: Path, path: Path) -> int | str:
    r = subprocess.run(
        [
            python,
            "-c",
            "import sys, pyarrow.parquet as pq; "
            "print(pq.ParquetFile(sys.argv[1]).metadata.num_rows)",
            path,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return int(r.stdout) if r.returncode == 0 else "?"


def profile(python: Path, big: Path, out: Path, profiler: str) -> None:
    """Profile one parse of ``big`` in a fresh interpreter; print the hot spots.

    py-spy (sampling, little overhead) when installed next to ``python`` or on PATH,
    else cProfile (deterministic, inflates per-call costs, but counts calls).
    """
    spy = python.parent / "py-spy"
    spy = spy if spy.exists() else Path(shutil.which("py-spy") or "py-spy")
    if profiler == "auto":
        profiler = "py-spy" if spy.exists() else "cprofile"
    target = ["-m", "ncclparse", "parse", "-q", big, "-o", out / "profiled.parquet"]
    log(f"profiling `ncclparse parse {big.name}` with {profiler} ...")
    if profiler == "py-spy":
        raw = out / "parse.pyspy.txt"
        subprocess.run(
            [
                spy,
                "record",
                "-F",
                "-r",
                "200",
                "-f",
                "raw",
                "-o",
                raw,
                "--",
                python,
                *target,
            ],
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        print_collapsed(raw)
        return
    stats = out / "parse.prof"
    subprocess.run(
        [python, "-m", "cProfile", "-o", stats, *target],
        check=False,
        stdout=subprocess.DEVNULL,
    )
    code = (
        "import pstats, sys\n"
        "s = pstats.Stats(sys.argv[1])\n"
        "total = max(v[3] for v in s.stats.values())\n"
        "def name(k):\n"
        "    f, line, fn = k\n"
        "    f = f.split('site-packages/')[-1].split('/work/main/')[-1]\n"
        "    return f'{fn} ({f}:{line})'\n"
        "print(f'cProfile: {total:.1f} s in all (profiler overhead included)')\n"
        "print(' cum%  own%      calls  function')\n"
        "for k, (cc, nc, tt, ct, _) in sorted(s.stats.items(),\n"
        "        key=lambda kv: -kv[1][3])[:int(sys.argv[2])]:\n"
        "    print(f'{100*ct/total:5.1f} {100*tt/total:5.1f} {nc:>10}  {name(k)}')\n"
        "print('\\nby own time:')\n"
        "for k, (cc, nc, tt, ct, _) in sorted(s.stats.items(),\n"
        "        key=lambda kv: -kv[1][2])[:15]:\n"
        "    print(f'{100*tt/total:5.1f} {nc:>10}  {name(k)}')\n"
    )
    subprocess.run([python, "-c", code, stats, "35"], check=False)


def print_collapsed(raw: Path, top: int = 30) -> None:
    """Cumulative and own share of each function in py-spy's collapsed stacks."""
    cum: dict[str, int] = {}
    own: dict[str, int] = {}
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        total += n
        frames = [f.split("site-packages/")[-1] for f in stack.split(";")]
        for frame in set(frames):
            cum[frame] = cum.get(frame, 0) + n
        own[frames[-1]] = own.get(frames[-1], 0) + n
    if not total:
        print("py-spy recorded no samples")
        return
    print(f"py-spy: {total} samples")
    print(" cum%  own%  function")
    for frame, n in sorted(cum.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{100 * n / total:5.1f} {100 * own.get(frame, 0) / total:5.1f}  {frame}")
    print("\nby own time:")
    for frame, n in sorted(own.items(), key=lambda kv: -kv[1])[:15]:
        print(f"{100 * n / total:5.1f}  {frame}")


def efficiency_child(nrows: int, reps: int) -> int:
    """Time ``ncclparse.efficiency.analyze`` on ``nrows`` corpus-derived rows."""
    try:
        from ncclparse import efficiency
    except ImportError:
        print(json.dumps({"status": "not built yet"}))
        return 0
    analyze = getattr(efficiency, "analyze", None)
    if analyze is None:
        print(json.dumps({"status": "not built yet"}))
        return 0
    import pyarrow as pa

    import ncclparse

    tables = []
    for kind in ("nccl", "oneccl", "imb"):
        for path in corpus(kind):
            m = ncclparse.parse(path).measurements
            if m.num_rows:
                tables.append(m)
    base = pa.concat_tables(tables)
    copies = -(-nrows // base.num_rows)
    # Distinct sources per copy so series (and their fits) stay the size they are.
    parts = []
    for k in range(copies):
        idx = base.schema.get_field_index("source")
        src = pa.array(
            [f"{s}#{k}" for s in base.column("source").to_pylist()],
            type=base.schema.field("source").type,
        )
        parts.append(base.set_column(idx, base.schema.field("source"), src))
    table = pa.concat_tables(parts).slice(0, nrows).combine_chunks()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        analyze(table)
        times.append(time.perf_counter() - t0)
    print(
        json.dumps(
            {
                "status": "ok",
                "rows": table.num_rows,
                "seconds": statistics.median(times),
                "all": times,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
