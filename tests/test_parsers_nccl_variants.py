"""nccl-tests variants the corpus does not cover, built from the format reference.

Each input follows the printing code described in docs/nccl-tests-format.md (section
named in each test); the real-log tests are in test_parsers_nccl_tests.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import ncclparse

EXAMPLE = Path(__file__).parent.parent / "examples" / "all_reduce_16rank_2node_h100.log"
FIXTURES = Path(__file__).parent / "fixtures"

HEADER = """\
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
"""  # noqa: W291 - nccl-tests prints the trailing spaces
PREAMBLE = """\
# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  {pid} on node1 device  0 [0x01] NVIDIA A100-SXM4-80GB
#
"""
ROW8 = "           8             2     float     sum      -1    {t}    0.00    0.00      0    10.00    0.00    0.00      0\n"
FOOTER = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0 \n"


def _rows(result: ncclparse.ParseResult, *keys: str) -> list[tuple[object, ...]]:
    return [tuple(r[k] for k in keys) for r in result.measurements.to_pylist()]


def test_per_iteration_timestamp_exponent_and_min_bw_footer() -> None:
    # Sections 5.1 (-I, -S), 6.1 (E7 width-fitting exponents, %g #wrong), 8 (OK/FAILED).
    text = (
        "# nccl-tests version 2.19.6 nccl-headers=22905 nccl-library=22905\n"
        "# Collective test starting: all_reduce_perf\n"
        + PREAMBLE.format(pid=1)
        + "#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%            timestamp \n"
        " 17179869184    4294967296     float     sum      -1  1.2e+07    1.39    2.61       0   123457  1.2e+07  1.2e+07     0.10   123457  139.20  261.00  1.67772e+07   123457   123457   123457     0.00  2025-10-28 12:00:01\n"
        "# Out of bounds values : 1 FAILED\n# Avg bus bandwidth    : 65.9025 FAILED\n"
    )
    result = ncclparse.parse(text)
    assert _rows(
        result,
        "placement",
        "time_us",
        "time_min_us",
        "time_max_us",
        "time_p99_us",
        "stddev_pct",
        "busbw_gbps",
        "wrong",
        "timestamp",
    ) == [
        (
            "out-of-place",
            1.2e7,
            123457.0,
            1.2e7,
            1.2e7,
            0.1,
            2.61,
            0.0,
            "2025-10-28 12:00:01",
        ),
        (
            "in-place",
            123457.0,
            123457.0,
            123457.0,
            123457.0,
            0.0,
            261.0,
            16777200.0,
            "2025-10-28 12:00:01",
        ),
    ]
    (run,) = result.runs.to_pylist()
    assert (run["tool_version"], run["library_version"]) == ("2.19.6", "2.29.5")
    assert (run["status"], run["oob_values"], run["oob_ok"]) == ("complete", 1, False)
    assert (run["avg_busbw_gbps"], run["avg_busbw_ok"]) == (65.9025, False)
    assert run["collectives"] == ["all_reduce"]
    assert run["warnings"] == []


def test_cputime_and_empty_redop_of_e3_broadcast() -> None:
    # Section 5.1 (-C 1 renames time) and gotcha 1 (E3 prints an empty redop).
    text = (
        PREAMBLE.format(pid=1)
        + HEADER.replace("  time", "cputime")
        + "     1048576        262144     float               3    20.10   52.17   52.17       0    20.00   52.40   52.40       0\n"
    )
    result = ncclparse.parse(text)
    assert _rows(result, "cputime", "redop", "root", "time_us", "collective") == [
        (True, None, 3, 20.1, "broadcast"),
        (True, None, 3, 20.0, "broadcast"),
    ]


def test_row_cut_by_nccl_info_is_rejoined_and_said() -> None:
    # Section 9: NCCL lines from rank 0 land inside a row (real: nccl-1453).
    text = HEADER + (
        "[0]   1073741824     268435456     float     sum      -1[0] h100clust-worker-1:1234:1240 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
        "[0] h100clust-worker-1:1234:1240 [0] NCCL INFO Connected all rings\n"
        "[0]     5190.8  206.85  387.85      0   5186.6  207.02  388.17      0\n"
    )
    result = ncclparse.parse(text)
    assert _rows(
        result, "line", "placement", "size_bytes", "time_us", "busbw_gbps"
    ) == [
        (4, "out-of-place", 1073741824, 5190.8, 387.85),
        (4, "in-place", 1073741824, 5186.6, 388.17),
    ]
    (run,) = result.runs.to_pylist()
    assert (
        "line 4: data row cut by other output; rejoined with line 6" in run["warnings"]
    )


def test_interleaved_copies_of_a_non_mpi_build_become_separate_runs() -> None:
    one = (PREAMBLE + HEADER + ROW8 + FOOTER).splitlines()
    a = "\n".join(one).format(pid=100, t="11.00").splitlines()
    b = "\n".join(one).format(pid=200, t="22.00").splitlines()
    mixed = "\n".join(x for pair in zip(a, b, strict=True) for x in pair) + "\n"
    result = ncclparse.parse(mixed)
    runs = result.runs.to_pylist()
    assert [(r["status"], r["rows"], r["nranks"]) for r in runs] == [
        ("complete", 2, 1),
        ("complete", 2, 1),
    ]
    assert _rows(result, "run", "placement", "time_us") == [
        (0, "out-of-place", 11.0),
        (0, "in-place", 10.0),
        (1, "out-of-place", 22.0),
        (1, "in-place", 10.0),
    ]
    # With Open MPI's --tag-output the copies are told apart by their prefixes.
    tagged = "\n".join(
        f"[1,{i}]<stdout>:{x}"
        for pair in zip(a, b, strict=True)
        for i, x in enumerate(pair)
    )
    result = ncclparse.parse(tagged + "\n")
    assert _rows(result, "run", "time_us") == [
        (0, 11.0),
        (0, 10.0),
        (1, 22.0),
        (1, 10.0),
    ]
    assert [r["warnings"] for r in result.runs.to_pylist()] == [
        [
            "line 1: collective not stated; inferred all_reduce from size/count ratio 1 "
            "and checked in-place results"
        ],
        [
            "line 2: collective not stated; inferred all_reduce from size/count ratio 1 "
            "and checked in-place results"
        ],
    ]


@pytest.mark.parametrize("indent", ["        ", "\t", " "])
def test_an_indented_tag_output_log_reads_as_the_log(indent: str) -> None:
    # `kubectl logs` of an MPIJob, as the aws-k8s-tester Go tests print it: every
    # line indented before Open MPI's tag (real: nccl_unseen/awsk8stester-585).
    plain = ncclparse.parse(EXAMPLE, name="x.log")
    tagged = "".join(
        f"{indent}[1,0]<stdout>:{line}" for line in EXAMPLE.read_text().splitlines(True)
    )
    result = ncclparse.parse(tagged, name="x.log")
    assert result.measurements.equals(plain.measurements)
    assert result.runs.equals(plain.runs)


def test_a_perf_word_in_other_output_is_no_command() -> None:
    # libfabric's debug log registers an `ofi_hook_perf` provider: it read as an
    # nccl-tests command, which closed the run before its table (real:
    # nccl_unseen/repo-sparticlesteve-perlmutter_..., 3,000 such lines).
    fabric = (
        "libfabric:1680520:1726870657::core:core:ofi_register_provider():468<info> "
        "registering provider: ofi_hook_perf (115.20)\n"
    )
    text = PREAMBLE.format(pid=100) + fabric + HEADER + ROW8.format(t="11.00") + FOOTER
    result = ncclparse.parse(text)
    runs = result.runs.to_pylist()
    inferred = (
        "line 1: collective not stated; inferred all_reduce from size/count ratio 1 "
        "and checked in-place results"
    )
    assert [(r["status"], r["rows"], r["first_line"], r["warnings"]) for r in runs] == [
        ("complete", 2, 1, [inferred])
    ]
    assert result.accounting["<string>"]["noise"] == 1


def test_open_mpi_tags_glued_inside_a_row_are_removed() -> None:
    # --tag-output tags each write(): a row printed in three pieces carries the tag
    # twice more (real: nccl_unseen/repo-keitaw-p5_...).
    row = ROW8.format(t="11.00")
    pieces = row.split("      -1")[0] + "      -1"
    rest = row[len(pieces) :]
    out_place, in_place = (
        rest[: rest.index("      0") + 7],
        rest[rest.index("      0") + 7 :],
    )
    glued = f"[1,0]<stdout>:{pieces}[1,0]<stdout>:{out_place}[1,0]<stdout>:{in_place}"
    tagged = "".join(
        f"[1,0]<stdout>:{line}"
        for line in (PREAMBLE.format(pid=100) + HEADER).splitlines(True)
    )
    result = ncclparse.parse(tagged + glued + "[1,0]<stdout>:" + FOOTER)
    assert _rows(result, "placement", "time_us", "wrong") == [
        ("out-of-place", 11.0, 0),
        ("in-place", 10.0, 0),
    ]
    assert result.runs.to_pylist()[0]["warnings"] == [
        "line 1: collective not stated; inferred all_reduce from size/count ratio 1 "
        "and checked in-place results"
    ]


def test_markdown_table_paste() -> None:
    # Section 9: tables rendered as `a | b | c` with `\#` (real: mscclpp-736).
    text = (
        "| \\#       size | count | type | redop | root | time | algbw | busbw | \\#wrong | time | algbw | busbw | \\#wrong |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
        "| 8 | 2 | float | sum | -1 | 10.5 | 0.00 | 0.00 | 0 | 10.1 | 0.00 | 0.00 | 0 |\n"
    )
    result = ncclparse.parse(text)
    assert _rows(result, "size_bytes", "placement", "time_us") == [
        (8, "out-of-place", 10.5),
        (8, "in-place", 10.1),
    ]


def test_two_runs_in_one_file_with_crlf() -> None:
    one = PREAMBLE.format(pid=1) + HEADER + ROW8.format(t="10.00") + FOOTER + "#\n\n"
    result = ncclparse.parse((one + one).replace("\n", "\r\n"))
    runs = result.runs.to_pylist()
    assert [
        (r["run"], r["status"], r["first_line"], r["last_line"], r["rows"])
        for r in runs
    ] == [(0, "complete", 1, 12, 2), (1, "complete", 14, 25, 2)]


def test_v1_times_in_milliseconds_become_microseconds() -> None:
    # Section 5.3 / 6.1: E0 printed `%7.3f` ms and `res`.
    text = (
        "nThread 1 nGpus 8 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
        "#      bytes             N    type      op     time  algbw  busbw      res     time  algbw  busbw      res\n"
        "           8             2   float     sum    0.041   0.00   0.00    0e+00    0.040   0.00   0.00    0e+00\n"
        " Out of bounds values : 0 OK\n Avg bus bandwidth    : 0.0001 \n"
    )
    result = ncclparse.parse(text)
    assert _rows(result, "time_us", "wrong", "wrong_kind") == [
        (41.0, 0.0, "max_deviation"),
        (40.0, 0.0, "max_deviation"),
    ]
    assert result.runs.column("status").to_pylist() == ["complete"]


def test_fully_unmeasured_half_gives_no_row() -> None:
    text = HEADER + (
        "     1048576         32768     float    none      -1    58.14   18.04   15.78"
        "       0      N/A     N/A     N/A     N/A\n"
    )
    result = ncclparse.parse(text)
    assert _rows(result, "placement") == [("out-of-place",)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "<string>: empty input: no benchmark output to parse"),
        (
            # mscclpp-test: in-place first, no type/redop/root columns (format doc 12).
            "#                                        in-place                       out-of-place\n"
            "#       size    count     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n"
            "        1024      256     5.22    0.20    0.34      0     5.14    0.20    0.35      0\n",
            "<string>:1: not a recognised benchmark log (nccl-tests, rccl-tests, "
            "oneCCL benchmark or IMB); first line: '#                                        "
            "in-place                       out-o...'",
        ),
        (
            "# mscclpp-test\n           8        7.52    0.00  8.01  0.00\n",
            "<string>:1: not a recognised benchmark log (nccl-tests, rccl-tests, "
            "oneCCL benchmark or IMB); first line: '# mscclpp-test'",
        ),
    ],
)
def test_unrecognised_input_is_an_error_naming_source_and_line(
    text: str, message: str
) -> None:
    with pytest.raises(ncclparse.UnknownLogFormatError) as caught:
        ncclparse.parse(text)
    assert str(caught.value) == message


def test_failure_before_the_table_then_another_run() -> None:
    # Real shape of nccltests-280: a failed run's error lines, then another run.
    text = (
        "c2211f46f318: Test NCCL failure common.cu:1005 'unhandled CUDA error'\n"
        ".. c2211f46f318 pid 3288: Test failure common.cu:891\n"
        + PREAMBLE.format(pid=3590)
        + HEADER
        + ROW8.format(t="10.00")
    )
    runs = ncclparse.parse(text).runs.to_pylist()
    assert [(r["status"], r["rows"], r["errors"]) for r in runs] == [
        (
            "failed",
            0,
            [
                "line 1: c2211f46f318: Test NCCL failure common.cu:1005 'unhandled CUDA error'",
                "line 2: .. c2211f46f318 pid 3288: Test failure common.cu:891",
            ],
        ),
        ("truncated", 2, []),
    ]


# A real complete log (8 B to 8 GiB, `-f 2`) whose author kept the footer's last
# line (`Collective test concluded`) but not its `Avg bus bandwidth` line.
_AVERAGE = "# Avg bus bandwidth    : 70.742 \n"
_CONCLUDED = "#\n# Collective test concluded: all_reduce_perf\n"


def _without_average(*, drop_size: str | None = None) -> str:
    text = (FIXTURES / "nccl" / _A3MEGA).read_text()
    assert _AVERAGE in text
    lines = text.replace(_AVERAGE, _CONCLUDED).splitlines(keepends=True)
    return "".join(
        line for line in lines if drop_size is None or not line.startswith(drop_size)
    )


_A3MEGA = "repo-ztan-a3mega_allreduce_16rank_2node_h100_complete.log"


def test_concluded_without_average_is_complete_when_every_size_is_there() -> None:
    (run,) = ncclparse.parse(_without_average(), name="x").runs.to_pylist()
    assert (run["status"], run["rows"], run["avg_busbw_gbps"]) == ("complete", 62, None)
    assert run["warnings"][-1] == (
        "line 65: no Avg bus bandwidth line: complete, as the Out of bounds line and "
        "`Collective test concluded` end the run and its rows reach maxBytes"
    )


def test_concluded_without_average_and_a_size_missing_is_truncated() -> None:
    text = _without_average(drop_size="  8589934592")
    (run,) = ncclparse.parse(text, name="x").runs.to_pylist()
    assert (run["status"], run["rows"]) == ("truncated", 60)
    assert run["warnings"][0] == (
        "line 64: no Avg bus bandwidth line, and its largest size 4294967296 is not "
        "the last before maxBytes 8589934592: truncated"
    )


def test_concluded_without_average_or_parameter_line_is_truncated() -> None:
    # The real RCCL fragment (last 4 rows and footer) with its average line cut.
    text = (FIXTURES / "nccl" / _RCCL_FRAGMENT).read_text()
    text = text.replace("# Avg bus bandwidth    : 142.652 \n", "")
    (run,) = ncclparse.parse(text, name="x").runs.to_pylist()
    assert run["status"] == "truncated"
    assert (
        "line 8: no Avg bus bandwidth line, and no parameter line tells the sizes "
        "to expect: truncated"
    ) in run["warnings"]


_RCCL_FRAGMENT = "rccl-2078_allreduce_rccl_footer_asterisks_concluded_fragment.log"
