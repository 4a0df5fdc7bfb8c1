"""``ncclparse parse`` end to end: inputs, outputs, summaries and exit status."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import click
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from ncclparse import schema
from ncclparse.cli.app import cli
from ncclparse.efficiency.hardware import PRESETS
from tests.conftest import FIXTURES

COMPLETE = (
    FIXTURES / "nccl" / "repo-ztan-a3mega_allreduce_16rank_2node_h100_complete.log"
)


def test_parse_writes_parquet_and_runs(runner: CliRunner, tmp_path: Path) -> None:
    out, runs = tmp_path / "m.parquet", tmp_path / "r.parquet"
    result = runner.invoke(
        cli, ["parse", str(COMPLETE), "-o", str(out), "--runs", str(runs)]
    )
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr == (
        f"{COMPLETE}: nccl-tests, 1 run (1 complete), 62 rows, 0 warnings\n"
    )
    table = pq.read_table(out)
    assert table.num_rows == 62
    assert table.schema.metadata[schema.VERSION_KEY] == b"1"
    assert (
        table.schema.remove_metadata() == schema.MEASUREMENTS_SCHEMA.remove_metadata()
    )
    hosts = pq.read_table(runs).column("hosts").to_pylist()[0]
    assert hosts is not None
    assert hosts[8] == "ztan-mig-gq73"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.parquet", "r.parquet"]


def test_standard_input_to_csv_on_standard_output(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["parse", "-q"], input=COMPLETE.read_bytes())
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith('"source","run","line","tool"')
    assert lines[1].startswith(
        '"-",0,32,"nccl-tests",,"all_reduce","out-of-place",8,8,2,'
    )
    assert len(lines) == 63
    assert result.stderr == ""


def test_jsonl_runs_keep_lists_and_maps(runner: CliRunner, tmp_path: Path) -> None:
    runs = tmp_path / "runs.jsonl"
    result = runner.invoke(
        cli,
        [
            "parse",
            str(COMPLETE),
            "-q",
            "-o",
            str(tmp_path / "m.csv"),
            "--runs",
            str(runs),
        ],
    )
    assert result.exit_code == 0
    (run,) = [json.loads(line) for line in runs.read_text().splitlines()]
    assert run["params"]["maxBytes"] == "8589934592"
    assert run["nnodes"] == 2
    assert len(run["hosts"]) == 16


def test_bad_and_missing_inputs_fail_but_the_rest_is_written(
    runner: CliRunner, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    (logs / "sub").mkdir(parents=True)
    shutil.copy(COMPLETE, logs / "sub" / "good.log")
    (logs / "notes.txt").write_text("hello\n")
    (logs / ".hidden").write_text("ignored\n")
    out = tmp_path / "m.parquet"
    result = runner.invoke(
        cli, ["parse", str(logs), str(tmp_path / "missing.log"), "-o", str(out)]
    )
    assert result.exit_code == 1
    assert pq.read_table(out).num_rows == 62
    assert result.stderr.splitlines() == [
        f"{logs}/sub/good.log: nccl-tests, 1 run (1 complete), 62 rows, 0 warnings",
        f"Error: {tmp_path}/missing.log: no such file or directory",
        f"Error: {logs}/notes.txt:1: not a recognised benchmark log (nccl-tests, "
        "rccl-tests, oneCCL benchmark or IMB); first line: 'hello'",
    ]


def test_unknown_extension_is_an_error_and_writes_nothing(
    runner: CliRunner, tmp_path: Path
) -> None:
    result = runner.invoke(
        cli, ["parse", str(COMPLETE), "-o", str(tmp_path / "m.xlsx")]
    )
    assert result.exit_code == 1
    assert "cannot tell the format from the extension '.xlsx'" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_usage_error_exit_status(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["parse", "--format", "xml", str(COMPLETE)])
    assert result.exit_code == 2


def test_every_command_has_help(runner: CliRunner) -> None:
    context = click.Context(cli)
    names = cli.list_commands(context)
    assert names == [
        "analyze",
        "check",
        "compare",
        "history",
        "ideal",
        "ingest",
        "model",
        "parse",
        "profiles",
        "report",
        "trend",
    ]
    for name in names:
        command = cli.get_command(context, name)
        assert command is not None
        assert command.help, name
        assert runner.invoke(cli, [name, "--help"]).exit_code == 0
    compact = runner.invoke(cli, ["history", "compact", "--help"])
    assert compact.exit_code == 0
    assert "Merge the files of each date partition into one." in compact.output
    listed = runner.invoke(cli, ["--help"]).stdout
    assert all(f"  {name} " in listed for name in names)


def test_ideal_reproduces_the_aiboosters_example(runner: CliRunner) -> None:
    # AIBooster's ideal: B = 450 GB/s, I = 100 GB/s, 8 GPUs per node, 2 nodes -> 187.5 GB/s.
    result = runner.invoke(
        cli,
        [
            "ideal",
            "--intra-bw",
            "450GB/s",
            "--inter-bw",
            "100GB/s",
            "--gpus-per-node",
            "8",
            "--nodes",
            "2",
            "--json",
        ],
    )
    assert result.exit_code == 0
    values = json.loads(result.stdout)
    assert values["ideal_busbw_gbps"] == 187.5
    assert values["bound"] == "inter"


def test_ideal_prints_its_arithmetic(runner: CliRunner) -> None:
    # N = 8 x 2 = 16: inter 100 x 15 x 2 / (16 x 1) = 187.5, intra 450 x 15 / 14 = 482.1.
    args = "--intra-bw 450GB/s --inter-bw 100GB/s --gpus-per-node 8 --nodes 2"
    result = runner.invoke(cli, ["ideal", *args.split()])
    assert result.exit_code == 0
    assert result.stdout == (
        "ideal bus bandwidth: 187.5 GB/s (16 ranks on 2 nodes, bound by the "
        "inter-node term)\n"
        "  inter-node term  I(N-1)Q/(N(Q-1)) = 100 x 15 x 2 / (16 x 1) = 187.5 GB/s\n"
        "  intra-node term  B(N-1)/(N-Q)     = 450 x 15 / 14           = 482.1 GB/s\n"
        "  with B = 450 GB/s per GPU, I = 100 GB/s per node, P = 8 GPUs per node, "
        "Q = 2 nodes, N = PQ = 16\n"
    )


def test_ideal_on_one_node_is_b(runner: CliRunner) -> None:
    result = runner.invoke(
        cli, ["ideal", "--intra-bw", "3600Gbps", "--gpus-per-node", "8"]
    )
    assert result.exit_code == 0
    assert result.stdout == (
        "ideal bus bandwidth: 450.0 GB/s (8 ranks on 1 node: B, the per-GPU "
        "intra-node bandwidth)\n"
    )


def test_model_prints_the_terms_in_human_units(runner: CliRunner) -> None:
    # Ring all-reduce on P = 256: 2(P-1) = 510 steps x 2 us = 1.02 ms; 510/256 x 10 GB
    # / 50 GB/s = 1.9921875 x 200 ms = 398.4 ms; 399.5 ms in all.
    args = "all_reduce --size 10GB --ranks 256 --alpha 2us --bandwidth 50GB/s"
    result = runner.invoke(cli, ["model", *args.split()])
    assert result.exit_code == 0
    assert result.stdout == (
        "all_reduce of 10 GB on 256 ranks, ring: reduce-scatter then all-gather "
        "around a ring, 2(P-1) steps of n/P\n"
        "predicted time: 399 ms = 1.02 ms latency + 398 ms bandwidth "
        "(bandwidth-bound)\n"
        "  latency term    2(P-1) x alpha    = 510 x 2 µs                = 1.02 ms\n"
        "  bandwidth term  2(P-1)/P x n/beta = 510/256 x 10 GB / 50 GB/s = 398 ms\n"
    )


def test_model_says_the_tree_is_not_nccls(runner: CliRunner) -> None:
    # Binomial tree on P = 8: 2 ceil(log2 8) = 6 steps of the whole buffer:
    # 6 x 1 us = 6 us; 6 x 1 GB / 100 GB/s = 60 ms.
    args = "all_reduce --size 1GB --ranks 8 --alpha 1us --bandwidth 100GB/s"
    result = runner.invoke(cli, ["model", *args.split(), "--algorithm", "tree"])
    assert result.exit_code == 0
    assert result.stdout == (
        "all_reduce of 1 GB on 8 ranks, tree: a non-pipelined binomial tree (reduce "
        "then broadcast), 2 ceil(log2 P) steps, each moving the whole buffer\n"
        "predicted time: 60 ms = 6 µs latency + 60 ms bandwidth (bandwidth-bound)\n"
        "  latency term    2 ceil(log2 P) x alpha  = 6 x 1 µs            = 6 µs\n"
        "  bandwidth term  2 ceil(log2 P) x n/beta = 6 x 1 GB / 100 GB/s = 60 ms\n"
        "  note: NCCL's own tree is pipelined (the buffer flows through the tree in "
        "chunks), so real NCCL tree times are lower than this model's\n"
    )


def test_model_reproduces_10gb_ring_all_reduce_on_256_ranks(runner: CliRunner) -> None:
    # Worked example: 10 GB over 256 ranks, alpha 2 us, 50 GB/s: 1.02 ms + 398 ms = 399 ms.
    result = runner.invoke(
        cli,
        [
            "model",
            "all_reduce",
            "--size",
            "10GB",
            "--ranks",
            "256",
            "--alpha",
            "2us",
            "--bandwidth",
            "50GB/s",
            "--json",
        ],
    )
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {
        "time_us": 399457.5,
        "latency_us": 1020.0,
        "bandwidth_us": 398437.5,
    }


def test_model_needs_its_inputs(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["model", "all_reduce", "--size", "10GB"])
    assert result.exit_code == 2
    assert "--ranks, --alpha and --bandwidth are required" in result.stderr


def test_analyze_writes_rows_and_fits_and_states_assumptions(
    runner: CliRunner, tmp_path: Path
) -> None:
    out, fits = tmp_path / "a.parquet", tmp_path / "f.parquet"
    result = runner.invoke(
        cli, ["analyze", str(COMPLETE), "-q", "-o", str(out), "--fits", str(fits)]
    )
    assert result.exit_code == 0
    assert result.stderr.startswith(
        "Assumed: no profile given: device 'NVIDIA H100 80GB HBM3' matched preset h100"
    )
    rows = pq.read_table(out).to_pylist()
    assert len(rows) == 62
    biggest = rows[-1]  # 8 GiB in-place on 2 nodes x 8 H100 (B 450, I 400 GB/s)
    assert biggest["size_bytes"] == 8589934592
    # The strict reading (H100s may run NVLSTree on 2 nodes): min(2(N-1)/N I,
    # 2(P-1)/P B) = min(750, 787.5); the lenient one a ring's min(B, I) = 400.
    ideal = min(2 * 15 / 16 * 400, 2 * 7 / 8 * 450)
    assert biggest["ideal_busbw_gbps"] == pytest.approx(ideal)
    assert biggest["ideal_low_busbw_gbps"] == pytest.approx(400.0)
    assert biggest["efficiency"] == pytest.approx(biggest["busbw_calc_gbps"] / ideal)
    assert pq.read_table(fits).num_rows == 2


def test_profiles_lists_presets_with_sources(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["profiles", "--json"])
    assert result.exit_code == 0
    presets = json.loads(result.stdout)
    assert {"a100", "h100", "h200", "b200", "gb200-nvl72", "mi300x", "aurora"} <= set(
        presets
    )


def test_profiles_prints_a_block_per_preset(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["profiles"])
    assert result.exit_code == 0
    assert "None" not in result.stdout
    blocks = {b.split(":")[0]: b for b in result.stdout.rstrip("\n").split("\n\n")}
    assert list(blocks) == list(PRESETS)
    # H800: B = 400 GB/s bidirectional / 2; no source for its NICs, so unknown.
    assert blocks["h800"] == (
        "h800: HGX H800 8-GPU (export H100), NVSwitch; NICs unknown\n"
        "  B         200 GB/s per GPU, intra-node\n"
        "            source: NVLink 400 GB/s bidirectional per GPU, halved: '400GB/s is the\n"
        "                bidirectional theoretical figure' (DeepSeek,\n"
        "                https://github.com/deepseek-ai/DeepSeek-V3/issues/28)\n"
        "  I         unknown (no public source found; pass --inter-bw)\n"
        "  P         8 GPUs per node\n"
        "            source: 8 x 'NVIDIA H800' NVSwitch nodes in nccl-tests logs, e.g.\n"
        "                https://github.com/NVIDIA/nccl/issues/1531\n"
        "  NICs      unknown (no public source found)\n"
        "  topology  switch (every GPU reaches B whatever the number of peers)\n"
        "  matches   GPU names matching /\\bH800\\b(?!.*(PCIE|NVL))/"
    )
    # AWS p5: 32 EFA x 12.5 GB/s (100 Gb/s) = 400 GB/s; chosen by name only.
    p5 = blocks["aws-p5"]
    assert "  I         400 GB/s per node, inter-node\n" in p5
    assert "  NICs      32 x 12.5 GB/s (100 Gb/s each)\n" in p5
    assert "            source (count): 32 EFA devices;" in p5
    assert p5.endswith("  matches   no GPU name; choose it with --profile aws-p5")
    # MI300X: 7 peers x 64 GB/s = 448 GB/s over a mesh.
    assert (
        "  topology  mesh, 64 GB/s per peer link (P GPUs reach (P-1) x 64 GB/s)\n"
        in (blocks["mi300x"])
    )


def test_model_hierarchical_reproduces_8x8_gpus_2gb(runner: CliRunner) -> None:
    # Worked example, 8 nodes x 8 GPUs, 2 GB: phase 2 takes 8.82 ms (the printed total
    # 20.44 ms adds rounded phases; the formula gives 20.50 ms, see test_costmodels).
    result = runner.invoke(
        cli,
        [
            "model",
            "all_reduce",
            "--size",
            "2GB",
            "--algorithm",
            "hierarchical",
            "--gpus-per-node",
            "8",
            "--nodes",
            "8",
            "--intra-alpha",
            "1us",
            "--intra-bandwidth",
            "300GB/s",
            "--inter-alpha",
            "5us",
            "--inter-bandwidth",
            "50GB/s",
            "--json",
        ],
    )
    assert result.exit_code == 0
    values = json.loads(result.stdout)
    assert round(values["all_reduce"]["time_us"] / 1000, 2) == 8.82
    assert round(values["time_us"] / 1000, 2) == 20.50


def test_model_scale_out_reproduces_the_aurora_projection(runner: CliRunner) -> None:
    # Aurora data-path projection, 2 nodes, 2 GB over a 23 GB/s NIC at 80 %: 108.7 ms, and 299.2 ms
    # with host staging over 42 GB/s PCIe.
    result = runner.invoke(
        cli,
        [
            "model",
            "all_reduce",
            "--size",
            "2GB",
            "--algorithm",
            "scale-out",
            "--nodes",
            "2",
            "--nic-bandwidth",
            "23GB/s",
            "--pcie-bandwidth",
            "42GB/s",
            "--json",
        ],
    )
    assert result.exit_code == 0
    values = json.loads(result.stdout)
    assert round(values["scale_out_us"] / 1000, 1) == 108.7
    assert round(values["time_us"] / 1000, 1) == 299.2


def test_analyze_with_a_hardware_latency_splits_the_fitted_alpha(
    runner: CliRunner, tmp_path: Path
) -> None:
    # all_reduce on 16 ranks needs at least 2 x ceil(log2 16) = 8 latency steps
    # (recursive halving-doubling): 8 x 2 us = 16 us of hardware latency per row.
    out = tmp_path / "a.parquet"
    result = runner.invoke(
        cli, ["analyze", str(COMPLETE), "-q", "-o", str(out), "--hw-latency", "2us"]
    )
    assert result.exit_code == 0
    assert "overridden on the command line: alpha_us=2" in result.stderr
    parts = ("hw_latency", "latency", "bandwidth", "staging", "residual")
    for row in pq.read_table(out).to_pylist():
        assert row["gap_hw_latency_us"] == 16.0
        total = sum(row[f"gap_{part}_us"] for part in parts)
        assert total == pytest.approx(row["gap_us"], abs=1e-9)
        assert "hardware latency unknown" not in (row["efficiency_note"] or "")


def test_hardware_latency_needs_a_unit(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["analyze", str(COMPLETE), "-q", "--hw-latency", "2"])
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "Error: time '2' has no unit: write e.g. 2us, 1.5ms or 0.1s\n"
    )


def test_report_with_the_real_nics_judges_the_example(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/efficiency.md section 2: GCP A3 Mega's 8 x 200 Gb/s NICs (I = 200) rule a
    ring out (busbw 330.6 > 200); a tree's line rate is min(2 x 15/16 x 200, 450 x
    15/14) = 375 GB/s, of which healthy hardware reaches 300 (0.80 for TCPXO): 88.2 %
    and 110.2 %. Without hardware figures the same run is a NOTE."""
    monkeypatch.chdir(Path(__file__).parent.parent)
    example = "examples/all_reduce_16rank_2node_h100.log"
    args = ["report", example, "--format", "md", "-q"]
    judged = runner.invoke(cli, [*args, "--profile", "gcp-a3-mega"])
    assert judged.exit_code == 0, judged.output
    assert (
        "| ✓ OK | examples/all\\_reduce\\_16rank\\_2node\\_h100.log (run 0) | all\\_reduce "
        "| 16 | 2 | NVIDIA H100 80GB HBM3 | healthy: median busbw 330.6 GB/s on the "
        "plateau, 2 GiB to 8 GiB: 88.2 % of a tree's line rate (375.0 GB/s), 110.2 % "
        "of what healthy hardware reaches (300.0 GB/s) |"
    ) in judged.output.splitlines()
    unjudged = runner.invoke(cli, args)
    assert (
        "| i NOTE | examples/all\\_reduce\\_16rank\\_2node\\_h100.log"
        in unjudged.output
    )
