"""Notebook use: a short repr and an HTML table for results, matplotlib charts from
a result, and the documented notebook example run as written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

import ncclparse
from ncclparse.efficiency import HardwareOptions, analyze, bandwidth_columns
from ncclparse.parsers.result import HTML_RUNS, ParseResult
from ncclparse.report.notebook import (
    LEGEND_LINES,
    plot_bandwidth,
    plot_efficiency,
    plot_time,
)
from tests._docs import code_block
from tests.conftest import FIXTURES

ROOT = Path(__file__).parent.parent
NCCL = FIXTURES / "nccl"
H100 = NCCL / "repo-ztan-a3mega_allreduce_16rank_2node_h100_complete.log"
ALLTOALL = NCCL / "superbench-testdata_alltoall_a100_8gpu_c0_blank_redop_complete.log"
TWO_RUNS = NCCL / "nccltests-280_allreduce_rtx4090_markdown_mangled_failure.log"
# The A3 Mega system of the README: 8 x 200 Gb/s NICs per node.
A3_MEGA = HardwareOptions(profile="h100", inter_bw="1600Gbps")


def _rows(table: pa.Table, placement: str, **where: Any) -> pa.Table:
    """The rows of ``placement`` (and the ``where`` values) with a size, by size."""
    mask = pc.equal(table["placement"], pa.scalar(placement))
    for name, value in where.items():
        mask = pc.and_(mask, pc.equal(table[name], pa.scalar(value)))
    rows = table.filter(mask)
    rows = rows.filter(pc.greater(rows["size_bytes"], pa.scalar(0)))
    return rows.sort_by("size_bytes")


def _floats(table: pa.Table, name: str) -> list[float]:
    return [float(v) for v in table[name].to_numpy()]


def _x(line: Line2D) -> list[float]:
    return [float(v) for v in np.asarray(line.get_xdata(), dtype=float)]


def _y(line: Line2D) -> list[float]:
    return [float(v) for v in np.asarray(line.get_ydata(), dtype=float)]


# --- repr ---------------------------------------------------------------------


def test_repr_is_one_line_of_counts() -> None:
    result = ncclparse.parse_many([ALLTOALL, TWO_RUNS, NCCL / "no-such.log"])
    assert repr(result) == (
        "<ParseResult: 2 sources, 3 runs (1 complete, 1 truncated, 1 failed), "
        "74 measurements, 1 failure>"
    )
    assert repr(ncclparse.parse(H100)) == (
        "<ParseResult: 1 source, 1 run (1 complete), 62 measurements>"
    )
    assert repr(ncclparse.parse_many([])) == (
        "<ParseResult: 0 sources, 0 runs, 0 measurements>"
    )


def test_html_repr_is_a_table_of_runs() -> None:
    result = ncclparse.parse_many([ALLTOALL, TWO_RUNS, NCCL / "no-such.log"])
    alltoall, two_runs = str(ALLTOALL), str(TWO_RUNS)
    assert result._repr_html_() == (
        "<div><p>ParseResult: 2 sources, 3 runs (1 complete, 1 truncated, 1 failed), "
        "74 measurements, 1 failure</p><table><thead><tr><th>source</th><th>run</th>"
        "<th>tool</th><th>collective</th><th>ranks</th><th>nodes</th><th>status</th>"
        "<th>rows</th></tr></thead><tbody>"
        f"<tr><td>{alltoall}</td><td>0</td><td>nccl-tests</td><td>alltoall</td>"
        "<td>8</td><td>1</td><td>complete</td><td>68</td></tr>"
        f"<tr><td>{two_runs}</td><td>0</td><td>nccl-tests</td><td>all_reduce</td>"
        "<td></td><td></td><td>failed</td><td>0</td></tr>"
        f"<tr><td>{two_runs}</td><td>1</td><td>nccl-tests</td><td>all_reduce</td>"
        "<td>3</td><td>1</td><td>truncated</td><td>6</td></tr>"
        "</tbody></table><p>Failures:</p><ul>"
        f"<li>{NCCL / 'no-such.log'}: cannot read: No such file or directory</li>"
        "</ul></div>"
    )


def test_html_repr_escapes_log_text_and_is_bounded() -> None:
    text = H100.read_text()
    names = [f"<img src=x onerror=alert({i})>&.log" for i in range(HTML_RUNS + 5)]
    result = ncclparse.parse_many([(text, name) for name in names])
    page = result._repr_html_()
    assert "<img" not in page
    assert page.count("<tr><td>&lt;img src=x onerror=alert(") == HTML_RUNS
    assert "&lt;img src=x onerror=alert(0)&gt;&amp;.log" in page
    assert "alert(20)" not in page  # the 21st run is counted, not listed
    assert '<tr><td colspan="8">... 5 more</td></tr>' in page
    assert repr(result).startswith("<ParseResult: 25 sources, 25 runs (25 complete)")


def test_the_summary_survives_replace() -> None:
    """parse_points hands out dataclasses.replace copies: they keep the repr."""
    import dataclasses

    result = ncclparse.parse(H100)
    copy = dataclasses.replace(result, measurements=result.measurements.slice(0, 2))
    assert isinstance(copy, ParseResult)
    assert repr(copy) == "<ParseResult: 1 source, 1 run (1 complete), 2 measurements>"


# --- plots --------------------------------------------------------------------


def test_an_analysis_repr_is_one_line() -> None:
    result = ncclparse.parse(H100)
    guessed = analyze(result.measurements, None, result.runs)
    assert repr(guessed) == "<Analysis: 62 rows, 2 fits, profile h100, 2 assumptions>"
    given = analyze(result.measurements, "gcp-a3-mega", result.runs)
    assert repr(given) == (
        "<Analysis: 62 rows, 2 fits, profile gcp-a3-mega, 0 assumptions>"
    )
    shown = guessed._repr_html_()
    assert shown.startswith(
        "<div><p>Analysis: 62 rows, 2 fits, profile h100, 2 assumptions</p>"
        "<p>Assumptions:</p><ul><li>no profile given: device &#x27;NVIDIA H100"
    )
    assert "<ul>" not in given._repr_html_()


def test_bandwidth_plot_draws_the_logs_busbw_per_placement() -> None:
    result = ncclparse.parse(H100)
    fig = plot_bandwidth(result)
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["out-of-place", "in-place"]
    for line, placement in zip(lines, ["out-of-place", "in-place"], strict=True):
        rows = _rows(result.measurements, placement)
        assert rows.num_rows == 31
        assert _x(line) == _floats(rows, "size_bytes")
        assert _y(line) == _floats(rows, "busbw_gbps")
    assert _x(lines[0])[:3] == [8.0, 16.0, 32.0]
    assert _y(lines[0])[-1] == 338.82  # the log's busbw at 8 GiB
    assert ax.get_xscale() == "log"
    assert ax.get_xlabel() == "message size"
    assert ax.get_ylabel() == "bus bandwidth (GB/s)"
    assert ax.get_ylim()[0] == 0
    legend = ax.get_legend()
    assert legend is not None
    assert [t.get_text() for t in legend.get_texts()] == [
        "out-of-place",
        "in-place",
    ]


def test_bandwidth_plot_of_an_analysis_adds_the_ideal() -> None:
    result = ncclparse.parse(H100)
    analysis = analyze(result.measurements, A3_MEGA, result.runs)
    lines = plot_bandwidth(analysis).axes[0].get_lines()
    assert [line.get_label() for line in lines] == [
        "out-of-place",
        "in-place",
        "ideal",
    ]
    rows = _rows(analysis.rows, "out-of-place")
    assert _x(lines[2]) == _floats(rows, "size_bytes")
    assert _y(lines[2]) == _floats(rows, "ideal_busbw_gbps")
    # hardware= analyses a plain result the same way.
    again = plot_bandwidth(result, hardware=A3_MEGA).axes[0].get_lines()
    assert _y(again[2]) == _y(lines[2])


def test_bandwidth_falls_back_to_recomputed_busbw() -> None:
    """IMB prints no busbw: the line is the busbw recomputed from size and time."""
    result = ncclparse.parse(FIXTURES / "imb" / "imb_allreduce_np2.log")
    assert result.measurements["busbw_gbps"].null_count == result.measurements.num_rows
    (line,) = plot_bandwidth(result).axes[0].get_lines()
    rows = bandwidth_columns(result.measurements)
    rows = rows.filter(pc.greater(rows["size_bytes"], pa.scalar(0))).sort_by(
        "size_bytes"
    )
    assert _x(line) == _floats(rows, "size_bytes")
    assert _y(line) == pytest.approx(_floats(rows, "busbw_calc_gbps"))
    assert line.get_label() == "out-of-place"


def test_plot_on_a_given_axes_returns_its_figure() -> None:
    result = ncclparse.parse(H100)
    fig = Figure()
    left, right = fig.subplots(1, 2)
    assert plot_bandwidth(result, ax=right) is fig
    assert plot_time(result.measurements, ax=left) is fig
    assert len(fig.axes) == 2
    assert len(right.get_lines()) == 2
    assert left.get_ylabel() == "time per operation"
    # Axes of a subfigure: the figure to show is still the root one.
    outer = Figure()
    halves: Any = outer.subfigures(1, 2)  # the stubs type one or an array
    inner = halves[1].subplots()
    assert plot_bandwidth(result, ax=inner) is outer


def test_time_plot_draws_the_logs_times() -> None:
    result = ncclparse.parse(H100)
    analysis = analyze(result.measurements, A3_MEGA, result.runs)
    ax = plot_time(analysis).axes[0]
    lines = ax.get_lines()
    labels = ["out-of-place", "in-place", "ideal (no latency)"]
    assert [line.get_label() for line in lines] == labels
    rows = _rows(result.measurements, "in-place")
    assert _y(lines[1]) == _floats(rows, "time_us")
    ideal = _rows(analysis.rows, "out-of-place")
    assert _y(lines[2]) == _floats(ideal, "ideal_time_us")
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    assert ax.get_ylim()[0] == pytest.approx(min(_floats(rows, "time_us")) / 10)


def test_efficiency_plot_analyses_what_it_is_given() -> None:
    result = ncclparse.parse(H100)
    ax = plot_efficiency(result, hardware=A3_MEGA).axes[0]
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["out-of-place", "in-place", "ideal"]
    rows = _rows(analyze(result.measurements, A3_MEGA, result.runs).rows, "in-place")
    expected = np.array(_floats(rows, "efficiency")) * 100
    assert _y(lines[1]) == list(expected)
    assert _y(lines[2]) == [100, 100]  # the axhline
    assert ax.get_ylabel() == "efficiency"
    assert ax.get_ylim() == (0.0, 110.0)


def test_efficiency_plot_without_any_ideal_says_why() -> None:
    """IMB names no GPU: no preset matches, and no hardware was given."""
    result = ncclparse.parse(FIXTURES / "imb" / "imb_allreduce_np2.log")
    with pytest.raises(ValueError, match=r"^no efficiency to plot: ") as error:
        plot_efficiency(result)
    assert str(error.value).count("no hardware profile: pass --profile") == 1
    assert str(error.value).endswith(
        "; give hardware= (a profile, or HardwareOptions(intra_bw=..., inter_bw=...))"
    )


def test_many_series_are_told_apart_by_what_differs() -> None:
    result = ncclparse.parse_many([ALLTOALL, TWO_RUNS])
    lines = plot_bandwidth(result).axes[0].get_lines()
    assert [line.get_label() for line in lines] == [
        f"{TWO_RUNS.name}, run 1, all_reduce, sum, 3 ranks, out-of-place",
        f"{TWO_RUNS.name}, run 1, all_reduce, sum, 3 ranks, in-place",
        f"{ALLTOALL.name}, run 0, alltoall, 8 ranks, out-of-place",
        f"{ALLTOALL.name}, run 0, alltoall, 8 ranks, in-place",
    ]
    # Both float: no dtype; alltoall has no redop. One source and run: one
    # colour, placements differ by dash.
    assert lines[0].get_color() == lines[1].get_color() != lines[2].get_color()
    assert (lines[0].get_linestyle(), lines[1].get_linestyle()) == ("-", "--")


def test_selection_by_source_run_and_collective() -> None:
    result = ncclparse.parse_many([ALLTOALL, TWO_RUNS])
    ax = plot_bandwidth(result, source=str(TWO_RUNS), run=1).axes[0]
    (_, in_place) = ax.get_lines()
    rows = _rows(result.measurements, "in-place", source=str(TWO_RUNS), run=1)
    assert _x(in_place) == _floats(rows, "size_bytes")
    assert _y(in_place) == _floats(rows, "busbw_gbps")
    assert len(plot_time(result, collective="alltoall").axes[0].get_lines()) == 2
    with pytest.raises(ValueError, match=r"no measurement to plot \(run=7\)"):
        plot_bandwidth(result, run=7)


def test_no_legend_beyond_a_dozen_lines() -> None:
    text = H100.read_text()
    result = ncclparse.parse_many([(text, f"{i}.log") for i in range(7)])
    ax = plot_bandwidth(result).axes[0]
    assert len(ax.get_lines()) == 14 > LEGEND_LINES
    assert ax.get_legend() is None


def test_log_text_in_labels_is_not_mathtext() -> None:
    result = ncclparse.parse_many(
        [(H100.read_text(), "$x$.log"), (ALLTOALL.read_text(), "b.log")]
    )
    labels = [line.get_label() for line in plot_bandwidth(result).axes[0].get_lines()]
    assert str(labels[0]).startswith(r"\$x\$.log, ")


def test_notebook_doc_example_runs(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    block = code_block("notebook.md", "Example", "python")
    namespace: dict[str, object] = {}
    exec(compile(block, "docs/notebook.md", "exec"), namespace)
    # The output the example states in its comment.
    assert capsys.readouterr().out == (
        "<ParseResult: 1 source, 1 run (1 complete), 62 measurements>\n"
    )
    fig = namespace["fig"]
    assert isinstance(fig, Figure)
    left, right = fig.axes
    assert [line.get_label() for line in left.get_lines()] == [
        "out-of-place",
        "in-place",
        "ideal",
    ]
    assert right.get_ylabel() == "efficiency"
    assert (tmp_path / "all_reduce.svg").read_bytes().startswith(b"<?xml")


def test_a_pandas_table_and_a_preset_name_do_as_well() -> None:
    result = ncclparse.parse(H100)
    frame = result.measurements.to_pandas()
    lines = plot_bandwidth(frame).axes[0].get_lines()
    assert [_y(line)[-1] for line in lines] == [338.82, 337.35]  # the log's, 8 GiB
    # The preset of the A3 Mega system, named: the same ideal as its figures.
    named = plot_efficiency(frame, hardware="gcp-a3-mega").axes[0].get_lines()
    given = plot_efficiency(result, hardware=A3_MEGA).axes[0].get_lines()
    assert _y(named[0]) == pytest.approx(_y(given[0]))
    assert _y(named[0])[-1] == pytest.approx(90.35, abs=0.01)  # 338.82 / 375
