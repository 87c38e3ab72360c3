"""``intervals.uniq``, ``median`` and ``percentile`` give what ``np.unique``, ``np.median`` and ``np.percentile`` give, bit for bit
(the reports print their figures; a float that moves in its last bit can change a rounded number), on integer
columns of every size, range and sign, and on the sample traces' own columns; and a report's analysis no longer
imports ``numpy.ma`` (which a plain ``np.unique``, ``np.percentile`` or a float ``np.median`` pulls in, ~40 ms)."""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gapscope.analysis.intervals import isin, median, name_ids, percentile, uniq
from gapscope.trace import load

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = sorted(glob.glob(os.path.join(ROOT, "traces", "*.json.gz")))
QS = (0, 10, 25, 50, 90, 99, 100, 33.3, 66.7)


def _same_float(x: float, y: float) -> bool:
    return (x == y and np.signbit(x) == np.signbit(y)) or (x != x and y != y)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-(1 << 62), 1 << 62), min_size=1, max_size=200), st.sampled_from(QS),
       st.sampled_from([np.int64, np.int32, np.uint8]))
def test_percentile_and_uniq_are_numpys(values, q, dtype):
    info = np.iinfo(dtype)
    a = np.clip(np.array(values, np.int64), info.min, info.max).astype(dtype)
    assert _same_float(percentile(a, q), float(np.percentile(a, q)))
    u = uniq(a)
    assert u.dtype == np.unique(a).dtype and np.array_equal(u, np.unique(a))


def test_random_columns():
    rng = np.random.default_rng(7)
    for trial in range(3000):
        n = int(rng.integers(1, 40)) if trial % 3 else int(rng.integers(1, 5000))
        hi = (10, 1000, 10**9, 2**62)[trial % 4]
        a = rng.integers(-hi if trial % 5 == 0 else 0, hi, n)
        for q in QS:
            assert _same_float(percentile(a, q), float(np.percentile(a, q))), (n, q)
        assert np.array_equal(uniq(a), np.unique(a))
    # empty, bool and float columns (the latter two go through numpy itself)
    assert uniq(np.zeros(0, np.int64)).size == 0 and uniq(np.zeros(0, np.int64)).dtype == np.int64
    assert np.array_equal(uniq(np.array([True, False, True])), np.unique(np.array([True, False, True])))
    f = np.array([3.0, np.nan, -0.0, 0.0, np.nan, 1.5])
    assert np.array_equal(uniq(f), np.unique(f), equal_nan=True)
    assert _same_float(percentile(f[~np.isnan(f)], 90), float(np.percentile(f[~np.isnan(f)], 90)))


@pytest.mark.parametrize("path", SAMPLES[:6], ids=os.path.basename)
def test_sample_columns(path):
    m = load(path)
    delay = m.ts_ns[m.launch >= 0] - m.ts_ns[m.launch[m.launch >= 0]]
    for col in (m.track, m.name_id, m.ts_ns, m.dur_ns, delay):
        assert np.array_equal(uniq(col), np.unique(col))
        if col.size:
            for q in QS:
                assert _same_float(percentile(col, q), float(np.percentile(col, q)))


def test_report_does_not_import_numpy_ma():
    """No sample trace's report imports it: each trace analysed and reported in turn in one process, which names the
    first trace after which it is in (a graph replay's map and a user-sync rule each called ``np.unique`` once)."""
    code = ("import sys; from gapscope.trace import load; from gapscope.analysis import analyze; "
            "from gapscope.report import render_markdown, to_json_text\n"
            f"for t in {list(SAMPLES)!r}:\n"
            "    a = analyze(load(t)); to_json_text([a]); render_markdown([a], 10)\n"
            "    if 'numpy.ma' in sys.modules: print(t); break\n"
            "else: print('none')")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "none"


@pytest.mark.parametrize("pair", [("demo-eager-sync.decode", "demo-eager.decode"),
                                  ("hf-autocast.prefill_autocast", "hf-autocast.prefill_bf16"),
                                  ("demo-eager-tp.decode.rank0", "demo-eager-tp.decode.rank1")])
def test_a_before_after_or_ranks_report_does_not_import_numpy_ma(pair):
    """The report of two traces (a before / after: the alignment of their steps; two ranks of one job), Markdown then
    JSON, in one process."""
    paths = [os.path.join(ROOT, "traces", f"{p}.json.gz") for p in pair]
    code = ("import contextlib, io, runpy, sys\n"
            "for j in ([], ['--json']):\n"
            f"    sys.argv = ['gapscope', 'report', '--no-cache'] + j + {paths!r}\n"
            "    with contextlib.redirect_stdout(io.StringIO()):\n"
            "        try:\n"
            "            runpy.run_module('gapscope', run_name='__main__')\n"
            "        except SystemExit as e:\n"
            "            assert not e.code, e.code\n"
            "print('numpy.ma' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_isin_is_numpys():
    rng = np.random.default_rng(5)
    for trial in range(500):
        n, k = int(rng.integers(0, 300)), int(rng.integers(0, 40))
        hi = (5, 300, 10**9, 2**62)[trial % 4]
        v, c = rng.integers(-hi, hi, n), rng.integers(-hi, hi, k)
        if trial % 3 == 0 and n and k:
            c[: k // 2] = rng.choice(v, k // 2)  # some hits
        assert np.array_equal(isin(v, c), np.isin(v, c)), trial
        assert np.array_equal(isin(v.astype(np.uint8), list(c % 7)), np.isin(v.astype(np.uint8), list(c % 7)))
    names = np.array(["aten::item", "aten::mm", "cudaMemcpyAsync", ""])
    assert isin(names, ("aten::item", "")).tolist() == [True, False, False, True]
    assert isin(np.zeros((2, 3), np.int64), []).shape == (2, 3)


def test_median_is_numpys():
    rng = np.random.default_rng(11)
    for trial in range(3000):
        n = int(rng.integers(1, 40)) if trial % 3 else int(rng.integers(1, 4000))
        if trial % 2:
            a = rng.integers(0, (10, 1000, 10**9, 2**62)[trial % 4], n)
        else:
            a = rng.normal(0, 1e6, n) * (10.0 ** int(rng.integers(-5, 10)))
            if trial % 7 == 0:
                a = np.round(a)
        assert _same_float(median(a), float(np.median(a))), (trial, n)
    for a in ([3, 1, 2, 2], [5], [1.5, np.nan, 2.0], [True, False, True], [2**62, 2**62 - 1]):
        assert _same_float(median(np.array(a)), float(np.median(np.array(a))))


def test_name_ids_is_the_name_column_as_an_index():
    m = load(next(p for p in SAMPLES if "demo-eager-copy.decode" in p))
    ids = name_ids(m)
    assert ids.dtype == np.intp and np.array_equal(ids, m.name_id) and name_ids(m) is ids
    m.name_id = m.name_id[::-1].copy()  # a column replaced: made again from it
    assert np.array_equal(name_ids(m), m.name_id)
