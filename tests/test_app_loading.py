"""The explorer's load (issue 18): the options given on the command line reach the reader, and a TypeError
is an error, never a retry that silently drops --max-size or --no-cache."""

from __future__ import annotations

import pytest

from tests.helpers.app import run, settle, three_gaps
from gapscope.tui.app import GapscopeApp


def _open(path, opts):
    async def go():
        app = GapscopeApp([str(path)], load_opts=opts)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(app, pilot)
            return app.error, len(app.scenes)

    return run(go())


def test_load_options_reach_the_reader(tmp_path, monkeypatch):
    import gapscope.trace

    real = gapscope.trace.load
    calls = []

    def reader(path, **kw):
        calls.append(kw)
        return real(path, **kw)

    monkeypatch.setattr(gapscope.trace, "load", reader)
    error, scenes = _open(three_gaps(tmp_path), {"no_cache": True, "max_size": 10 ** 9})
    assert (error, scenes) == (None, 1)
    # with the preview's and the progress bar's hooks (tui/progress.py), which change nothing that is read
    (kw,) = calls
    assert {k: kw[k] for k in ("no_cache", "max_size")} == {"no_cache": True, "max_size": 10 ** 9}
    assert set(kw) == {"no_cache", "max_size", "progress", "first"}


def test_a_type_error_is_not_retried_without_the_options(tmp_path, monkeypatch):
    """The old `_load` called the reader again without options when a TypeError said "unexpected keyword":
    --max-size was then ignored without a word. Now that is an error, and the reader is called once."""
    import gapscope.trace

    real = gapscope.trace.load
    calls = []

    def old_reader(path, **kw):  # a reader (or a bug inside one) that does not take max_size
        calls.append(kw)
        if kw.get("max_size") is not None:
            raise TypeError("load() got an unexpected keyword argument 'max_size'")
        return real(path, no_cache=True)

    monkeypatch.setattr(gapscope.trace, "load", old_reader)
    error, scenes = _open(three_gaps(tmp_path), {"no_cache": True, "max_size": 100})
    assert scenes == 0 and len(calls) == 1
    assert error.endswith("loading failed (internal error TypeError: "
                          "load() got an unexpected keyword argument 'max_size')")


def test_an_unknown_load_option_is_refused():
    with pytest.raises(ValueError, match="unknown load options: max_sise"):
        GapscopeApp(["x.json"], load_opts={"max_sise": 100})
