"""The comparison page in headless Chromium at a laptop and a phone width: no page
scroll sideways, the chart whole and in view, no console error, no request.

Uses the DevTools harness of tests/test_report_browser.py (skips without chromium).
Screenshots go to ``tmp_path`` (and ``NCCLPARSE_ARTIFACTS`` when set).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ncclparse.cli.app import cli
from tests import _derive as derive

from . import test_report_browser as harness
from .test_report_browser import DevTools, _problems, open_page

browser = harness.browser  # the fixture: one headless Chromium for the module
pytestmark = harness.pytestmark  # the slow set; skips without chromium

GIB = 2**30


def _page(tmp_path: Path) -> Path:
    """A real log against itself with 256 MiB and up 25 % slower (busbw -20 %)."""
    candidate = tmp_path / "candidate.log"
    candidate.write_text(
        derive.scale(derive.healthy(), lambda s: 1.25 if s >= 2**28 else 1.0)
    )
    page = tmp_path / "compare.html"
    result = CliRunner().invoke(
        cli,
        ["compare", str(derive.HEALTHY), str(candidate), "-o", str(page)],
    )
    assert result.exit_code == 0, result.output
    return page


@pytest.mark.parametrize("width", [1400, 390])
def test_compare_page_fits_and_shows_its_chart(
    browser: DevTools, tmp_path: Path, width: int
) -> None:
    page = _page(tmp_path)
    facts = open_page(browser, page, tmp_path, width, media=("screen",))
    assert _problems(facts["events"], page) == []
    assert facts["scripts"] == 0
    # No horizontal page scroll: the wide table scrolls in its own box.
    assert facts["width"] <= width
    if width >= 1400:  # and at laptop width, the table needs no scrolling either
        assert facts["hidden"] == [0]
    [(chart_width, height, left, right)] = facts["svgs"]
    assert left >= 0
    assert right <= facts["inner"]  # the whole chart in view, not cut
    assert chart_width > min(300, width - 60)
    assert height > 0.6 * chart_width  # scaled as a whole, not squeezed
    assert "Baseline\n" in facts["text"] or "Baseline\t" in facts["text"]
    assert "candidate.log" in facts["text"]
    assert facts["screenshots"]["screen"].stat().st_size > 10_000
