"""The report's three entry points and its recording: ``python -m graphjit report``,
``GRAPHJIT_REPORT=DIR``, ``graphjit.report.write``; recording changes no result and costs
nothing on the dispatcher's hot path when off; ``GRAPHJIT_LOGS=decompiled``.
(The page itself, in a browser: ``test_report_browser.py``.)"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch

import _report_program
import graphjit
from _shared import capture_graphjit_log, check_same, toy_example
from graphjit.report import record

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGRAM = pathlib.Path(_report_program.__file__)


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    env.pop("GRAPHJIT_REPORT", None)
    return env


def test_cli_runs_the_script_and_writes_the_report(tmp_path):
    out = tmp_path / "rep"
    proc = subprocess.run([sys.executable, "-m", "graphjit", "report", "--out", str(out), str(PROGRAM), "12"],
                          capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "noisy_helper sees (12,)" in proc.stdout  # the script ran as __main__ with its argument
    summary = proc.stderr
    assert "graph breaks" in summary and "recompiles" in summary and "top break reasons" in summary
    assert str(out / "index.html") in summary
    log = json.loads((out / "graphjit_log.json").read_text())
    assert log["summary"]["recompiles"] >= 1 and log["summary"]["breaks"] >= 2
    assert (out / "index.html").read_text().startswith("<!DOCTYPE html>")


def test_cli_keeps_the_scripts_exit_status_and_default_folder(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "graphjit", "report", str(PROGRAM), "0"],
                          capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=300)
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert (tmp_path / "graphjit_report" / "index.html").exists()


def test_cli_renders_a_saved_log_again(tmp_path):
    graphjit.reset()
    with graphjit.report.recording() as rec:
        _report_program.main((8,))
    graphjit.report.write(tmp_path / "a", rec)
    proc = subprocess.run([sys.executable, "-m", "graphjit", "report", "--from", str(tmp_path / "a" / "graphjit_log.json"),
                           "--out", str(tmp_path / "b")], capture_output=True, text=True, env=_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "b" / "index.html").read_text() == (tmp_path / "a" / "index.html").read_text()


def test_environment_variable_writes_the_report_at_exit(tmp_path):
    env = _env()
    env["GRAPHJIT_REPORT"] = str(tmp_path / "envrep")
    proc = subprocess.run([sys.executable, str(PROGRAM)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = json.loads((tmp_path / "envrep" / "graphjit_log.json").read_text())
    assert {f["name"] for f in log["frames"]} >= {"toy_program", "noisy_helper"}


def test_api_write_and_its_log(tmp_path):
    graphjit.reset()
    with graphjit.report.recording() as rec:
        _report_program.main()
    log = graphjit.report.write(tmp_path, rec)
    s = log["summary"]
    assert s["graphs"] == len(log["graphs"]) and s["graphs"] >= 4
    assert s["breaks"] == len(log["breaks"]) >= 2 and s["recompiles"] >= 1
    kinds = {b["kind"] for b in log["breaks"]}
    assert {"print", "data-dependent branch"} <= kinds
    rec_ = next(c["recompile"] for c in log["compiles"] if c["recompile"])
    assert rec_["expected"] == "torch.Size([8])" and rec_["actual"] == "torch.Size([12])"
    main = next(c for c in log["compiles"] if c["name"] == "toy_program")
    assert "__compiled_fn_" in main["transformed"]["python"] and main["resumes"]
    assert all(r["python"]["python"] for r in main["resumes"])
    assert main["guards"] and main["guard_checks"] >= 1
    assert s["compile_seconds"] >= s["backend_seconds"] >= 0 and s["write_seconds"] > 0


def test_write_without_recording_says_how_to_record(tmp_path):
    assert record.active() is None
    with pytest.raises(RuntimeError, match="graphjit.report.start"):
        graphjit.report.write(tmp_path)


def test_recording_changes_no_result():
    with graphjit.report.recording():
        cnt = check_same(toy_example, torch.randn(6), -torch.ones(6))
    assert cnt.frame_count >= 2


def test_hot_path_untouched_when_not_recording():
    graphjit.reset()
    compiled = graphjit.compile(toy_example, backend="eager")
    compiled(torch.ones(3), torch.ones(3))
    ((check, _),) = compiled._fast
    assert check == compiled._entries[0].guard.check  # the guard's own check, no wrapper
    graphjit.reset()
    with graphjit.report.recording() as rec:
        compiled(torch.ones(3), torch.ones(3))
        compiled(torch.ones(3), torch.ones(3))
    ((check, _),) = compiled._fast
    assert check != compiled._entries[0].guard.check
    assert rec.compiles[0].entry_stats.hits == 1 and rec.compiles[0].entry_stats.checks == 1


def test_decompiled_log_artifact():
    graphjit.reset()
    with capture_graphjit_log("decompiled") as buf:
        graphjit.compile(toy_example, backend="eager")(torch.ones(3), -torch.ones(3))
    text = buf.getvalue()
    assert "TRANSFORMED CODE toy_example" in text and "RESUME FUNCTION __resume_at_" in text
    assert "def toy_example(a, b):" in text and ".fn(a, b)" in text


def test_a_recorded_run_traces_with_a_warm_persistent_cache(tmp_path):
    """A second recorded run of the same script, its entries on disk from the first: the
    report still shows the compiles (a recorded run does not load entries)."""
    env = _env()
    env["GRAPHJIT_CACHE_DIR"] = str(tmp_path / "cache")
    env["GRAPHJIT_CACHE_KEY_FILE"] = str(tmp_path / "key")
    plain = subprocess.run([sys.executable, str(PROGRAM)], capture_output=True, text=True, env=env, timeout=300)
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert any((tmp_path / "cache").rglob("*")), "the first run wrote no entry"
    env["GRAPHJIT_REPORT"] = str(tmp_path / "rep")
    proc = subprocess.run([sys.executable, str(PROGRAM)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = json.loads((tmp_path / "rep" / "graphjit_log.json").read_text())
    assert {f["name"] for f in log["frames"]} >= {"toy_program", "noisy_helper"}
    # each compile says what the persistent cache did with its entry (written again here)
    outcomes = {c["name"]: c["cache"] for c in log["compiles"]}
    assert outcomes["toy_program"] == "written", outcomes
    assert "persistent cache: written" in (tmp_path / "rep" / "index.html").read_text()
