"""What logs say of NCCL's algorithms and protocols: runs.nccl_algo, nccl_proto,
algo_source, nccl_env, tuner, enabled, tuned, nvls_channels (schema.md).

Real logs first (fixtures/nccl_info, nccl, nccl_unseen: see their SOURCES.md), then
made-up logs for the line formats no real log here shows (TUNING lines of NCCL 2.23
and 2.24+, NCCL_PROTO and NCCL_NVLS_ENABLE ENV lines, external tuner plugins), each
read with the native scanner, without it, and line by line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import ncclparse
from ncclparse import schema
from ncclparse._arrays import array
from ncclparse.parsers._nccl_topology import (
    ALGORITHMS,
    PROTOCOLS,
    matrix_row,
    normalise_list,
)
from tests.conftest import FIXTURES
from tests.test_scanner import NATIVE, reading
from tests.test_topology import FOOTER, HEADER, PARAMS, ROWS, _info, _ranks

COLUMNS = (
    "nccl_algo",
    "nccl_proto",
    "algo_source",
    "nccl_env",
    "tuner",
    "enabled",
    "tuned",
    "nvls_channels",
)


def _run(source: str | Path) -> dict[str, Any]:
    runs = ncclparse.parse(source).runs.to_pylist()
    assert len(runs) == 1
    return runs[0]


def _algo(source: str | Path) -> dict[str, Any]:
    run = _run(source)
    return {k: run[k] for k in COLUMNS}


def _tuned(
    collective: str | None,
    size: int,
    algorithm: str,
    protocol: str,
    channels: int | None = None,
) -> dict[str, Any]:
    return {
        "collective": collective,
        "nccl_bytes": size,
        "algorithm": algorithm,
        "protocol": protocol,
        "channels": channels,
    }


def _enabled(collective: str, protocols: list[str], algorithms: list[str]) -> Any:
    return {"collective": collective, "protocols": protocols, "algorithms": algorithms}


NOTHING: dict[str, Any] = {
    "nccl_algo": None,
    "nccl_proto": None,
    "algo_source": None,
    "nccl_env": [],
    "tuner": None,
    "enabled": [],
    "tuned": [],
    "nvls_channels": None,
}

# --- real logs ----------------------------------------------------------------------

H100 = FIXTURES / "nccl_info" / "ib-2node-16gpu-h100-sharp-plugin-nccl2.26.log"


def test_env_line_and_matrix_of_nccl_2_26() -> None:
    # `-x NCCL_ALGO=RING` (line 3, a continuation of the mpirun command), `NCCL_ALGO
    # set by environment to RING` on every rank, rank 0's matrix (lines 567-573),
    # `TUNER/Plugin: ... Using internal tuner plugin.`, `16 nvls channels`.
    ring = ["Ring"]
    every = ["LL", "LL128", "Simple"]
    assert _algo(H100) == {
        "nccl_algo": "Ring",
        "nccl_proto": None,
        "algo_source": "env",
        "nccl_env": [
            ("NCCL_SOCKET_IFNAME", "bond0"),
            ("NCCL_ALGO", "RING"),
            ("NCCL_IB_QPS_PER_CONNECTION", "64"),
        ],
        "tuner": "internal",
        "enabled": [
            _enabled("broadcast", every, ring),
            _enabled("reduce", every, ring),
            _enabled("all_gather", every, ring),
            _enabled("reduce_scatter", every, ring),
            _enabled("all_reduce", every, ring),
        ],
        "tuned": [],
        "nvls_channels": 16,
    }


def test_matrix_lines_are_read_not_warned() -> None:
    result = ncclparse.parse(H100)
    assert result.runs.column("warnings").to_pylist() == [
        [
            "lines 2-12: 11 lines not recognised as benchmark output (kept out of "
            "the tables)"
        ]
    ]


def test_integer_tuning_lines_of_nccl_2_20_to_2_22() -> None:
    # `[0] host:pid:tid [0] NCCL INFO 1073741824 Bytes -> Algo 1 proto 2 time ...`,
    # repeated for every call, once glued to a row (NVIDIA/nccl#1453).
    path = (
        FIXTURES
        / "nccl_unseen"
        / "nccl-1453b_allreduce_h100_prepend_rank_ncclinfo_inside_row_fragment.log"
    )
    assert _algo(path) == {
        **NOTHING,
        "tuned": [
            _tuned(None, 536870912, "Ring", "Simple"),
            _tuned(None, 1073741824, "Ring", "Simple"),
        ],
    }


@pytest.mark.parametrize(
    "name",
    [
        "nccl-2169_alltoall_v2.17.8_h100_4rank_R1_truncated.log",
        "nccltests-82_broadcast_2node_c0_NA_ncclwarn_interleaved_truncated.log",
    ],
)
def test_settings_on_the_echoed_command_line(name: str) -> None:
    # `mpirun ... -x NCCL_ALGO=Ring ... -x NCCL_PROTO=Simple ... ./build/..._perf`
    assert _algo(FIXTURES / "nccl" / name) == {
        **NOTHING,
        "nccl_algo": "Ring",
        "nccl_proto": "Simple",
        "algo_source": "command",
    }


def test_internal_tuner_and_no_nvls_channel() -> None:
    path = FIXTURES / "nccl_info" / "single-node-2gpu-rtx5090-fail-nccl2.25.log"
    assert _algo(path) == {**NOTHING, "tuner": "internal", "nvls_channels": 0}


def test_env_lines_of_an_ofi_job() -> None:
    # `TUNER/Plugin: Failed to find ncclTunerPlugin_v2, using internal tuner instead.`
    path = (
        FIXTURES
        / "nccl_unseen"
        / "repo-sparticlesteve-perlmutter_allreduce_8rank_2node_a100_libfabric_debug"
        "_complete.log"
    )
    assert _algo(path) == {
        **NOTHING,
        "nccl_env": [
            ("NCCL_SOCKET_IFNAME", "hsn"),
            ("NCCL_CROSS_NIC", "1"),
            ("NCCL_NET_GDR_LEVEL", "PHB"),
        ],
        "tuner": "internal",
        "nvls_channels": 0,
    }


# --- made-up logs -------------------------------------------------------------------


def _log(init: list[str], calls: list[str], command: str = "") -> str:
    """A 2-rank all_reduce run: ``command``, NCCL init lines of both ranks, the table
    with rank 0's per-call lines between its rows."""
    return (
        command
        + PARAMS
        + _ranks(["nodeA", "nodeB"], "NVIDIA H100 80GB HBM3")
        + "".join(_info(h, d, m) for m in init for h, d in (("nodeA", 0), ("nodeB", 1)))
        + HEADER
        + "".join(_info("nodeA", 0, m) for m in calls)
        + ROWS
        + "".join(_info("nodeA", 0, m) for m in calls)
        + FOOTER
    )


MATRIX = (
    "     Function |       LL     LL128    Simple   |          Tree           Ring  "
    "CollNetDirect   CollNetChain           NVLS       NVLSTree            PAT  \n"
    "    Broadcast |        0         0         1   |             0              1"
    "              0              0              0              0              0  \n"
    "    AllReduce |        0         0         1   |             1              1"
    "              0              0              0              0              0  \n"
    "\n"
)
NEW = _log(
    [
        "NCCL_NVLS_ENABLE set by environment to 0.",
        "NCCL_PROTO set by environment to simple",
        "NCCL_ALGO set by environment to allreduce:tree,ring;broadcast:ring",
        "TUNER/Plugin: Using nccl_ofi_tuner (v3)",
        "16 coll channels, 16 collnet channels, 0 nvls channels, 16 p2p channels, "
        "2 p2p channels per peer",
    ],
    [
        "AllReduce: opCount 0 sendbuff 0x7f0 recvbuff 0x7f0 count 2 datatype 7 op 0 "
        "root 0 comm 0x55 [nranks=2] stream 0x56",
        "AllReduce: 8 Bytes -> Algo TREE proto SIMPLE channel{Lo..Hi}={0..0}",
        "AllReduce: 16 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..1}",
        # The same size chosen otherwise (another call): both choices are kept.
        "AllReduce: 16 Bytes -> Algo TREE proto SIMPLE channel{Lo..Hi}={0..0}",
    ],
)
# Rank 0 prints the matrix after its NCCL_ALGO line.
NEW = NEW.replace(
    "[0] NCCL INFO NCCL_ALGO set by environment to allreduce:tree,ring;broadcast:ring\n",
    "[0] NCCL INFO NCCL_ALGO set by environment to allreduce:tree,ring;broadcast:ring\n"
    "nodeA:1000:2000 [0] NCCL INFO Enabled NCCL Func/Proto/Algo Matrix:\n" + MATRIX,
    1,
)
NEW_READ = {
    "nccl_algo": "AllReduce:Tree,Ring;Broadcast:Ring",
    "nccl_proto": "Simple",
    "algo_source": "env",
    "nccl_env": [
        ("NCCL_NVLS_ENABLE", "0"),
        ("NCCL_PROTO", "simple"),
        ("NCCL_ALGO", "allreduce:tree,ring;broadcast:ring"),
    ],
    "tuner": "nccl_ofi_tuner (v3)",
    "enabled": [
        _enabled("broadcast", ["Simple"], ["Ring"]),
        _enabled("all_reduce", ["Simple"], ["Tree", "Ring"]),
    ],
    "tuned": [
        _tuned("all_reduce", 8, "Tree", "Simple", 1),
        _tuned("all_reduce", 16, "Ring", "Simple", 2),
        _tuned("all_reduce", 16, "Tree", "Simple", 1),
    ],
    "nvls_channels": 0,
}


def test_the_made_up_log_is_as_meant() -> None:
    assert NEW.count("Enabled NCCL Func/Proto/Algo Matrix") == 1
    assert NEW.count("NCCL_ALGO set by environment") == 2


@pytest.mark.parametrize("path", ["native", "python", "per_line"])
def test_nccl_2_24_lines_whichever_reader(path: str) -> None:
    scan = NATIVE if path == "native" else None
    if path == "native" and scan is None:
        pytest.skip("no native scanner")
    with reading(scan, per_line=path == "per_line"):
        result = ncclparse.parse(NEW)
    run = result.runs.to_pylist()[0]
    assert {k: run[k] for k in COLUMNS} == NEW_READ
    assert run["warnings"] == [
        "line 1: collective not stated; inferred all_reduce from size/count ratio 1 "
        "and checked in-place results"
    ]
    assert result.measurements.num_rows == 4


def test_nccl_2_23_lines_and_tuner_of_nccl_2_21() -> None:
    text = _log(
        ["TUNER/Plugin: Using tuner plugin A3xTunerPlugin_v2"],
        [
            "AllReduce: 8 Bytes -> Algo 0 proto 0 time 25.200924",
            "AllReduce: 16 Bytes -> Algo 6 proto 2 time 30.1",
            "AllReduce: 16 Bytes -> Algo 9 proto 2 time 30.1",  # an index NCCL lacks
        ],
    )
    assert _algo(text) == {
        **NOTHING,
        "tuner": "A3xTunerPlugin_v2",
        "tuned": [
            _tuned("all_reduce", 8, "Tree", "LL"),
            _tuned("all_reduce", 16, "9", "Simple"),
            _tuned("all_reduce", 16, "PAT", "Simple"),
        ],
    }


def test_tuner_of_nccl_2_19_and_external_over_internal() -> None:
    text = _log(
        [
            "TUNER/Plugin: Using internal tuner plugin.",
            "Using tuner plugin: 'example'",
        ],
        [],
    )
    assert _algo(text)["tuner"] == "example"


@pytest.mark.parametrize(
    ("prefix", "other"), [("[1,0]<stdout>:", "[1,1]<stdout>:"), ("0: ", "1: ")]
)
def test_launcher_prefixes(prefix: str, other: str) -> None:
    lines = NEW.splitlines(keepends=True)
    text = "".join(
        (other if line.startswith("nodeB") else prefix) + line for line in lines
    )
    assert _algo(text) == NEW_READ


def test_command_settings() -> None:
    # `VAR=value ./binary`, then an echoed `export` (after it: the command's wins).
    text = _log([], [], "+ export NCCL_PROTO='LL128'\n")
    text = "NCCL_ALGO=^tree,nvls NCCL_PROTO=ll ./build/all_reduce_perf -b 8\n" + text
    assert _algo(text) == {
        **NOTHING,
        "nccl_algo": "^Tree,NVLS",
        "nccl_proto": "LL",
        "algo_source": "command",
    }
    # NCCL's ENV line wins over the command; each column says where it was read.
    env = _log(["NCCL_ALGO set by environment to Ring"], [])
    mixed = _algo("NCCL_PROTO=Simple ./build/all_reduce_perf -b 8\n" + env)
    assert (mixed["nccl_algo"], mixed["nccl_proto"], mixed["algo_source"]) == (
        "Ring",
        "Simple",
        "env,command",
    )


def test_prose_naming_a_setting_sets_nothing() -> None:
    text = _log([], []) + "Try NCCL_ALGO=Ring next time.\n"
    assert _algo(text) == NOTHING


def test_a_cut_tuning_line_gives_nothing() -> None:
    text = _log([], [])
    cut = _info("nodeA", 0, "AllReduce: 16777216 Bytes -> Algo RING proto SIMPLE")
    assert _algo(text + cut[:-30])["tuned"] == []


def test_collnet_enable_from_the_env_line() -> None:
    run = _run(_log(["NCCL_COLLNET_ENABLE set by environment to 1."], []))
    assert (run["collnet"], run["nccl_env"]) == (True, [("NCCL_COLLNET_ENABLE", "1")])


@pytest.mark.parametrize(
    ("value", "names", "normalised"),
    [
        ("RING", ALGORITHMS, "Ring"),
        ("ring, tree", ALGORITHMS, "Ring,Tree"),
        ("^nvls,collnetdirect", ALGORITHMS, "^NVLS,CollNetDirect"),
        (
            "allreduce:nvlstree;allgather:pat",
            ALGORITHMS,
            "AllReduce:NVLSTree;AllGather:PAT",
        ),
        ("simple", PROTOCOLS, "Simple"),
        ("^LL128", PROTOCOLS, "^LL128"),
        ("Magic", ALGORITHMS, "Magic"),
    ],
)
def test_normalise_list(value: str, names: tuple[str, ...], normalised: str) -> None:
    assert normalise_list(value, names) == normalised


def test_matrix_row_needs_its_columns() -> None:
    row = "AllReduce |  1  2  1 |  1  1  0  0  0  0  0"
    assert matrix_row(row, None) == (
        "AllReduce",
        ["LL", "LL128", "Simple"],
        ["Tree", "Ring"],
    )
    assert matrix_row("AllReduce |  1  2 |  1  1", None) is None
    assert matrix_row("| a | b |", None) is None


@pytest.mark.parametrize("column", ["enabled", "tuned"])
def test_lists_of_structs_are_built_as_arrow_builds_them(column: str) -> None:
    run = _run(NEW)
    kind = schema.RUNS_SCHEMA.field(column).type
    values = [run[column], [], None, run[column][:1]]
    built = array(values, kind)
    built.validate(full=True)
    assert built.equals(pa.array(values, type=kind))
