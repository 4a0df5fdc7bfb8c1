"""Inputs and history in object storage: a real S3-compatible server (moto's
standalone server, started here on 127.0.0.1), reached through pyarrow's S3 file
system exactly as a user's ``s3://`` URI is."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest
from click.testing import CliRunner

from ncclparse.cli.app import cli
from ncclparse.store import history
from ncclparse.store.locations import Location
from tests import _derive as derive
from tests._compaction import (
    KILL_STEPS,
    compact_in_child,
    kill_compaction,
    make_history,
    rows_of,
)
from tests._docs import code_block

pytest.importorskip("moto", reason="moto[server] (the test extra) runs the S3 server")
if not hasattr(pafs, "S3FileSystem"):
    pytest.skip("this pyarrow was built without S3", allow_module_level=True)

A3_MEGA = ["--profile", "h100", "--inter-bw", "200GB/s"]
BUCKET = "fleet"
TODAY = dt.datetime.now(dt.UTC).date()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """A moto S3 server on 127.0.0.1: yields its ``host:port``."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    pytest.fail("the moto S3 server did not start")
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def s3(
    server: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[tuple[pafs.S3FileSystem, str]]:
    """An empty bucket; yields its file system and the query of its URIs."""
    for name, value in (
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ):
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)  # a URI taken for a path would make ./s3: here
    fs = pafs.S3FileSystem(
        endpoint_override=server,
        scheme="http",
        region="us-east-1",
        allow_bucket_creation=True,
        allow_bucket_deletion=True,
    )
    fs.create_dir(BUCKET)
    yield fs, f"endpoint_override={server}&scheme=http&region=us-east-1"
    fs.delete_dir(BUCKET)


def _upload(fs: pafs.S3FileSystem, key: str, text: str) -> None:
    with fs.open_output_stream(f"{BUCKET}/{key}") as stream:
        stream.write(text.encode())


def _night(seed: int, factor: float = 1.0) -> str:
    jitter = derive.jitter(seed)
    return derive.scale(derive.healthy(), lambda s: jitter(s) * factor)


def _objects(fs: pafs.S3FileSystem, prefix: str) -> list[str]:
    selector = pafs.FileSelector(
        f"{BUCKET}/{prefix}", recursive=True, allow_not_found=True
    )
    found = fs.get_file_info(selector)
    return sorted(i.path for i in found if i.type == pafs.FileType.File)


@pytest.mark.slow
def test_nightly_cycle_on_s3(s3: tuple[pafs.S3FileSystem, str], tmp_path: Path) -> None:
    fs, query = s3
    runner = CliRunner()
    hist = f"s3://{BUCKET}/history?{query}"
    for night in range(1, 7):
        _upload(fs, f"logs/night{night}/a3/all_reduce.log", _night(night))
        _upload(fs, f"logs/night{night}/report.html", "<html>not a log</html>")
    for night in range(1, 7):
        logs = f"s3://{BUCKET}/logs/night{night}/?{query}"
        first = ["--first-night"] if night == 1 else []
        checked = runner.invoke(
            cli, ["check", logs, "--history", hist, "-q", *A3_MEGA, *first]
        )
        assert checked.exit_code == 0, checked.output
        assert (
            f"Note: {logs}: skipped 1 file that is not a log (HTML: 1): "
            f"s3://{BUCKET}/logs/night{night}/report.html"
        ) in checked.stderr
        date = (TODAY - dt.timedelta(days=7 - night)).isoformat()
        added = runner.invoke(cli, ["ingest", logs, "--history", hist, "--date", date])
        assert added.exit_code == 0, added.output
        assert added.stderr.endswith(
            f"{hist}: 1 added (62 rows), 0 already present, 0 without measurements\n"
        )
    assert not (tmp_path / "s3:").exists()
    written = _objects(fs, "history")
    assert len(written) == 6
    assert all(p.endswith(".parquet") and "/date=" in p for p in written)
    # The same log again is skipped: idempotent without a lock.
    logs = f"s3://{BUCKET}/logs/night6/?{query}"
    again = runner.invoke(cli, ["ingest", logs, "--history", hist, "-q"])
    assert again.stderr.endswith("0 added (0 rows), 1 already present, 0 without "
                                 "measurements\n")  # fmt: skip
    # A degraded night fails against the history kept in the bucket.
    _upload(fs, "logs/night7/all_reduce.log", _night(7, factor=1.3))
    logs = f"s3://{BUCKET}/logs/night7/?{query}"
    slow = runner.invoke(cli, ["check", logs, "--history", hist, "-q", *A3_MEGA])
    assert slow.exit_code == 1, slow.output
    assert "regression beyond history noise" in slow.output
    table = history.read_history(hist)
    assert table.num_rows == 6 * 62
    # compare takes the history in the bucket as one side.
    compared = runner.invoke(cli, ["compare", hist, logs, "--format", "json"])
    assert compared.exit_code == 0, compared.output
    assert '"verdict": "regression"' in compared.output
    assert (
        min(str(d) for d in table["date"].to_pylist())
        == (TODAY - dt.timedelta(days=6)).isoformat()
    )


@pytest.mark.slow
def test_a_missing_history_on_s3_is_the_first_night_or_a_usage_error(
    s3: tuple[pafs.S3FileSystem, str],
) -> None:
    fs, query = s3
    _upload(fs, "logs/all_reduce.log", _night(1))
    logs = f"s3://{BUCKET}/logs/all_reduce.log?{query}"
    hist = f"s3://{BUCKET}/nothing-yet?{query}"
    runner = CliRunner()
    missing = runner.invoke(cli, ["check", logs, "--history", hist, "-q", *A3_MEGA])
    assert missing.exit_code == 2
    assert (
        f"{hist}: history directory not found (on the first night, before `ingest` "
        "has created it, pass --first-night)"
    ) in missing.stderr
    first = runner.invoke(
        cli, ["check", logs, "--history", hist, "--first-night", "-q", *A3_MEGA]
    )
    assert first.exit_code == 0, first.output
    assert _objects(fs, "nothing-yet") == []  # reading creates nothing


@pytest.mark.slow
def test_compact_on_s3_keeps_every_row(s3: tuple[pafs.S3FileSystem, str]) -> None:
    fs, query = s3
    hist = f"s3://{BUCKET}/h?{query}"
    at = dt.datetime(2026, 3, 1, 2, tzinfo=dt.UTC)
    import ncclparse

    for seed in (1, 2, 3):  # three ingests on one night: three objects
        result = ncclparse.parse(io.StringIO(_night(seed)), name=f"n{seed}.log")
        history.ingest(result, hist, now=at + dt.timedelta(minutes=seed))
    before = history.read_history(hist)
    assert len(_objects(fs, "h")) == 3
    done = CliRunner().invoke(cli, ["history", "compact", "--history", hist])
    assert done.exit_code == 0, done.output
    assert done.stderr == (
        f"{hist}: 1 partition(s) compacted, 3 files into 1 ({before.num_rows} rows)\n"
    )
    (merged,) = _objects(fs, "h")
    assert "/date=2026-03-01/compacted-" in merged
    after = history.read_history(hist)
    key = ["ingest_key", "run", "size_bytes", "placement"]
    assert after.sort_by([(k, "ascending") for k in key]).equals(
        before.sort_by([(k, "ascending") for k in key])
    )


@pytest.fixture
def unreachable(monkeypatch: pytest.MonkeyPatch) -> str:
    """An s3:// history whose endpoint refuses connections (nothing listens there)."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    query = f"endpoint_override=127.0.0.1:{_free_port()}&scheme=http&region=us-east-1"
    return f"s3://{BUCKET}/h?{query}"


def _one_line_naming(done: Any, store: str) -> None:
    """Exit 4 (infrastructure), one line on stderr naming the store, no traceback."""
    assert done.exit_code == 4, done.output
    assert done.stderr.startswith(f"Error: {store}: ")
    assert len(done.stderr.splitlines()) == 1
    assert "Traceback" not in done.output


@pytest.mark.slow
def test_an_unreachable_object_store_is_an_infrastructure_error(
    unreachable: str, tmp_path: Path
) -> None:
    log = tmp_path / "all_reduce.log"
    log.write_text(_night(1))
    done = CliRunner().invoke(cli, ["ingest", str(log), "--history", unreachable, "-q"])
    _one_line_naming(done, unreachable)
    compacted = CliRunner().invoke(
        cli, ["history", "compact", "--history", unreachable]
    )
    _one_line_naming(compacted, unreachable)


@pytest.mark.slow
def test_check_against_an_unreachable_object_store_replaces_a_passed_night(
    unreachable: str, tmp_path: Path
) -> None:
    """Yesterday's passing outputs are replaced by failing ones naming the store:
    a monitor must not keep reading "passed" when tonight could not be judged."""
    log = tmp_path / "all_reduce.log"
    log.write_text(_night(1))
    out = {k: tmp_path / f"out.{k}" for k in ("json", "prom", "xml")}
    options = ["--json", str(out["json"]), "--prometheus", str(out["prom"]),
               "--junit", str(out["xml"])]  # fmt: skip
    passed = CliRunner().invoke(cli, ["check", str(log), "-q", *A3_MEGA, *options])
    assert passed.exit_code == 0, passed.output
    assert "ncclparse_check_passed 1\n" in out["prom"].read_text()
    done = CliRunner().invoke(
        cli, ["check", str(log), "--history", unreachable, *A3_MEGA, *options]
    )
    _one_line_naming(done, unreachable)
    assert done.stdout == ""
    message = done.stderr.removeprefix("Error: ").rstrip("\n")
    report = json.loads(out["json"].read_text())
    assert (report["status"], report["error"]) == ("fail", message)
    assert "ncclparse_check_passed 0\n" in out["prom"].read_text()
    assert 'errors="1"' in out["xml"].read_text()


def test_an_unknown_uri_scheme_is_refused_clearly(tmp_path: Path) -> None:
    log = tmp_path / "all_reduce.log"
    log.write_text(_night(1))
    done = CliRunner().invoke(
        cli, ["ingest", str(log), "--history", "nosuch://bucket/h", "-q"]
    )
    assert done.exit_code == 2  # a usage error: nothing was read
    assert done.stderr.endswith(
        ": nosuch://bucket/h: unknown URI scheme 'nosuch' (one of s3://, gs://, "
        "gcs://, abfs://, abfss://, hdfs://, viewfs://, file://)\n"
    )
    assert not (tmp_path / "nosuch:").exists()
    assert os.listdir(tmp_path) == ["all_reduce.log"]


@pytest.mark.slow
def test_the_documented_object_store_recipe_runs(
    s3: tuple[pafs.S3FileSystem, str], server: str, tmp_path: Path
) -> None:
    fs, _ = s3
    block = code_block(
        "nightly.md", "The history: where it lives, locks, a year of it", "console"
    )
    # The $ lines without the prompt, with their continuation lines (no output).
    script = "".join(
        line[2:] if line.startswith("$ ") else line
        for line in block.splitlines(keepends=True)
    )
    script = script.replace("minio.lan:9000", server)
    assert "s3://nccl/" in script
    fs.create_dir("nccl")
    try:
        with fs.open_output_stream("nccl/logs/2026-11-20/a3/all_reduce.log") as out:
            out.write(_night(1).encode())
        (tmp_path / "out").mkdir()
        env = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        }
        # Night one: no history yet, so check says so (exit 2) and ingest makes it.
        done = subprocess.run(
            [
                "sh",
                "-ec",
                script.replace(
                    "--tag cluster=a3 --junit", "--first-night --tag cluster=a3 --junit"
                ),
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "out" / "junit.xml").read_text().startswith("<?xml")
        assert ": 1 added (62 rows)" in done.stderr
        written = fs.get_file_info(pafs.FileSelector("nccl/history", recursive=True))
        assert [
            i.base_name.endswith(".parquet")
            for i in written
            if i.type == pafs.FileType.File
        ] == [True]
        # Night two, the recipe as written: a history to judge against now.
        again = subprocess.run(
            ["sh", "-c", script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert "history directory not found" not in again.stderr
        assert again.returncode in (0, 1), again.stderr  # judged, not broken
        assert ": 0 added (0 rows), 1 already present" in again.stderr
    finally:
        fs.delete_dir("nccl")


@pytest.mark.slow
def test_a_compaction_killed_at_any_step_on_s3_loses_and_doubles_nothing(
    s3: tuple[pafs.S3FileSystem, str],
) -> None:
    fs, query = s3
    for step in KILL_STEPS:
        hist = f"s3://{BUCKET}/{step.replace(':', '')}?{query}"
        before = make_history(hist)
        kill_compaction(hist, step)
        night = [p for p in _objects(fs, step.replace(":", "")) if "03-01" in p]
        merged = [p for p in night if "/compacted-" in p]
        # Killed before the upload: nothing published; after: the merged object
        # beside those not yet removed.
        published = 0 if step == "write" else 1
        removed = 0 if step == "write" else int(step.split(":")[1])
        assert (len(night), len(merged)) == (4 + published - removed, published)
        assert rows_of(hist).equals(before), step
        history.compact(hist)
        assert len(_objects(fs, step.replace(":", ""))) == 2  # one file a night
        assert rows_of(hist).equals(before), step


@pytest.mark.slow
def test_two_compactions_at_once_on_s3(s3: tuple[pafs.S3FileSystem, str]) -> None:
    fs, query = s3
    hist = f"s3://{BUCKET}/h?{query}"
    before = make_history(hist)
    both = [compact_in_child(hist) for _ in range(2)]
    for child in both:
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
    assert rows_of(hist).equals(before)
    history.compact(hist)
    assert len(_objects(fs, "h")) == 2  # one file a night
    assert rows_of(hist).equals(before)


@pytest.mark.slow
def test_a_compaction_while_another_removes_files_on_s3(
    s3: tuple[pafs.S3FileSystem, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One compaction runs whole between another's writing its merged object and
    removing the objects it replaced (objects already gone are no error)."""
    fs, query = s3
    hist = f"s3://{BUCKET}/h?{query}"
    before = make_history(hist)
    original = Location.delete
    started: list[history.CompactReport] = []
    running: list[bool] = []

    def delete(self: Location, path: str) -> None:
        if not running:
            running.append(True)
            started.append(history.compact(hist))
        original(self, path)

    monkeypatch.setattr(Location, "delete", delete)
    outer = history.compact(hist)
    assert [len(replaced) for _, replaced, _ in started[0].merged] == [5]
    assert [len(replaced) for _, replaced, _ in outer.merged] == [4]
    assert len(_objects(fs, "h")) == 2
    assert rows_of(hist).equals(before)
