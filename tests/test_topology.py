"""The topology NCCL_DEBUG=INFO lines state: runs.net, nics, gdr, nvls, collnet, local_ranks.

The real logs in fixtures/nccl_info come with expected.json, a reading of each log written
by hand independently of the parser (see SOURCES.md there). Where the parser deliberately
differs from that reading, the difference and its reason are in DEVIATIONS. The made-up
logs below cover what the real ones do not: several runs in one file, launcher prefixes,
NVLS not available, facts read in bulk from skipped NCCL debug lines.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import ncclparse
from ncclparse import parsers
from ncclparse.errors import SchemaError
from ncclparse.parsers import _lines
from ncclparse.parsers._nccl_topology import Topology, read_topology, scan
from ncclparse.schema import RUNS_SCHEMA, conform
from ncclparse.store.tables import read_table
from tests.conftest import FIXTURES

INFO = FIXTURES / "nccl_info"
EXPECTED: dict[str, dict[str, Any]] = json.loads((INFO / "expected.json").read_text())
TOPOLOGY = ("net", "nics", "gdr", "nvls", "collnet", "local_ranks")
KEYS = ("nranks", "nnodes", *TOPOLOGY)
NOT_A_BENCHMARK = "rccl-2node-8gcd-mi250x-socket-init-fail.log"
_NO_LOCAL_RANKS = (
    None,
    "NCCL prints no `comm ... nNodes Q localRanks P` line in this version; the reading "
    "counts ranks per host from the Rank lines, which `hosts` already holds",
)
# (file, column) -> (what the parser gives, why it differs from the reading)
DEVIATIONS: dict[tuple[str, str], tuple[Any, str]] = {
    ("efa-2node-16gpu-a100-p4d-eks.log", "local_ranks"): _NO_LOCAL_RANKS,
    ("ib-2node-1gpu-a100-gather-nccl2.16.log", "local_ranks"): _NO_LOCAL_RANKS,
    ("socket-2node-1gpu-a10g-aws-batch.log", "local_ranks"): _NO_LOCAL_RANKS,
    (NOT_A_BENCHMARK, "local_ranks"): _NO_LOCAL_RANKS,
    ("ib-2node-16gpu-h100-sharp-plugin-nccl2.26.log", "collnet"): (
        None,
        "the reading records the SHARP CollNet plugin as loaded; the column says whether "
        "CollNet was enabled, and nothing says so: NCCL_COLLNET_ENABLE is not set (default "
        "0), no `Collnet Chains` / `Connected CollNet` line, NCCL_ALGO=RING",
    ),
}


def _want(name: str, key: str) -> Any:
    return DEVIATIONS.get((name, key), (EXPECTED[name][key],))[0]


def _run(text_or_path: str | Path) -> dict[str, Any]:
    runs = ncclparse.parse(text_or_path).runs.to_pylist()
    assert len(runs) == 1
    return runs[0]


def test_every_log_has_a_reading() -> None:
    assert sorted(EXPECTED) == sorted(p.name for p in INFO.glob("*.log"))


def test_deviations_name_real_differences() -> None:
    for (name, key), (value, why) in DEVIATIONS.items():
        assert EXPECTED[name][key] != value
        assert why


BENCHMARK_LOGS = sorted(n for n in EXPECTED if n != NOT_A_BENCHMARK)


@pytest.mark.parametrize("name", BENCHMARK_LOGS)
def test_runs_table_matches_the_reading(name: str) -> None:
    run = _run(INFO / name)
    assert {k: run[k] for k in KEYS} == {k: _want(name, k) for k in KEYS}
    assert list(dict.fromkeys(h for h in run["hosts"] if h)) == EXPECTED[name]["hosts"]


def test_rccl_application_log_is_not_a_benchmark_but_its_facts_read() -> None:
    # No nccl-tests/rccl-tests output at all: no run, hence no runs-table row. The
    # same reader the parser uses still reads what RCCL states.
    path = INFO / NOT_A_BENCHMARK
    with pytest.raises(ncclparse.UnknownLogFormatError):
        ncclparse.parse(path)
    facts = read_topology(path.read_text())
    assert {k: facts[k] for k in TOPOLOGY} == {
        k: _want(NOT_A_BENCHMARK, k) for k in TOPOLOGY
    }


@pytest.fixture
def bulk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Read nearly everything through the bulk reader, in small blocks.

    Format detection sees only the first 40 lines; the rest comes from
    without_nccl_debug, whose blocks (512 characters) split logs into many runs of
    skipped lines, some of them cut across blocks.
    """
    monkeypatch.setattr(parsers, "SNIFF_LINES", 40)
    monkeypatch.setattr(_lines, "_CHUNK", 512)


BULK_READABLE = [
    *(INFO / n for n in BENCHMARK_LOGS),
    *sorted((FIXTURES / "nccl").glob("*.log")),
    *sorted((FIXTURES / "nccl_unseen").glob("*.log")),
]


@pytest.mark.parametrize("path", BULK_READABLE, ids=lambda p: p.name)
def test_bulk_reading_gives_the_same_tables(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    try:
        whole = ncclparse.parse(path)
    except ncclparse.UnknownLogFormatError:
        return  # a look-alike: rejected either way
    monkeypatch.setattr(parsers, "SNIFF_LINES", 40)
    monkeypatch.setattr(_lines, "_CHUNK", 512)
    try:
        blocks = ncclparse.parse(path)
    except ncclparse.UnknownLogFormatError:
        # Its structure starts after line 40: not comparable.
        assert len(path.read_text(errors="replace").splitlines()) > 40
        return
    assert blocks.runs.equals(whole.runs)
    assert blocks.measurements.equals(whole.measurements)
    assert blocks.accounting == whole.accounting


def test_the_real_logs_do_go_through_the_bulk_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[object] = []
    read = _lines.without_nccl_debug

    def spy(handle: Any, first: int, source: str, before: str = "") -> Any:
        for item in read(handle, first, source, before):
            if isinstance(item, _lines.Skipped) and item.topology is not None:
                seen.append(item.topology)
            elif isinstance(item, _lines.Rows):
                seen.extend(item.facts.values())
            yield item

    monkeypatch.setattr(parsers, "SNIFF_LINES", 40)
    monkeypatch.setattr(_lines, "_CHUNK", 512)
    monkeypatch.setattr(parsers, "without_nccl_debug", spy)
    run = _run(INFO / "ib-2node-16gpu-h100-sharp-plugin-nccl2.26.log")
    assert seen
    assert (run["net"], run["local_ranks"]) == ("IB", 8)


# --- made-up logs -------------------------------------------------------------------

PARAMS = (
    "# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 "
    "iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n"
)
RANK = "#  Rank {r:2d} Group  0 Pid {pid:6d} on {host:>10} device {d:2d} [0000:18:00] {gpu}\n"
HEADER = (
    "#\n#                                                              out-of-place"
    "                       in-place          \n"
    "#       size         count      type   redop    root     time   algbw   busbw "
    "#wrong     time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
    "            (us)  (GB/s)  (GB/s)       \n"
)
ROWS = (
    "           8             2     float     sum      -1    10.00    0.00    0.00"
    "      0    10.00    0.00    0.00      0\n"
    "          16             4     float     sum      -1    10.00    0.00    0.00"
    "      0    10.00    0.00    0.00      0\n"
)
FOOTER = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.00 \n#\n"


def _info(host: str, dev: int, message: str) -> str:
    return f"{host}:{1000 + dev}:{2000 + dev} [{dev}] NCCL INFO {message}\n"


def _ranks(hosts: list[str], gpu: str) -> str:
    return "".join(
        RANK.format(r=r, pid=100 + r, host=h, d=r % 2, gpu=gpu)
        for r, h in enumerate(hosts)
    )


def _ib_init() -> tuple[str, str]:
    """IB job, 2 nodes x 2 GPUs: lines printed before the header, and after the Rank
    lines (NCCL lines of other ranks can come before rank 0's header)."""
    early = _info(
        "nodeB",
        1,
        "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/IB [RO]; OOB ib0:10.0.0.2<0>",
    )
    late = "".join(
        _info(h, d, m)
        for h in ("nodeA", "nodeB")
        for d in (0, 1)
        for m in (
            "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ib0:10.0.0.1<0>"
            if h == "nodeA"
            else "Bootstrap : Using ib0:10.0.0.2<0>",
            "Using network IB",
            "NVLS multicast support is available on dev 0",
            f"comm 0x55{d} rank {d} nRanks 4 nNodes 2 localRanks 2 localRank {d} MNNVL 0",
            f"Channel 00/0 : {d}[{d}] -> 2[0] [send] via NET/IB/{d}/GDRDMA",
            "Connected all rings",
        )
    )
    return early, late


def _socket_init() -> str:
    return "".join(
        _info("nodeC", 0, m)
        for m in (
            "NET/IB : No device found.",
            "NET/Socket : Using [0]eth0:10.1.0.3<0> [1]eth1:10.2.0.3<0>",
            "Using network Socket",
            "NVLS multicast support is not available on dev 0",
            "comm 0x77 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0",
            "Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0",
        )
    )


def _two_runs() -> str:
    early, late = _ib_init()
    return (
        "$ mpirun -np 4 ./all_reduce_perf -b 8 -e 16\n"
        + early
        + PARAMS
        + _ranks(["nodeA", "nodeA", "nodeB", "nodeB"], "NVIDIA H100 80GB HBM3")
        + late
        + HEADER
        + ROWS
        + FOOTER
        + _info(
            "nodeA",
            0,
            "comm 0x550 rank 0 nranks 4 cudaDev 0 busId 18000 - Destroy COMPLETE",
        )
        # The second job's NCCL starts before its header: these are its facts.
        + _socket_init()
        + "$ mpirun -np 2 ./all_gather_perf -b 8 -e 16\n"
        + PARAMS
        + _ranks(["nodeC", "nodeD"], "NVIDIA A10G")
        + HEADER
        + ROWS
        + FOOTER
    )


FIRST = {
    "net": "IB",
    "nics": ["mlx5_0", "mlx5_3"],  # nodeB printed its NIC line first
    "gdr": True,
    "nvls": True,
    "collnet": None,
    "local_ranks": 2,
    "nnodes": 2,
}
SECOND = {
    "net": "Socket",
    "nics": ["eth0", "eth1"],
    "gdr": False,
    "nvls": False,
    "collnet": None,
    "local_ranks": 1,
    "nnodes": 2,
}


def _topology(result: ncclparse.ParseResult) -> list[dict[str, Any]]:
    return [{k: r[k] for k in FIRST} for r in result.runs.to_pylist()]


def test_two_runs_keep_their_own_network() -> None:
    assert _topology(ncclparse.parse(_two_runs())) == [FIRST, SECOND]


@pytest.mark.usefixtures("bulk")
def test_two_runs_keep_their_own_network_when_read_in_bulk() -> None:
    assert _topology(ncclparse.parse(_two_runs())) == [FIRST, SECOND]


def test_a_run_without_nccl_lines_inherits_nothing() -> None:
    early, late = _ib_init()
    first = PARAMS + _ranks(["nodeA", "nodeB"], "GPU") + early + late + HEADER + ROWS
    text = first + FOOTER + PARAMS + _ranks(["nodeE"], "GPU") + HEADER + ROWS + FOOTER
    runs = ncclparse.parse(text).runs.to_pylist()
    assert runs[0]["net"] == "IB"
    assert [runs[1][k] for k in TOPOLOGY] == [None, [], None, None, None, None]


def test_facts_after_the_last_run_stay_with_it() -> None:
    text = PARAMS + _ranks(["nodeC", "nodeD"], "GPU") + HEADER + ROWS + FOOTER
    run = _run(text + _socket_init())
    assert {k: run[k] for k in SECOND} == SECOND


@pytest.mark.parametrize(
    ("rank0", "other"),
    [("[1,0]<stdout>:", "[1,{r}]<stdout>:"), (" 0: ", " {r}: "), ("0: ", "{r}: ")],
)
def test_launcher_prefixes(rank0: str, other: str) -> None:
    # Open MPI --tag-output and srun --label: rank 0's lines and the others' NCCL lines.
    early, late = _ib_init()
    body = PARAMS + _ranks(["nodeA", "nodeA", "nodeB", "nodeB"], "GPU") + HEADER + ROWS
    lines = [rank0 + line for line in (body + FOOTER).splitlines(keepends=True)]
    nccl = [
        other.format(r=3 - i % 3) + line
        for i, line in enumerate((early + late).splitlines(keepends=True))
    ]
    text = "".join(lines[:7] + nccl + lines[7:])  # after the Rank lines
    run = _run(text)
    assert {k: run[k] for k in FIRST} == FIRST


def test_nvls_not_available_and_no_network_channel() -> None:
    text = (
        PARAMS
        + _ranks(["solo", "solo"], "NVIDIA GeForce RTX 4090")
        + "".join(
            _info("solo", d, m)
            for d in (0, 1)
            for m in (
                "NET/Socket : Using [0]enp1s0:192.168.1.2<0>",
                "Using network Socket",
                f"NVLS multicast support is not available on dev {d}",
                f"Channel 00/0 : {d}[{d}] -> {1 - d}[{1 - d}] via P2P/IPC",
            )
        )
        + HEADER
        + ROWS
        + FOOTER
    )
    run = _run(text)
    assert [run[k] for k in TOPOLOGY] == ["Socket", ["enp1s0"], None, False, None, None]


def test_nnodes_from_nccl_when_no_rank_line_tells() -> None:
    # A paste without the Rank lines: nnodes comes from NCCL's own `nNodes`.
    _, late = _ib_init()
    run = _run("# Collective test starting: all_reduce_perf\n" + late + HEADER + ROWS)
    assert (run["nnodes"], run["local_ranks"], run["hosts"]) == (2, 2, [])
    assert (
        ncclparse.parse(late + HEADER + ROWS).measurements.column("nnodes").to_pylist()
        == [2] * 4
    )


def test_a_line_cut_by_the_end_of_input_gives_nothing() -> None:
    text = PARAMS + _ranks(["nodeC"], "GPU") + HEADER + ROWS
    run = _run(text + _info("nodeC", 0, "NET/Socket : Using [0]eth0:10.1.0.3<0>")[:-20])
    assert (run["net"], run["nics"]) == (None, [])


@pytest.mark.parametrize(
    ("lines", "net"),
    [
        (["Using network IBext_v8"], "IB"),
        (["Using network IBext"], "IB"),
        (["Using network AWS Libfabric"], "OFI"),
        (["NET/OFI Selected Provider is efa"], "OFI"),
        (
            ["NET/OFI Selected provider is efa, fabric is efa-direct (found 4 nics)"],
            "OFI",
        ),
        (["Using network GPUDirectTCPX"], "GPUDirectTCPX"),
        (["P2P plugin v8 IBext_v8", "Using network NCCL RDMA Plugin v8"], "IB"),
        (["P2P plugin UCX", "Using network NCCL RDMA Plugin v8"], "UCX"),
        # `Using network` decides over the NIC lists.
        (["NET/IB : Using [0]mlx5_0:1/IB", "Using network Socket"], "Socket"),
        (["NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_2:1/IB [RO]; OOB e:1<0>"], "IB"),
        (["Channel 02/1 : 0[0] -> 1[0] [send] via NET/IB/0(1)/GDRDMA/Shared"], "IB"),
        (["Ring 00 : 7 -> 8 [send] via NET/IB/0/GDRDMA"], "IB"),
        (["Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read"], None),
    ],
)
def test_network_names(lines: list[str], net: str | None) -> None:
    text = "".join(_info("h", 0, line) for line in lines)
    assert read_topology(text)["net"] == net


@pytest.mark.parametrize(
    ("lines", "collnet"),
    [
        (["NET/Plugin: Failed to find ncclCollNetPlugin_v4 symbol."], False),
        (
            [
                "NET/Plugin: Failed to find ncclCollNetPlugin_v9 symbol.",
                "NET/Plugin: Loaded collnet plugin SHARP (v8)",
            ],
            None,
        ),
        (["NCCL_COLLNET_ENABLE set by environment to 1."], True),
        (["NCCL_COLLNET_ENABLE set by environment to 0."], False),
        (["Collnet Chains  [0] 8->0->-1"], True),
        (["rank 0 Connected CollNet"], True),
        (["Connected collnet + chain"], True),
        (["collNetSupport 1"], True),
        (
            ["16 coll channels, 16 collnet channels, 0 nvls channels, 16 p2p channels"],
            None,
        ),
    ],
)
def test_collnet(lines: list[str], collnet: bool | None) -> None:
    text = "".join(_info("h", 0, line) for line in lines)
    assert read_topology(text)["collnet"] is collnet


@pytest.mark.parametrize(
    ("lines", "nvls"),
    [
        (["NVLS multicast support is available on dev 0 (NVLS_NCHANNELS 24)"], True),
        (["NVLS multicast support is not available on dev 1"], False),
        (["NVLS comm 0x55 headRank 0 nHeads 8 buffSize 1048576"], True),
        (["Connected NVLS tree"], True),
        (
            [
                "24 coll channels, 24 collnet channels, 16 nvls channels, 32 p2p channels"
            ],
            True,
        ),
        (
            ["2 coll channels, 2 collnet channels, 0 nvls channels, 2 p2p channels"],
            False,
        ),
        (["nvlsSupport 0"], False),
        (["NVLS Head  0:  0  8"], None),
    ],
)
def test_nvls(lines: list[str], nvls: bool | None) -> None:
    text = "".join(_info("h", 0, line) for line in lines)
    assert read_topology(text)["nvls"] is nvls


@pytest.mark.parametrize(
    ("lines", "gdr"),
    [
        (["NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'"], True),
        (
            [
                "NET/IB : GPU Direct RDMA Enabled for GPU 81000 / HCA 1 (distance 4 <= 6)"
            ],
            True,
        ),
        (["Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/1"], False),
        (
            [
                "Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/1",
                "Channel 01/0 : 1[0] -> 0[0] [receive] via NET/IB/1/GDRDMA",
            ],
            True,
        ),
        (["Connected all rings, use ring PXN 0 GDR 1"], None),
        (["Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct"], None),
    ],
)
def test_gdr(lines: list[str], gdr: bool | None) -> None:
    text = "".join(_info("h", 0, line) for line in lines)
    assert read_topology(text)["gdr"] is gdr


def test_nics_are_the_first_host_line_of_the_network_in_use() -> None:
    text = "".join(
        _info(host, 0, line)
        for host, line in (
            ("a", "NET/Socket : Using [0]eth0:10.0.0.1<0>"),
            (
                "a",
                "NET/IB : Using [0]mlx5_4:1/IB/SHARP [1]mlx5_11:1/IB/SHARP [RO]; OOB bond0:1<0>",
            ),
            ("b", "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB"),
            ("a", "Using network IB"),
        )
    )
    assert read_topology(text)["nics"] == ["mlx5_4", "mlx5_11"]


def test_local_ranks_is_the_largest_stated() -> None:
    text = "".join(
        _info(
            "h", r, f"comm 0x{r} rank {r} nRanks 4 nNodes 2 localRanks {p} localRank 0"
        )
        for r, p in ((0, 3), (3, 1))
    )
    assert (read_topology(text)["local_ranks"], read_topology(text)["nnodes"]) == (3, 2)


def test_many_ranks_repeating_lines_keep_memory_bounded() -> None:
    # Facts, not lines: 100,000 copies of the same lines leave one fact text each, and
    # NIC lists of at most 8 transport names are kept.
    lines = [
        "Using network IB",
        "NVLS multicast support is available on dev 0",
        "Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA",
    ]
    text = "".join(_info("h", 0, line) for line in lines) * 100_000
    facts = scan(text)
    assert facts is not None
    assert len(facts[0]) == 2
    many = "".join(_info("h", 0, f"NET/X{i} : Using [0]nic{i}:1") for i in range(100))
    topology = Topology()
    found = scan(many)
    assert found is not None
    topology.add(found)
    assert len(topology.devices) == 8
    nics = " ".join(f"[{i}]mlx5_{i}:1/IB" for i in range(1000))
    assert len(read_topology(_info("h", 0, f"NET/IB : Using {nics}"))["nics"]) == 64


def test_a_runs_table_written_before_these_columns_still_reads(tmp_path: Path) -> None:
    runs = ncclparse.parse(INFO / "socket-2node-1gpu-a10g-aws-batch.log").runs
    old = runs.drop_columns(list(TOPOLOGY))
    path = tmp_path / "runs.parquet"
    pq.write_table(old, path)
    back = read_table(path)
    assert back.schema.names == runs.schema.names
    assert [back.column(k).to_pylist() for k in TOPOLOGY] == [
        [None],
        [[]],
        [None],
        [None],
        [None],
        [None],
    ]
    with pytest.raises(SchemaError, match="'status' is missing"):
        conform(runs.drop_columns(["status"]), RUNS_SCHEMA)
