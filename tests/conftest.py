import os
from pathlib import Path

import pytest

from tests.helpers import SHARED_TRACES


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """../shared/traces: required in CI (a missing folder fails), skipped elsewhere when absent."""
    if not SHARED_TRACES.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"CI needs the shared trace corpus at {SHARED_TRACES}")
        pytest.skip("../shared/traces is not present")
    return SHARED_TRACES


@pytest.fixture(autouse=True, scope="session")
def _cache_outside_home(tmp_path_factory):
    """No test writes gapscope's columnar cache into the real home folder (tests may still set their own)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("GAPSCOPE_CACHE_DIR", str(tmp_path_factory.mktemp("gapscope-cache")))
    yield
    mp.undo()
