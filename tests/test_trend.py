"""The trend page: a history of seven nights built with `ncclparse ingest`, the sixth
night 1.5x slower. The flagged night, the band and the night values are checked
against numbers worked out from the log's printed times; the page against its bytes
and, in Chromium, at desktop and phone widths."""

from __future__ import annotations

import hashlib
import re
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ncclparse.cli.app import cli
from ncclparse.formatting import format_gbps
from ncclparse.health.rules import HistoryPolicy
from ncclparse.report.trend import render_trend, trend_of, trend_page
from tests import _derive as derive
from tests.test_report_browser import CHROMIUM, browser

__all__ = ["browser"]  # the Chromium fixture, shared with the report's browser tests

NIGHTS = [f"2026-03-0{d}" for d in range(1, 8)]
# Per night, the factor its log's times are scaled by; night 6 is degraded.
FACTORS = [1.00, 1.02, 0.98, 1.01, 0.99, 1.5, 1.005]
DEGRADED = "2026-03-06"
# The real log's three largest sizes and their printed times (us), out-of-place and
# in-place (tests/fixtures/nccl/repo-ztan-a3mega_allreduce_16rank_2node_h100_...).
TIMES = {
    8589934592: (47535.0, 47743.0),
    4294967296: (24361.0, 24365.0),
    2147483648: (12646.0, 12641.0),
}
BUSBW_FACTOR = 2 * 15 / 16  # all_reduce on 16 ranks


def _printed(time_us: float, factor: float) -> float:
    """The time derive.scale prints for ``time_us`` x ``factor`` (>= 10 ms: %.0f)."""
    return float(f"{time_us * factor:.0f}")


def _busbw(size: int, time_us: float) -> float:
    """busbw in GB/s from size and time, as nccl-tests and ncclparse compute it."""
    return size / (time_us * 1e-6) / 1e9 * BUSBW_FACTOR


def _expected(size: int, placement: int, night: int) -> float:
    return _busbw(size, _printed(TIMES[size][placement], FACTORS[night]))


def _constant(factor: float) -> Callable[[int], float]:
    return lambda _size: factor


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Seven nights, one log each, ingested with cluster=a on its night's date."""
    root = tmp_path_factory.mktemp("trend")
    directory = root / "history"
    runner = CliRunner()
    for night, (date, factor) in enumerate(zip(NIGHTS, FACTORS, strict=True)):
        log = root / f"night{night + 1}.log"
        log.write_text(derive.scale(derive.healthy(), _constant(factor)))
        done = runner.invoke(
            cli,
            [
                "ingest",
                str(log),
                "--history",
                str(directory),
                "--tag",
                "cluster=a",
                "--date",
                date,
                "-q",
            ],
        )
        assert done.exit_code == 0, done.output
    return directory


def test_the_printed_times_are_those_of_the_log() -> None:
    text = derive.healthy()
    for size, (out_of_place, in_place) in TIMES.items():
        row = re.search(rf"^\s+{size}\s.*$", text, re.M)
        assert row is not None
        fields = row.group(0).split()
        assert (float(fields[5]), float(fields[9])) == (out_of_place, in_place)


def test_the_degraded_night_alone_is_flagged(history: Path) -> None:
    found = trend_of(history, tags={"cluster": "a"})
    points = found.points
    assert sorted(points["placement"].unique()) == ["in-place", "out-of-place"]
    assert sorted(points["size_bytes"].unique()) == sorted(TIMES)
    flagged = points[points["flagged"]]
    # Both placements at each of the three sizes, on night 6 only.
    assert sorted(set(flagged["date"])) == [DEGRADED]
    assert len(flagged) == 6
    # Nights 1-5 have fewer than min_runs (5) earlier runs: no band, never flagged.
    early = points[points["date"] < "2026-03-06"]
    assert early["base_median"].isna().all()
    assert list(early["base_runs"].drop_duplicates().sort_values()) == [0, 1, 2, 3, 4]


def test_night_values_and_band_match_the_printed_times(history: Path) -> None:
    policy = HistoryPolicy()
    found = trend_of(history, tags={"cluster": "a"}, policy=policy)
    points = found.points.set_index(["placement", "size_bytes", "date"])
    for placement_index, placement in enumerate(("out-of-place", "in-place")):
        for size in TIMES:
            for night, date in enumerate(NIGHTS):
                row = points.loc[(placement, size, date)]  # type: ignore[index]
                value = _expected(size, placement_index, night)
                assert row["busbw"] == pytest.approx(value, rel=1e-12)
                if night < policy.min_runs:
                    continue
                earlier = [_expected(size, placement_index, n) for n in range(night)]
                median = statistics.median(earlier)
                mad = statistics.median(abs(v - median) for v in earlier)
                allowed = max(4.0 * 1.4826 * mad, 0.05 * median)
                assert row["base_runs"] == night
                assert row["base_median"] == pytest.approx(median, rel=1e-12)
                assert row["base_mad"] == pytest.approx(mad, rel=1e-9, abs=1e-12)
                assert row["lower"] == pytest.approx(median - allowed, rel=1e-12)
                assert row["upper"] == pytest.approx(median + allowed, rel=1e-12)
                assert bool(row["flagged"]) == (date == DEGRADED)


def test_the_window_keeps_only_the_most_recent_runs(history: Path) -> None:
    policy = HistoryPolicy(window=3, min_runs=2)
    points = trend_of(history, policy=policy).points
    row = points[
        (points["placement"] == "out-of-place")
        & (points["size_bytes"] == 8589934592)
        & (points["date"] == "2026-03-07")
    ].iloc[0]
    earlier = [_expected(8589934592, 0, n) for n in (3, 4, 5)]  # nights 4, 5, 6
    assert row["base_runs"] == 3
    assert row["base_median"] == pytest.approx(statistics.median(earlier), rel=1e-12)


def test_several_runs_a_night_fill_the_window_newest_first(tmp_path: Path) -> None:
    """Three logs a night: a night's value is the median of its three runs, and a
    window of 5 keeps the previous night's 3 runs and the 2 of the night before
    whose ingest keys (SHA-256 of the log) sort last (same date, same ingest)."""
    directory = tmp_path / "history"
    factors = {1: (1.00, 1.04, 0.96), 2: (1.10, 1.12, 1.08), 3: (1.0, 1.01, 0.99)}
    keyed: dict[int, list[tuple[str, float]]] = {}
    for night, night_factors in factors.items():
        logs = []
        for k, factor in enumerate(night_factors):
            log = tmp_path / f"n{night}-{k}.log"
            log.write_text(derive.scale(derive.healthy(), _constant(factor)))
            logs.append(str(log))
            digest = hashlib.sha256(log.read_bytes()).hexdigest()
            keyed.setdefault(night, []).append((digest, factor))
        date = f"2026-04-0{night}"
        arguments = ["ingest", *logs, "--history", str(directory), "--date", date]
        done = CliRunner().invoke(cli, [*arguments, "-q"])
        assert done.exit_code == 0, done.output
    policy = HistoryPolicy(window=5, min_runs=2)
    points = trend_of(directory, policy=policy).points
    at = points[
        (points["placement"] == "out-of-place") & (points["size_bytes"] == 8589934592)
    ].set_index("date")

    def bw(factor: float) -> float:
        return _busbw(8589934592, _printed(TIMES[8589934592][0], factor))

    assert at.loc["2026-04-01", "busbw"] == pytest.approx(bw(1.00), rel=1e-12)
    assert at.loc["2026-04-02", "runs"] == 3
    newest_first = [f for _, f in sorted(keyed[1])][-2:] + list(factors[2])
    assert at.loc["2026-04-03", "base_runs"] == 5
    expected = statistics.median(bw(f) for f in newest_first)
    assert at.loc["2026-04-03", "base_median"] == pytest.approx(expected, rel=1e-12)


def test_a_uri_reads_as_the_directory(history: Path) -> None:
    by_uri = trend_of(history.as_uri()).points
    by_path = trend_of(history).points
    assert by_uri.equals(by_path)


def test_fewer_sizes_follow_the_largest(history: Path) -> None:
    points = trend_of(history, sizes=1).points
    assert set(points["size_bytes"]) == {8589934592}


def test_the_page_has_a_chart_per_series_and_the_flagged_nights(
    history: Path, tmp_path: Path
) -> None:
    output = tmp_path / "trend.html"
    done = CliRunner().invoke(
        cli,
        ["trend", "--history", str(history), "--tag", "cluster=a", "-o", str(output)],
    )
    assert done.exit_code == 0, done.output
    assert done.output == f"{output}: 2 series over 7 night(s), 6 flagged point(s)\n"
    page = output.read_text()
    assert "<script" not in page
    assert "http://" not in page.replace("http://www.w3.org/", "")
    assert page.count("<svg ") == 2
    assert "nccl-tests all_reduce float32 sum out-of-place 16 ranks on 2 nodes" in page
    # The contents count nights, not the points of that night.
    assert (
        page.count(
            "<strong>1 night flagged</strong> (3 sizes below the band) of 7 night(s)"
        )
        == 2
    )
    # The flagged rows: night 6 at each size, with the change from the median.
    rows = re.findall(r"<tr><td>(2026-03-0\d)</td><td class=\"num\">([^<]+)</td>", page)
    assert rows == [(DEGRADED, s) for s in ("8 GiB", "4 GiB", "2 GiB")] * 2
    # The first row (in-place, 8 GiB) in full: busbw, change, median and limit.
    value = _expected(8589934592, 1, 5)
    earlier = [_expected(8589934592, 1, n) for n in range(5)]
    median = statistics.median(earlier)
    mad = statistics.median(abs(v - median) for v in earlier)
    limit = median - max(4.0 * 1.4826 * mad, 0.05 * median)
    busbw = (
        f'<td class="num">{format_gbps(value)}<br><span class="muted">'
        f"{(value / median - 1) * 100:+.1f} %</span></td>\n"
    )
    band = (
        f'<td class="num">{format_gbps(median)}<br><span class="muted">'
        f"{format_gbps(limit)}</span></td>"
    )
    # One run a night, so its own past is the series': the same figures, named.
    cells = f"{busbw}{band}\n<td>ztan-mig-235z_ztan-mig-gq73</td>\n{busbw}{band}\n</tr>"
    assert cells in page
    assert "224.9 GB/s" in cells


def test_the_same_history_gives_the_same_bytes(history: Path) -> None:
    first = render_trend(trend_page(trend_of(history)))
    second = render_trend(trend_page(trend_of(history)))
    assert first == second


def test_no_run_with_the_tags_names_what_the_history_holds(history: Path) -> None:
    done = CliRunner().invoke(
        cli,
        ["trend", "--history", str(history), "--tag", "cluster=b", "-o", "x.html"],
    )
    assert done.exit_code == 1
    assert done.output == (
        f"Error: nothing to draw (no run with the --tag values): {history} holds 7 "
        "run(s) on 7 date(s) from 2026-03-01 to 2026-03-07, 0 of them with "
        "cluster=b (it holds cluster: a in 7 run(s))\n"
    )


def test_an_empty_history_has_nothing_to_draw(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = CliRunner().invoke(
        cli, ["trend", "--history", str(tmp_path / "empty"), "-o", "x.html"]
    )
    assert done.exit_code == 1
    assert done.output == (
        f"Error: nothing to draw: {tmp_path / 'empty'} holds no run\n"
    )


def test_a_missing_history_is_a_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    done = CliRunner().invoke(cli, ["trend", "--history", str(missing), "-o", "x.html"])
    assert done.exit_code == 2
    assert f"Error: {missing}: history directory not found" in done.output


def test_an_unreadable_history_is_infrastructure(history: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(history, copy)
    (copy / "date=2026-03-02" / "broken.parquet").write_bytes(b"not parquet")
    done = CliRunner().invoke(cli, ["trend", "--history", str(copy), "-o", "x.html"])
    assert done.exit_code == 4
    assert done.output.startswith(f"Error: {copy}: cannot read history: ")
    assert "broken.parquet is not a readable Parquet file" in done.output


@pytest.mark.parametrize("where", ["no-such-directory/trend.html", "a-directory"])
def test_a_page_that_cannot_be_written_is_infrastructure(
    history: Path, tmp_path: Path, where: str
) -> None:
    output = tmp_path / where
    (tmp_path / "a-directory").mkdir()  # was a usage error (exit 2) before writing
    done = CliRunner().invoke(
        cli, ["trend", "--history", str(history), "-o", str(output)]
    )
    assert done.exit_code == 4
    assert done.output.startswith(f"Error: {output}: cannot write: ")


# --- in Chromium, at desktop and phone widths -------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
@pytest.mark.parametrize("width", [1400, 390])
def test_the_page_fits_desktop_and_phone(
    browser: Any, history: Path, tmp_path: Path, width: int
) -> None:
    from tests.test_report_browser import _problems, open_page

    page = tmp_path / "trend.html"
    page.write_text(render_trend(trend_page(trend_of(history))), encoding="utf-8")
    facts = open_page(browser, page, tmp_path, width, media=("screen",))
    assert _problems(facts["events"], page) == []
    assert facts["scripts"] == 0
    assert facts["inner"] == width
    assert facts["width"] <= width  # no horizontal scroll of the page
    assert len(facts["svgs"]) == 2
    for _, height, left, right in facts["svgs"]:
        assert left >= 0
        assert right <= width
        assert height > 200
    assert facts["screenshots"]["screen"].stat().st_size > 10_000
