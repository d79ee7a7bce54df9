"""Fixtures of the sweep tests."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="module")
def compilation_cache(tmp_path_factory):
    """The module's own persistent XLA cache (``$PPO_JAX_CACHE_DIR``), restored after: its sweeps share compiles.

    A module uses it for all its tests with ``pytestmark = pytest.mark.usefixtures("compilation_cache")``.
    """
    path = tmp_path_factory.mktemp("xla_cache")
    old = os.environ.get("PPO_JAX_CACHE_DIR")
    os.environ["PPO_JAX_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        del os.environ["PPO_JAX_CACHE_DIR"]
    else:
        os.environ["PPO_JAX_CACHE_DIR"] = old
