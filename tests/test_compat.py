"""The supported torch range (``graphjit/_compat.py``): what pyproject declares, how a
release is read, and the one-line ``ImportError`` for a torch outside the range."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest
import torch

from graphjit import _compat

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_pyproject_declares_the_supported_range():
    text = (ROOT / "pyproject.toml").read_text()
    assert f'"torch{_compat.SUPPORTED_RANGE}"' in text
    assert 'requires-python = ">=3.11,<3.12"' in text


@pytest.mark.parametrize("version, release", [
    ("2.13.0+cpu", (2, 13)), ("2.14.1+cu130", (2, 14)), ("2.15.0a0+git1234", (2, 15)),
    ("2.9.1", (2, 9)), ("unknown", (0, 0)),
])
def test_torch_release(version, release):
    assert _compat.torch_release(version) == release


def test_the_running_torch_is_supported():
    assert _compat.TORCH_RELEASE in _compat.SUPPORTED
    _compat.check_torch()


@pytest.mark.parametrize("release", [(2, 12), (2, 15), (3, 0)])
def test_check_refuses_a_torch_outside_the_range(monkeypatch, release):
    monkeypatch.setattr(_compat, "torch_release", lambda version=None: release)
    with pytest.raises(ImportError) as info:
        _compat.check_torch()
    message = str(info.value)
    assert "\n" not in message
    assert ">=2.13,<2.15" in message and str(torch.__version__) in message


@pytest.mark.parametrize("version", ["2.15.0", "2.12.1+cpu"])
def test_import_graphjit_under_an_unsupported_torch_says_which_are_supported(version):
    """``import graphjit`` under another torch (its version string replaced before the
    import, in a fresh process) ends in one ``ImportError`` line, not an error from inside."""
    code = f"import torch; torch.__version__ = {version!r}; import graphjit"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()[-1]
    assert re.fullmatch(rf"ImportError: graphjit supports torch >=2\.13,<2\.15 \(2\.13 and 2\.14\), not torch "
                        rf"{re.escape(version)}: .*", last), run.stderr
