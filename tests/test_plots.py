"""Charts: deterministic SVG ready to inline, drawn from the real H100 example log."""

from __future__ import annotations

import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from ncclparse import parse
from ncclparse.efficiency import analyze
from ncclparse.report.plots import (
    OverlaySeries,
    Panel,
    bandwidth_plot,
    efficiency_plot,
    gap_plot,
    overlay_plot,
    small_multiples,
    time_plot,
)

EXAMPLE = Path(__file__).parent.parent / "examples/all_reduce_16rank_2node_h100.log"


@pytest.fixture(scope="module")
def analysed() -> tuple[pd.DataFrame, pd.DataFrame]:
    analysis = analyze(parse(EXAMPLE).measurements)
    return analysis.rows.to_pandas(), analysis.fits.to_pandas()


class _Svg(HTMLParser):
    """Element names, ids, references and text of one SVG string."""

    def __init__(self, svg: str) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.ids: list[str] = []
        self.text: list[str] = []
        self.feed(svg)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.ids += [v for k, v in attrs if k == "id" and v]

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.text.append(data.strip())


def _all(rows: pd.DataFrame, fits: pd.DataFrame, plot_id: str) -> list[str]:
    crossover = float(fits["crossover_bytes"].iloc[0])
    gaps = rows[rows["placement"] == "out-of-place"]
    return [
        bandwidth_plot(rows, fits, plot_id=f"{plot_id}-bw", crossover=crossover),
        time_plot(rows, fits, plot_id=f"{plot_id}-t", crossover=crossover),
        efficiency_plot(rows, plot_id=f"{plot_id}-eff", crossover=crossover),
        gap_plot(gaps, plot_id=f"{plot_id}-gap"),
    ]


def test_same_rows_give_the_same_bytes(
    analysed: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    rows, fits = analysed
    assert _all(rows, fits, "a") == _all(rows, fits, "a")


def test_svg_is_ready_to_inline(analysed: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    rows, fits = analysed
    for svg in _all(rows, fits, "r1"):
        assert svg.startswith('<svg role="img" aria-label="')
        assert svg.endswith("</svg>")
        for absent in (
            "<?xml",
            "<!DOCTYPE",
            "<metadata",
            "Matplotlib v",
            "font-family",
        ):
            assert absent not in svg
        assert len(svg) < 40_000


def test_ids_are_prefixed_and_unique_across_charts(
    analysed: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    rows, fits = analysed
    ids: list[str] = []
    for svg in _all(rows, fits, "r1"):
        parsed = _Svg(svg)
        ids += parsed.ids
        # Every reference points at an id of the same chart.
        for ref in re.findall(r'(?:url\(#|href="#)([^)"]+)', svg):
            assert ref in parsed.ids
    assert ids
    assert len(ids) == len(set(ids))
    prefixes = ("r1-bw-", "r1-t-", "r1-eff-", "r1-gap-")
    assert all(i.startswith(prefixes) for i in ids)


def test_bandwidth_plot_labels_sizes_and_regions(
    analysed: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    rows, fits = analysed
    svg = bandwidth_plot(rows, fits, plot_id="x", crossover=21430719.657551)
    text = _Svg(svg).text
    # Log2 axis from 8 B to 8 GiB: 31 powers of two, every seventh labelled (at most
    # five labels: the chart is as narrow as a phone shows it).
    ticks = ["8 B", "1 KiB", "128 KiB", "16 MiB", "2 GiB"]
    assert text[1 : len(ticks) + 1] == ticks  # text[0] is the style sheet
    for label in (
        "8 B",
        "2 GiB",
        "message size",
        "bus bandwidth (GB/s)",
        "latency-bound",
        "bandwidth-bound",
        "measured, out-of-place",
        "measured, in-place",
        "ideal (line rate)",
        "expected curve, out-of-place",
        "expected curve, in-place",
        "LL",
        "LL128",
        "Simple",
    ):
        assert label in text


def test_gap_plot_leaves_out_components_that_are_zero_or_unknown(
    analysed: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    rows, _ = analysed
    text = _Svg(gap_plot(rows[rows["placement"] == "out-of-place"], plot_id="g")).text
    # The h100 preset states no hardware latency and no host staging.
    assert "hardware latency" not in text
    assert "host staging" not in text
    for label in ("ideal transfer", "software latency (alpha)", "bandwidth shortfall"):
        assert label in text
    assert "share of measured time" in text


def test_overlay_labels_from_logs_are_text_not_markup_or_math() -> None:
    series = [
        OverlaySeries("<script>alert(1)</script> $x$", [8.0, 16.0], [1.0, 2.0]),
        OverlaySeries("b.log: all_reduce", [8.0, 16.0, 0.0], [1.5, 2.5, 0.0]),
    ]
    svg = overlay_plot(series, plot_id="o")
    assert "&lt;script&gt;alert(1)&lt;/script&gt; $x$" in svg
    assert "<script" not in svg
    assert "b.log: all_reduce" in _Svg(svg).text


def test_ten_long_overlay_labels_wrap_and_the_chart_grows_to_hold_them() -> None:
    label = "all_reduce_16rank_2node_h100.log (run {}): all_reduce float32 sum 16 ranks"
    series = [
        OverlaySeries(label.format(i), [8.0, 16.0], [1.0, 2.0 + i]) for i in range(10)
    ]
    # Three inches of legend on a 3.8 in chart collapsed its axes (a warning,
    # an error under the test settings) before the chart grew with its legend.
    svg = overlay_plot(series, plot_id="o")
    text = _Svg(svg).text
    assert "all_reduce_16rank_2node_h100.log (run 9): all_reduce" in text
    assert text.count("float32 sum 16 ranks") == 10
    # (2.9 in + 10 entries of 2.5 lines of 10 pt) x 72 pt/in = 508.8 pt high.
    assert 'width="345.6pt" height="508.8pt"' in svg


def test_charts_use_no_pyplot_and_cli_help_imports_no_matplotlib() -> None:
    code = (
        "import sys, ncclparse.cli.app\n"
        "assert 'matplotlib' not in sys.modules, 'cli imports matplotlib'\n"
        "import ncclparse.report.plots\n"
        "assert 'matplotlib.pyplot' not in sys.modules, 'plots imports pyplot'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def _panels() -> list[Panel]:
    return [
        Panel(
            "✓ a.log (run 0)", "all_reduce 2 ranks", "#run1-1", [8, 1024], [0.5, 4.2]
        ),
        Panel("<script>x</script> $y$", "all_reduce", "#run2-1", [8, 2048], [1, 9.0]),
        Panel("c.log (run 1)", "all_reduce", "#run3-1", [0, 8], [0, float("nan")]),
        Panel("d.log (run 0)", "all_reduce", "#run4-1", [16], [2.0]),
    ]


def test_a_long_panel_title_keeps_its_start_and_its_run_and_is_whole_as_tooltip() -> (
    None
):
    title = "! v2021.14_allgather_bufcount1_np2.log (run 12)"
    panel = Panel(title, "all_gather float32 2 ranks", "#r1", [8, 64], [1.0, 2.0])
    svg = small_multiples([panel], plot_id="sm", title="t")
    assert "! v2021.14_all…p2.log (run 12)" in _Svg(svg).text
    assert f"<title>{title}: all_gather float32 2 ranks</title>" in svg


def test_small_multiples_link_each_panel_and_share_their_scales() -> None:
    svg = small_multiples(_panels(), plot_id="sm1", title="every all_reduce")
    assert svg == small_multiples(_panels(), plot_id="sm1", title="every all_reduce")
    assert svg.startswith('<svg role="img" aria-label="every all_reduce" ')
    # Links leave the chart: they are not rewritten like references to its ids.
    assert re.findall(r'<a xlink:href="([^"]+)"', svg) == [
        "#run1-1",
        "#run2-1",
        "#run3-1",
        "#run4-1",
    ]
    assert "<script" not in svg
    assert "&lt;script&gt;x&lt;/script&gt; $y$" in svg
    text = _Svg(svg).text
    # One busbw scale, 0 to 10 (the next round number above 9.0), on the first
    # column only (rows of two panels, so both rows); sizes 8 B to 2 KiB under
    # each column's lowest panel (the second row's two).
    assert text.count("10") == 2
    assert text.count("5") == 2
    assert text.count("8 B") == 2
    assert text.count("2 KiB") == 2
    # Each link's tooltip: the panel's whole title and series.
    assert re.findall(r"<a [^>]*><title>([^<]*)</title>", svg) == [
        "✓ a.log (run 0): all_reduce 2 ranks",
        "&lt;script&gt;x&lt;/script&gt; $y$: all_reduce",
        "c.log (run 1): all_reduce",
        "d.log (run 0): all_reduce",
    ]
    assert all(i.startswith("sm1-") for i in _Svg(svg).ids)
    assert "\n" not in svg  # no indentation between elements
