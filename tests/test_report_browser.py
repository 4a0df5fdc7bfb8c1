"""Open real reports in headless Chromium: no console error, no network, plots drawn.

Chromium is driven over the DevTools protocol on ``--remote-debugging-pipe`` (file
descriptors 3 and 4, NUL-separated JSON), so the test needs no Python dependency. It
skips when Debian's ``chromium`` is not installed (CI installs it). Screenshots (screen
and print media) go to ``tmp_path`` and, if ``NCCLPARSE_ARTIFACTS`` is set, are copied
there as test artifacts.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ncclparse import parse_many
from ncclparse.report import build_context, render_report

from . import _derive as derive
from .conftest import FIXTURES

ROOT = Path(__file__).parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# A real browser per module: in the slow set (pytest -m slow), which CI runs.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="Debian's chromium is not installed (apt-get install -y chromium)",
    ),
]
_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)
_TIMEOUT_S = 60.0
INJECTED_HOST = "<script>alert(1)</script>"


class DevTools:
    """The smallest DevTools-protocol client: send a command, wait for its reply.

    Events that arrive meanwhile are kept in :attr:`events` in arrival order.
    """

    def __init__(self, process: subprocess.Popen[bytes], write_fd: int, read_fd: int):
        self.process = process
        self._write, self._read = write_fd, read_fd
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(
        self, method: str, params: dict[str, Any] | None = None, session: str = ""
    ) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method}
        message["params"] = params or {}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return dict(reply.get("result", {}))
            self.events.append(reply)

    def wait_for(self, method: str) -> dict[str, Any]:
        for event in self.events:
            if event.get("method") == method:
                return event
        while True:
            event = self._receive()
            self.events.append(event)
            if event.get("method") == method:
                return event

    def _receive(self) -> dict[str, Any]:
        deadline = time.monotonic() + _TIMEOUT_S
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("no reply from chromium")
            chunk = os.read(self._read, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return dict(json.loads(message))


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevTools]:
    assert CHROMIUM is not None
    profile = tmp_path_factory.mktemp("chromium-profile")
    to_chrome_r, to_chrome_w = os.pipe()
    from_chrome_r, from_chrome_w = os.pipe()
    # Chromium expects its end of the pipe on fds 3 (commands) and 4 (replies); keep
    # the originals above 10 so that dup2 cannot clobber one with the other.
    high_r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
    high_w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)

    def wire_fds() -> None:
        os.dup2(high_r, 3)
        os.dup2(high_w, 4)

    process = subprocess.Popen(
        [CHROMIUM, *_FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=wire_fds,  # the test process runs no threads of its own
        pass_fds=(3, 4),
    )
    for fd in (to_chrome_r, from_chrome_w, high_r, high_w):
        os.close(fd)
    client = DevTools(process, to_chrome_w, from_chrome_r)
    try:
        yield client
    finally:
        with contextlib.suppress(RuntimeError, OSError, TimeoutError):
            client.send("Browser.close")
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        os.close(to_chrome_w)
        os.close(from_chrome_r)


def open_page(
    browser: DevTools,
    page: Path,
    artifacts: Path,
    width: int = 1280,
    media: Sequence[str] = ("screen", "print"),
) -> dict[str, Any]:
    """Load ``page`` in a fresh tab ``width`` CSS px wide; return what the page did
    and how it looks: each chart's box, the page's scroll width, the rendered size
    (CSS px) of every chart text, screenshots (the first 12,000 px: a full
    multi-run page is too tall for one image)."""
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send(
        "Target.attachToTarget", {"targetId": target, "flatten": True}
    )["sessionId"]
    browser.events.clear()
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.send(f"{domain}.enable", session=session)
    browser.send(
        "Emulation.setDeviceMetricsOverride",
        {
            "width": width,
            "height": 900,
            "deviceScaleFactor": 1,
            "mobile": width < 600,
        },
        session=session,
    )
    browser.send("Page.navigate", {"url": page.as_uri()}, session=session)
    browser.wait_for("Page.loadEventFired")
    measured = browser.send(
        "Runtime.evaluate",
        {
            "expression": """JSON.stringify({
                svgs: [...document.querySelectorAll('figure svg')].map(s => {
                    const r = s.getBoundingClientRect();
                    return [r.width, r.height, r.left, r.right]; }),
                scripts: document.scripts.length,
                text: document.body.innerText,
                width: document.documentElement.scrollWidth,
                inner: window.innerWidth,
                height: document.documentElement.scrollHeight,
                hidden: [...document.querySelectorAll('.table-wrap')].map(
                    w => w.scrollWidth - w.clientWidth),
                // A chart's text size in its SVG's units times the SVG's scale
                // on screen (rotation aside): the size it is read at.
                fonts: [...document.querySelectorAll('figure svg text')].map(t => {
                    const m = t.getScreenCTM();
                    return [t.textContent, parseFloat(getComputedStyle(t).fontSize)
                        * Math.hypot(m.a, m.b)]; }),
            })""",
            "returnByValue": True,
        },
        session=session,
    )
    facts: dict[str, Any] = json.loads(measured["result"]["value"])
    shots = {}
    for kind in media:
        browser.send("Emulation.setEmulatedMedia", {"media": kind}, session=session)
        clip = {
            "x": 0,
            "y": 0,
            "width": width,
            "height": min(facts["height"], 12_000),
            "scale": 1,
        }
        shot = browser.send(
            "Page.captureScreenshot",
            {"format": "png", "captureBeyondViewport": True, "clip": clip},
            session=session,
        )
        suffix = "" if width == 1280 else f"-{width}px"
        path = artifacts / f"{page.stem}{suffix}-{kind}.png"
        path.write_bytes(base64.b64decode(shot["data"]))
        shots[kind] = path
    browser.send("Target.closeTarget", {"targetId": target})
    facts["events"] = list(browser.events)
    facts["screenshots"] = shots
    _publish(shots.values())
    return facts


def _publish(paths: Any) -> None:
    target = os.environ.get("NCCLPARSE_ARTIFACTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        for path in paths:
            shutil.copy2(path, Path(target) / path.name)


def _problems(events: list[dict[str, Any]], page: Path) -> list[str]:
    """Console errors, exceptions, dialogs and any request but the page itself."""
    found = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params["type"] in {
            "error",
            "assert",
        }:
            found.append(f"console.{params['type']}: {params['args']}")
        elif method == "Runtime.exceptionThrown":
            found.append(f"exception: {params['exceptionDetails']}")
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            found.append(f"log: {params['entry']['text']}")
        elif method == "Page.javascriptDialogOpening":
            found.append(f"dialog: {params['message']}")
        elif method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            if url != page.as_uri() and not url.startswith("data:"):
                found.append(f"request: {url}")
    return found


def _report(tmp_path: Path, name: str, logs: Sequence[Path | tuple[str, str]]) -> Path:
    context = build_context(parse_many(logs), command_line=f"ncclparse report {name}")
    page = tmp_path / f"{name}.html"
    page.write_text(render_report(context), encoding="utf-8")
    return page


@pytest.mark.parametrize(
    ("name", "logs", "charts"),
    [
        ("single", [ROOT / "examples/all_reduce_16rank_2node_h100.log"], 4),
        (
            "several",
            [
                ROOT / "examples/alltoall_8gpu_a100.log",
                ROOT / "examples/all_reduce_failed_midrun.log",
                FIXTURES / "oneccl/v2021.14_allreduce_f32_np4.log",
                FIXTURES / "imb/imb_allreduce_np2.log",
            ],
            # alltoall 4 charts; failed run: no nranks, so time only (1); oneCCL and
            # IMB without a profile: bandwidth and time (2 each); overlay 1.
            4 + 1 + 2 + 2 + 1,
        ),
    ],
)
def test_report_renders_cleanly_offline(
    browser: DevTools, tmp_path: Path, name: str, logs: list[Path], charts: int
) -> None:
    page = _report(tmp_path, name, logs)
    facts = open_page(browser, page, tmp_path)
    assert _problems(facts["events"], page) == []
    assert len(facts["svgs"]) == charts
    for width, height, _, _ in facts["svgs"]:
        assert width > 300
        assert height > 100
    assert facts["scripts"] == 0
    # No horizontal page scroll at laptop width: wide tables scroll in their own box.
    assert facts["width"] <= 1280
    for path in facts["screenshots"].values():
        assert path.stat().st_size > 10_000


def test_injected_host_name_stays_inert(browser: DevTools, tmp_path: Path) -> None:
    text = (ROOT / "examples/all_reduce_16rank_2node_h100.log").read_text()
    log = text.replace("ztan-mig-gq73", INJECTED_HOST)
    page = _report(tmp_path, "injection", [(log, "<img src=x onerror=alert(2)>.log")])
    facts = open_page(browser, page, tmp_path)
    assert _problems(facts["events"], page) == []
    assert facts["scripts"] == 0
    assert f"{INJECTED_HOST} (8 ranks)" in facts["text"]
    assert "<img src=x onerror=alert(2)>.log (run 0)" in facts["text"]


ONECCL = sorted((FIXTURES / "oneccl").glob("*.log"))


@pytest.mark.parametrize("width", [1400, 390])
@pytest.mark.parametrize(
    ("name", "logs", "charts"),
    [
        ("example", [ROOT / "examples/all_reduce_16rank_2node_h100.log"], 4),
        # 86 logs, 102 series: small multiples, one per collective, instead of
        # 190 charts (see the overview test in tests/test_report_overview.py).
        ("oneccl", ONECCL, 9),
    ],
)
def test_report_fits_the_screen(
    browser: DevTools,
    tmp_path: Path,
    name: str,
    logs: list[Path],
    charts: int,
    width: int,
) -> None:
    """At a laptop's 1400 px and a phone's 390 px: no horizontal page scroll (wide
    tables scroll in their own box), every chart whole inside the viewport, no
    console error and no request."""
    page = _report(tmp_path, name, logs)
    facts = open_page(browser, page, tmp_path, width, media=("screen",))
    assert _problems(facts["events"], page) == []
    assert facts["scripts"] == 0
    assert facts["inner"] == width
    assert facts["width"] <= width
    assert len(facts["svgs"]) == charts
    for chart_width, height, left, right in facts["svgs"]:
        assert left >= 0
        assert right <= width
        # Whole, not squashed to nothing: at least 300 px wide (the width of a phone
        # less its margins); a one-row grid of small multiples is 1.4 in high.
        assert chart_width >= min(300, width - 40)
        assert height > 60
    assert facts["screenshots"]["screen"].stat().st_size > 10_000


@pytest.mark.parametrize("width", [390, 1400])
def test_chart_text_is_readable_on_a_phone(
    browser: DevTools, tmp_path: Path, width: int
) -> None:
    """Axis labels, tick labels, legends and annotations of a run's four charts are
    at least 10 px as rendered on a 390 px phone (they were 5 px to 7 px), and
    no larger than 20 px on a laptop."""
    page = _report(
        tmp_path, "phone", [ROOT / "examples/all_reduce_16rank_2node_h100.log"]
    )
    facts = open_page(browser, page, tmp_path, width, media=("screen",))
    fonts = facts["fonts"]
    texts = {text for text, _ in fonts}
    for expected in ("message size", "8 B", "measured, out-of-place", "LL128"):
        assert expected in texts
    small = [(text, round(size, 1)) for text, size in fonts if size < 10]
    assert small == []
    assert max(size for _, size in fonts) <= 20


@pytest.mark.parametrize("width", [390, 1400])
@pytest.mark.parametrize(
    ("name", "logs", "expected"),
    [
        # 102 series: small multiples; a panel's title and series, a busbw label.
        ("multiples", ONECCL, ("all_gather float32 2 ranks", "8 B", "10")),
        (
            "overlay",
            [
                ROOT / "examples/alltoall_8gpu_a100.log",
                ROOT / "examples/all_reduce_16rank_2node_h100.log",
            ],
            ("ranks on 1 node", "bus bandwidth (GB/s)", "2 GiB"),
        ),
        (
            "heatmap",
            derive.pairwise(["n1", "n2", "n3", "n4"], slow="n1"),
            ("slow host (blame): n1", "n4", "162", "plateau busbw (GB/s)"),
        ),
    ],
)
def test_every_chart_of_a_report_is_readable_on_a_phone(
    browser: DevTools,
    tmp_path: Path,
    name: str,
    logs: list[Path | tuple[str, str]],
    expected: tuple[str, ...],
    width: int,
) -> None:
    """Small multiples, the overlay of several runs and the host x host heatmap:
    every chart text at least 10 px at 390 px (they were 4.6 px, 5.6 px and 6.2 px)
    and at most 20 px at 1400 px."""
    page = _report(tmp_path, name, logs)
    facts = open_page(browser, page, tmp_path, width, media=("screen",))
    fonts = facts["fonts"]
    texts = {text for text, _ in fonts}
    for text in expected:
        assert text in texts
    assert [(text, round(size, 1)) for text, size in fonts if size < 10] == []
    assert [(text, round(size, 1)) for text, size in fonts if size > 20] == []
    assert facts["width"] <= width
