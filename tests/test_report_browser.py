"""The report page rendered by a real browser (headless Chromium): the text a person sees.

The report of ``_report_program`` (a break inside an inlined helper, a data-dependent
branch, a recompile) is written under ``build/report-test/`` and loaded from disk by
``chromium --headless --dump-dom`` (the DOM after the page's script ran); the test reads
the rendered text for the frames, the breaks with file:line and source, the recompile's
expected and actual values, graph code and decompiled code, checks the page loads
nothing from the network, and keeps a screenshot (``build/report-screenshot.png``, a CI
artifact).  Without Chromium (``apt-get install chromium``) the tests are skipped.
"""

from __future__ import annotations

import html
import pathlib
import re
import shutil
import subprocess
import tempfile

import pytest

import _report_program
import graphjit

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium not installed (apt-get install chromium): browser test skipped")

# flags that work on a machine without network or GPU (without the background-networking
# ones Chromium's own connections are refused and it stalls)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage"]


def chromium(*args: str, timeout: int = 90) -> str:
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.fixture(scope="module")
def report_dir():
    out = BUILD / "report-test"
    graphjit.reset()
    with graphjit.report.recording() as rec:
        _report_program.main()
    graphjit.report.write(out, rec)
    return out


def visible_text(dom: str) -> str:
    """The DOM's text, tags dropped (what a reader sees, hidden elements included)."""
    dom = re.sub(r"<(script|style)\b.*?</\1>", "", dom, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", dom))


def test_rendered_page_shows_what_was_compiled(report_dir):
    page = report_dir / "index.html"
    dom = chromium("--dump-dom", page.as_uri())
    text = visible_text(dom)
    src = pathlib.Path(_report_program.__file__).read_text().splitlines()
    line_of = {key: next(i for i, ln in enumerate(src, 1) if key in ln)
               for key in ("noisy_helper sees", "if b.sum() < 0")}
    # the frames, with file:line
    for name in ("toy_program", "noisy_helper", "__resume_at_"):
        assert name in text, name
    # the breaks: reason, the user's file:line, the source line, the hint
    assert "Graph break" in text and "data-dependent branch" in text
    assert f"_report_program.py:{line_of['if b.sum() < 0']}" in text
    assert f"_report_program.py:{line_of['noisy_helper sees']}" in text
    assert "if b.sum() < 0:  # a data-dependent branch" in text
    assert "Hint:" in text
    # the source line of the break is highlighted
    assert re.search(r'class="hl"><span class="ln">\s*%d</span>' % line_of["if b.sum() < 0"], dom)
    # the recompile: failing guard with expected and actual values
    assert "Recompile" in text
    assert re.search(r"expected\s+torch\.Size\(\[8\]\),\s+actual\s+torch\.Size\(\[12\]\)", text), text[:3000]
    # graph code and decompiled code
    assert "def forward(self" in text and "torch.abs(" in text
    assert "transformed code (as Python)" in text
    assert re.search(r"= __compiled_fn_\d+\.fn\(a, b\)", text)
    assert re.search(r"return __resume_at_\d+_\d+\(", text)
    # no tracker's repr anywhere on the page
    assert not re.search(r"\b[A-Z]\w*Variable\(|LazyVariableTracker", text)
    # links between graphs, breaks and compiles resolve to anchors on the page
    ids = set(re.findall(r'id="([^"]+)"', dom))
    for target in re.findall(r'href="#([^"]+)"', dom):
        assert target in ids, target


def test_filter_by_function_name_runs_in_the_browser(report_dir):
    dom = chromium("--dump-dom", (report_dir / "index.html").as_uri() + "?filter=noisy")
    frames = re.findall(r'<div class="frame" id="frame-\d+" data-name="([^"]+)"( style="display: none;")?', dom)
    assert frames, "no frames in the page"
    shown = [name for name, hidden in frames if not hidden]
    assert shown and all("noisy" in name for name in shown), frames
    assert any(hidden for _, hidden in frames)


def test_page_loads_nothing_from_the_network(report_dir):
    page = (report_dir / "index.html").read_text()
    assert not re.search(r'(src|href)\s*=\s*["\']?(https?:)?//', page)
    assert "@import" not in page and "url(" not in page


def test_screenshot_is_kept_as_an_artifact(report_dir):
    shot = BUILD / "report-screenshot.png"
    shot.unlink(missing_ok=True)
    chromium(f"--screenshot={shot}", "--window-size=1280,1400", (report_dir / "index.html").as_uri())
    assert shot.exists() and shot.stat().st_size > 10_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
