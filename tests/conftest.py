import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_TRACES = ROOT.parent / "shared" / "traces"
SAMPLE_TRACES = ROOT / "traces"


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """../shared/traces: required in CI (a missing folder fails), skipped elsewhere when absent."""
    if not SHARED_TRACES.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"CI needs the shared trace corpus at {SHARED_TRACES}")
        pytest.skip("../shared/traces is not present")
    return SHARED_TRACES
