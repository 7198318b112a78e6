"""Shared fixtures: every test runs with graphjit's debug checks on and a clean cache."""

from __future__ import annotations

import os

import pytest
import torch

import graphjit

# the persistent cache is off in tests (a test that compiles twice must trace twice), also
# in the processes tests start (an empty GRAPHJIT_CACHE_DIR: off; nothing is written to the
# user's ~/.cache); tests/test_cache*.py turn it on in their own processes
graphjit.config.cache_dir = None
os.environ["GRAPHJIT_CACHE_DIR"] = ""

# the helpers shared by the test files assert too: give their failures pytest's detail
pytest.register_assert_rewrite("_shared")


@pytest.fixture(autouse=True)
def _grad_mode_restored(request):
    """No test (and no compiled code it runs) may leave global grad mode changed."""
    yield
    if not torch.is_grad_enabled():
        torch.set_grad_enabled(True)
        raise AssertionError(f"grad mode left disabled by {request.node.nodeid}")


@pytest.fixture(autouse=True)
def _graphjit_debug_and_reset():
    old_debug = graphjit.config.debug_checks
    old_limit = graphjit.config.recompile_limit
    graphjit.config.debug_checks = True
    graphjit.reset()
    yield
    graphjit.config.debug_checks = old_debug
    graphjit.config.recompile_limit = old_limit
