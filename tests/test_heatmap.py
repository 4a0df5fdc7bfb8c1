"""The host x host heatmap of a pairwise sweep: the real 2-node log renamed to every
pair of four hosts, the pairs with n3 twice as slow. Cells are checked against the
busbw worked out from the log's printed times; the picture against its SVG."""

from __future__ import annotations

import io
import re
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import ncclparse
from ncclparse.health.blame import blame, run_scores
from ncclparse.health.rules import BlamePolicy
from ncclparse.report.heatmap import (
    PairMatrix,
    heatmap_svg,
    is_pairwise,
    pair_matrix,
    pairwise_heatmap,
    slow_hosts,
)
from tests import _derive as derive
from tests.test_report_browser import CHROMIUM, browser

__all__ = ["browser"]  # the Chromium fixture, shared with the report's browser tests

HOSTS = ["n1", "n2", "n3", "n4"]
# The four largest sizes of the real log and their printed times (us), out-of-place
# and in-place (tests/fixtures/nccl/repo-ztan-a3mega_allreduce_16rank_2node_h100_...).
TIMES = {
    1073741824: (6759.0, 6737.4),
    2147483648: (12646.0, 12641.0),
    4294967296: (24361.0, 24365.0),
    8589934592: (47535.0, 47743.0),
}
BUSBW_FACTOR = 2 * 15 / 16  # all_reduce on 16 ranks


def _sweep(slow: str | None, hosts: list[str]) -> ncclparse.ParseResult:
    logs = derive.pairwise(hosts, slow)
    return ncclparse.parse_many((io.StringIO(text), name) for text, name in logs)


def _plateau(factor: float) -> float:
    """The median busbw of the 8 rows (4 sizes x 2 placements), from the times
    derive.scale prints for ``factor`` (>= 10 ms: %.0f; >= 100 us: %.1f)."""
    values = []
    for size, times in TIMES.items():
        for t in times:
            scaled = t * factor
            printed = float(f"{scaled:.0f}" if scaled >= 1e4 else f"{scaled:.1f}")
            values.append(size / (printed * 1e-6) / 1e9 * BUSBW_FACTOR)
    return statistics.median(values)


@pytest.fixture(scope="module")
def sweep() -> ncclparse.ParseResult:
    return _sweep("n3", HOSTS)


def test_a_pairwise_sweep_is_recognised(sweep: ncclparse.ParseResult) -> None:
    assert is_pairwise(sweep.runs)
    one = ncclparse.parse_many([derive.HEALTHY])
    assert not is_pairwise(one.runs)  # one pair: two hosts, no matrix
    three = sweep.runs.set_column(
        sweep.runs.schema.get_field_index("hosts"),
        "hosts",
        pa.array([["a", "b", "c"]] * sweep.runs.num_rows, pa.list_(pa.string())),
    )
    assert not is_pairwise(three)
    assert not is_pairwise(sweep.runs.slice(0, 0))


def test_cells_hold_the_plateau_busbw_of_each_pair(
    sweep: ncclparse.ParseResult,
) -> None:
    matrix = pair_matrix(sweep.measurements, sweep.runs)
    assert matrix.hosts == ("n1", "n2", "n3", "n4")
    assert matrix.sizes == tuple(TIMES)
    assert matrix.label == "all_reduce float32 sum 16 ranks on 2 nodes"
    healthy, slow = _plateau(1.0), _plateau(2.0)
    assert healthy == pytest.approx(324.523615384, rel=1e-9)
    expected = np.array(
        [
            [np.nan, healthy, slow, healthy],
            [healthy, np.nan, slow, healthy],
            [slow, slow, np.nan, slow],
            [healthy, healthy, slow, np.nan],
        ]
    )
    np.testing.assert_allclose(matrix.values, expected, rtol=1e-12)
    assert matrix.value("n3", "n1") == pytest.approx(slow, rel=1e-12)
    assert matrix.runs.tolist() == [
        [0, 1, 1, 1],
        [1, 0, 1, 1],
        [1, 1, 0, 1],
        [1, 1, 1, 0],
    ]


def test_a_missing_pair_is_blank(sweep: ncclparse.ParseResult) -> None:
    runs = sweep.runs.filter(
        pa.compute.not_equal(sweep.runs["source"], pa.scalar("n1-n2.log"))
    )
    matrix = pair_matrix(sweep.measurements, runs)
    assert np.isnan(matrix.value("n1", "n2"))
    assert np.isnan(matrix.value("n2", "n1"))
    assert matrix.value("n1", "n4") == pytest.approx(_plateau(1.0), rel=1e-12)


def test_the_blamed_host_is_outlined(sweep: ncclparse.ParseResult) -> None:
    ranked = blame(run_scores(sweep.measurements, sweep.runs), BlamePolicy())
    assert slow_hosts(ranked) == ("n3",)
    found = pairwise_heatmap(sweep, ranked=ranked, plot_id="hm")
    assert found is not None
    _matrix, svg = found
    assert svg.startswith('<svg role="img" aria-label="Host x host bus bandwidth: ')
    assert "slow host (blame): n3" in svg
    # The row and the column of n3 (and the legend's sample): vermillion outlines.
    outlines = re.findall(r'<path d="([^"]+)"[^>]*style="[^"]*stroke: #d55e00', svg)
    assert len(outlines) == 3
    # Row and column cross at the same cell: the row is wide and short, the column
    # tall and narrow, and both span the full matrix (4 cells of the same size).
    boxes = []
    for d in outlines[:2]:
        xs = [float(v) for v in re.findall(r"([-\d.]+) [-\d.]+", d)]
        ys = [float(v) for v in re.findall(r"[-\d.]+ ([-\d.]+)", d)]
        boxes.append((max(xs) - min(xs), max(ys) - min(ys)))
    (row_w, row_h), (col_w, col_h) = boxes
    assert row_w == pytest.approx(4 * row_h, rel=0.02)
    assert col_h == pytest.approx(4 * col_w, rel=0.02)
    # The slow pairs' value is printed in their cells (6 cells: n3's row and column).
    assert svg.count(f">{_plateau(2.0):.3g}<") == 6


def test_no_blamed_host_no_outline(sweep: ncclparse.ParseResult) -> None:
    matrix = pair_matrix(sweep.measurements, sweep.runs)
    svg = heatmap_svg(matrix, plot_id="hm")
    assert "#d55e00" not in svg
    assert "slow host" not in svg


def test_two_renders_give_the_same_bytes(sweep: ncclparse.ParseResult) -> None:
    first = pairwise_heatmap(sweep, plot_id="hm")
    second = pairwise_heatmap(sweep, plot_id="hm")
    assert first is not None
    assert second is not None
    assert first[1] == second[1]


def test_not_a_pairwise_sweep_gives_none() -> None:
    assert pairwise_heatmap(ncclparse.parse_many([derive.HEALTHY])) is None


def test_thirty_two_hosts_get_every_label() -> None:
    hosts = tuple(f"node{i:03d}" for i in range(32))
    values = np.full((32, 32), 100.0)
    np.fill_diagonal(values, np.nan)
    matrix = PairMatrix(hosts, values, np.ones((32, 32), np.int64), (1 << 30,), {}, "x")
    svg = heatmap_svg(matrix, blamed=("node007",), plot_id="big")
    for host in hosts:
        assert svg.count(f">{host}<") == 2  # a row label and a column label


def _uniform(n: int) -> PairMatrix:
    hosts = tuple(f"node{i:03d}" for i in range(n))
    values = np.full((n, n), 123.0)
    np.fill_diagonal(values, np.nan)
    return PairMatrix(hosts, values, np.ones((n, n), np.int64), (1 << 30,), {}, "x")


@pytest.mark.parametrize(
    ("hosts", "printed", "style"),
    [
        (7, 42, ""),  # cells of 0.46 in hold a value in 10 pt text
        (8, 0, ""),  # cells of 0.4 in do not: the colour remains
        (18, 0, ""),  # 18 labels of 0.17 in fit the phone-wide map
        (19, 0, ' style="min-width: 348px"'),  # (19 x 0.17 + 1.6) in = 347.76 pt
    ],
)
def test_cell_values_fit_their_cells_and_many_hosts_widen_the_map(
    hosts: int, printed: int, style: str
) -> None:
    svg = heatmap_svg(_uniform(hosts), plot_id="m")
    assert svg.count(">123<") == printed
    assert svg.startswith(f"<svg{style} role=")
    # Every text is 10 pt: labels, values, colour bar and its label.
    assert set(re.findall(r"font(?:-size)?: ([\d.]+)px", svg)) == {"10"}


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
@pytest.mark.parametrize("width", [1400, 390])
def test_the_heatmaps_fit_desktop_and_phone(
    browser: Any, sweep: ncclparse.ParseResult, tmp_path: Path, width: int
) -> None:
    """The 4-host sweep and a 32-host matrix (the real sweep's two plateau values,
    node007 slow, three pairs missing) in a bare page with the report's CSP and,
    like the report, figures that scroll in their own box. The 32-host map is
    wider than a phone: it keeps its labels at 10 px and scrolls."""
    from tests.test_report_browser import _problems, open_page

    found = pairwise_heatmap(sweep, plot_id="small")
    assert found is not None
    hosts = tuple(f"node{i:03d}" for i in range(32))
    values = np.full((32, 32), _plateau(1.0))
    values[7, :] = values[:, 7] = _plateau(2.0)
    for i, j in ((3, 20), (11, 30), (0, 31)):
        values[i, j] = values[j, i] = np.nan
    np.fill_diagonal(values, np.nan)
    big = PairMatrix(hosts, values, np.ones((32, 32), np.int64), (1 << 30,), {}, "x")
    page = tmp_path / "heatmap.html"
    page.write_text(
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\"><title>heatmap</title><style>"
        "body{margin:0 auto;max-width:80rem;padding:1rem;font-family:sans-serif}"
        "figure{margin:1rem 0;max-width:48rem;overflow-x:auto}"
        "figure svg{display:block;width:100%;height:auto}</style></head><body>"
        f"<figure>{found[1]}</figure>"
        f"<figure>{heatmap_svg(big, blamed=('node007',), plot_id='big')}</figure>"
        "</body></html>",
        encoding="utf-8",
    )
    facts = open_page(browser, page, tmp_path, width, media=("screen",))
    assert _problems(facts["events"], page) == []
    assert facts["width"] <= width
    assert len(facts["svgs"]) == 2
    for _, height, left, _right in facts["svgs"]:
        assert left >= 0
        assert height > 200
    (_, _, _, small_right), (big_width, _, _, big_right) = facts["svgs"]
    assert small_right <= width
    if width == 390:
        # 32 labels of 0.17 in and 1.6 in of labels and colour bar: 506.88 pt,
        # rounded up to whole px (1 px a point).
        assert big_width == 507
        small = [(t, round(size, 2)) for t, size in facts["fonts"] if size < 10]
        assert small == []
    else:
        assert big_right <= width


def test_the_report_of_a_pairwise_sweep_shows_the_heatmap(
    sweep: ncclparse.ParseResult,
) -> None:
    from ncclparse.report import build_context, render_report

    context = build_context(sweep)
    assert context.pairs is not None
    assert context.pairs.caption == (
        "all_reduce float32 sum 16 ranks on 2 nodes: each cell is the median busbw of "
        "the two hosts' runs at the largest sizes (1 GiB, 2 GiB, 4 GiB, 8 GiB), both "
        "placements; 6 of 6 pairs measured (blank: not measured). A host named slow "
        "has its row and column outlined."
    )
    page = render_report(context)
    assert '<div class="pairs" id="pairs">' in page
    assert "slow host (blame): n3" in page
    # Any other set of runs has none.
    alone = build_context(ncclparse.parse_many([derive.HEALTHY]))
    assert alone.pairs is None
    assert 'id="pairs"' not in render_report(alone)
