"""`dagc report RUN_DIR`: one self-contained HTML page, checked in a real headless Chromium.

The Chromium checks run where a browser is installed and are skipped, with the reason shown in pytest's
summary, where none is; `.ci/run` installs Chromium and sets DAGC_REQUIRE_BROWSER=1, which turns that
skip into a failure, so CI cannot pass without running them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from dagc.profile import load_run
from tests.conftest import REPO, run_dagc
from tests.interpreters import run_python
from tests.test_profile import run_local, write_sleepy

# found on PATH only, so that hiding it from PATH shows what a machine without a browser does
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or ""
REQUIRE_BROWSER = os.environ.get("DAGC_REQUIRE_BROWSER") == "1"


def dump_dom(page: Path) -> str:
    """The page's DOM after load (its scripts have run), from headless Chromium."""
    if not CHROMIUM or not Path(CHROMIUM).exists():
        reason = "no headless Chromium to run the report page's script (Debian: apt-get install chromium)"
        if REQUIRE_BROWSER:
            pytest.fail(f"{reason}; DAGC_REQUIRE_BROWSER=1 requires it")
        pytest.skip(reason)
    with tempfile.TemporaryDirectory(prefix="dagc-chromium-") as profile:
        proc = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--virtual-time-budget=5000", "--dump-dom", page.resolve().as_uri()],
            capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """A finished local run of the sleepy pipeline (placed on 2 devices) and one whose last task fails."""
    root = tmp_path_factory.mktemp("report")
    ok = write_sleepy(root / "ok")
    proc = run_local(ok, root / "ok" / "run", "--cluster", "2")
    assert proc.returncode == 0, proc.stderr
    bad = write_sleepy(root / "bad", fail=True)
    proc = run_local(bad, root / "bad" / "run")
    assert proc.returncode != 0 and "total refuses to add" in proc.stderr
    return {"ok": root / "ok", "bad": root / "bad"}


def test_report_page_is_self_contained(runs, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    proc = run_dagc("report", str(runs["ok"] / "run"), "--ir", str(runs["ok"] / "sleepy.py"), "--cluster", "2",
                    "-o", str(page))
    assert proc.returncode == 0, proc.stderr
    text = page.read_text()
    # the partitioned graph (inline SVG from dot), both timelines, the table, the failures section
    assert "<title>cluster_device_0</title>" in text and "legend" in text
    assert "measured run" in text and "estimated schedule of `sleepy`" in text
    assert 'id="tasks"' in text and 'id="failures"' in text
    # nothing is fetched: no external scripts, styles, images or links
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', text)
    assert "<link" not in text and "@import" not in text


def test_report_in_headless_chromium_sorts_the_task_table(runs, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    assert run_dagc("report", str(runs["ok"] / "run"), "--ir", str(runs["ok"] / "sleepy.py"), "--cluster", "2",
                    "-o", str(page)).returncode == 0
    dom = dump_dom(page)
    # the page's script ran: the table is marked sorted, longest measured task first
    assert re.search(r'<table class="tasks" id="tasks"[^>]*data-sorted="measured-desc"', dom)
    order = re.findall(r'<tr data-task="([^"]+)"', dom)
    run = load_run(runs["ok"] / "run")
    expected = sorted(run.tasks, key=lambda t: -(run.tasks[t].duration or 0))
    assert order == expected and order[0] == "double"
    assert 'class="sorted-desc"' in dom or "sorted-desc" in dom
    assert "<svg" in dom and "device 1" in dom


def test_report_shows_failures_with_tracebacks(runs) -> None:
    proc = run_dagc("report", str(runs["bad"] / "run"), "--ir", str(runs["bad"] / "sleepy.py"))
    assert proc.returncode == 0, proc.stderr
    text = (runs["bad"] / "run" / "report.html").read_text()
    assert "total — attempt 1: RuntimeError: total refuses to add" in text
    assert 'class="traceback"' in text and "Traceback (most recent call last)" in text
    assert '<span class="failed">failed</span>' in text
    dom = dump_dom(runs["bad"] / "run" / "report.html")
    assert "data-sorted=\"measured-desc\"" in dom


def test_report_without_ir_shows_the_run(runs, tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    proc = run_dagc("report", str(runs["ok"] / "run"), "-o", str(page))
    assert proc.returncode == 0 and "no IR" in proc.stderr
    assert "measured run" in page.read_text() and "Partitioned graph" not in page.read_text()
    proc = run_dagc("-q", "report", str(runs["ok"] / "run"), "-o", str(page))
    assert proc.returncode == 0 and proc.stderr == ""


def test_report_of_a_missing_run_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_dagc("report", str(tmp_path))
    assert proc.returncode == 2 and "no event log" in proc.stderr


@pytest.mark.slow
def test_report_of_a_torch_run(tmp_path: Path) -> None:
    """A real torch.distributed run (2 gloo ranks on the CPU) of the quickstart, then its report."""
    program = tmp_path / "quickstart_torch.py"
    proc = run_dagc("emit", "samples/quickstart.py", "--backend", "torch", "--cluster", "2", "-o", str(program))
    if proc.returncode != 0:
        pytest.fail(f"the torch backend could not emit the quickstart: {proc.stderr[-1000:]}")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = run_python([str(program), "--run-dir", str(tmp_path / "run")], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = tmp_path / "report.html"
    proc = run_dagc("report", str(tmp_path / "run"), "--ir", "samples/quickstart.py", "--cluster", "2",
                    "--backend", "torch", "-o", str(page))
    assert proc.returncode == 0, proc.stderr
    dom = dump_dom(page)
    order = re.findall(r'<tr data-task="([^"]+)"', dom)
    assert order[0] == "train" and len(order) == 8
    assert "rank 0" in dom and "rank 1" in dom
