"""Nothing lost: every file gapscope writes (report -o, the explorer's export, the columnar cache, captured
traces) goes to a temporary name in the same folder and is renamed into place; an existing file is never
replaced unless asked (-o without --force: exit 2, file unchanged); a failed write (no such folder, a path
under a file, a full disk, a failed rename) leaves the previous state as it was, no temporary file behind,
and says so in one line. Tests run as root, so read-only folders are simulated by failing os calls."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

import pytest

import gapscope.fsutil as fsutil
from tests.synth import Synth
from gapscope.cli import main

SAMPLE = Path(__file__).resolve().parent.parent / "traces" / "demo-eager-sync.decode.json.gz"


def _trace(tmp_path: Path) -> Path:
    s = Synth()
    s.annotation("step", 0, 200)
    s.launch(ts=0, dur=2, kernel="k0", k_ts=5, k_dur=10)
    s.runtime("cudaStreamSynchronize", 20, 100)
    s.launch(ts=125, dur=2, kernel="k1", k_ts=130, k_dur=10)
    d = tmp_path / "in"
    d.mkdir(exist_ok=True)
    return s.write(d / "t.json")


def _listing(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def _one_error_line(capsys, *needles) -> str:
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gapscope: error: "), err
    for n in needles:
        assert n in lines[0], err
    return lines[0]


class _FullDisk:
    """A file object whose write fails the way a full disk does."""

    def __init__(self, f):
        self.f = f

    def write(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def _full_disk(monkeypatch, module):
    real = os.fdopen
    monkeypatch.setattr(module.os, "fdopen", lambda *a, **k: _FullDisk(real(*a, **k)))


# ---------------------------------------------------------------------------------------- report -o
@pytest.mark.parametrize("fmt", [[], ["--json"]], ids=["markdown", "json"])
def test_report_o_writes_through_a_temporary_name_then_renames(tmp_path, monkeypatch, capsys, fmt):
    t = _trace(tmp_path)
    out = tmp_path / "out" / "r.txt"
    out.parent.mkdir()
    moves = []
    real_link, real_replace = os.link, os.replace

    def link(src, dst, *a, **k):
        assert os.path.exists(src) and not os.path.exists(dst)
        moves.append(("link", src, dst, Path(src).read_bytes()))
        return real_link(src, dst, *a, **k)

    def replace(src, dst, *a, **k):
        moves.append(("replace", src, dst, Path(src).read_bytes()))
        return real_replace(src, dst, *a, **k)

    monkeypatch.setattr(fsutil.os, "link", link)
    monkeypatch.setattr(fsutil.os, "replace", replace)
    assert main(["report", "--no-cache", *fmt, "-o", str(out), str(t)]) == 0
    assert f"wrote {out}" in capsys.readouterr().err
    (how, src, dst, data) = moves[-1]
    assert Path(src).parent == out.parent and Path(src).name.startswith(".gapscope-") and dst == str(out)
    assert data == out.read_bytes() and data  # the complete text was in the temporary file before the rename
    assert _listing(out.parent) == ["r.txt"]  # no temporary left


def test_report_o_never_replaces_an_existing_file_without_force(tmp_path, capsys):
    t = _trace(tmp_path)
    out = tmp_path / "r.md"
    out.write_bytes(b"precious")
    os.utime(out, (1_000_000, 1_000_000))
    assert main(["report", "--no-cache", "-o", str(out), str(t)]) == 2
    _one_error_line(capsys, "already exists", "--force")
    assert out.read_bytes() == b"precious" and out.stat().st_mtime == 1_000_000
    assert _listing(tmp_path) == ["in", "r.md"]
    # a directory in the way is never replaced either, with or without --force
    d = tmp_path / "dir.md"
    d.mkdir()
    for force in ([], ["--force"]):
        assert main(["report", "--no-cache", *force, "-o", str(d), str(t)]) == 2
        _one_error_line(capsys)
        assert d.is_dir() and _listing(d) == []
    # asked: replaced whole (a rename over it, never a rewrite in place)
    ino = out.stat().st_ino
    assert main(["report", "--no-cache", "--force", "-o", str(out), str(t)]) == 0
    assert out.read_text().startswith("# gapscope report") and out.stat().st_ino != ino


def test_report_o_through_the_real_command_exit_2_file_unchanged(tmp_path):
    import subprocess
    import sys

    t = _trace(tmp_path)
    out = tmp_path / "r.json"
    out.write_bytes(b"{}")
    r = subprocess.run([sys.executable, "-m", "gapscope", "report", "--no-cache", "--json", "-o", str(out), str(t)],
                       capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parent.parent)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("gapscope: error: ") and "already exists" in r.stderr
    assert out.read_bytes() == b"{}"


@pytest.mark.parametrize("where", ["under_a_file", "missing_folder"])
def test_report_o_into_a_folder_that_cannot_hold_it(tmp_path, capsys, where):
    t = _trace(tmp_path)
    blocker = tmp_path / "file.txt"
    blocker.write_bytes(b"x")
    out = blocker / "r.md" if where == "under_a_file" else tmp_path / "nope" / "r.md"
    assert main(["report", "--no-cache", "-o", str(out), str(t)]) == 2
    _one_error_line(capsys, "cannot write", "nothing was changed")
    assert blocker.read_bytes() == b"x" and _listing(tmp_path) == ["file.txt", "in"]


@pytest.mark.parametrize("existing", [False, True], ids=["new_file", "forced_over_existing"])
def test_report_o_on_a_full_disk_leaves_the_previous_state(tmp_path, monkeypatch, capsys, existing):
    t = _trace(tmp_path)
    out = tmp_path / "r.md"
    if existing:
        out.write_bytes(b"previous report")
    _full_disk(monkeypatch, fsutil)
    argv = ["report", "--no-cache", "-o", str(out), *(["--force"] if existing else []), str(t)]
    assert main(argv) == 2
    _one_error_line(capsys, "No space left on device", "nothing was changed")
    assert _listing(tmp_path) == (["in", "r.md"] if existing else ["in"])
    if existing:
        assert out.read_bytes() == b"previous report"


@pytest.mark.parametrize("call", ["fsync", "link", "replace"])
def test_a_failed_sync_or_rename_leaves_the_previous_state(tmp_path, monkeypatch, capsys, call):
    t = _trace(tmp_path)
    out = tmp_path / "r.md"
    force = call == "replace"
    if force:
        out.write_bytes(b"previous report")

    def fail(*a, **k):
        raise OSError(errno.EIO if call == "fsync" else errno.EACCES, os.strerror(errno.EIO if call == "fsync"
                                                                                   else errno.EACCES))

    monkeypatch.setattr(fsutil.os, call, fail)
    if call == "link":  # no hard links and no rename either: a read-only folder
        monkeypatch.setattr(fsutil.os, "replace", fail)
    assert main(["report", "--no-cache", "-o", str(out), *(["--force"] if force else []), str(t)]) == 2
    _one_error_line(capsys, "cannot write", "nothing was changed")
    assert _listing(tmp_path) == (["in", "r.md"] if force else ["in"])
    if force:
        assert out.read_bytes() == b"previous report"


def test_report_to_stdout_closed_early_is_not_an_error(tmp_path):
    import subprocess
    import sys

    t = _trace(tmp_path)
    r = subprocess.run(f"{sys.executable} -m gapscope report --no-cache {t} | head -c 10", shell=True,
                       capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parent.parent)
    assert r.stdout == "# gapscope" and "Traceback" not in r.stderr


# ------------------------------------------------------------------------------------ explorer export
def _export_in_app(trace: Path, *presses):
    from tests.helpers.app import settle
    from gapscope.tui.app import GapscopeApp
    from gapscope.tui.textdump import screen_text

    async def go():
        app = GapscopeApp([str(trace)], load_opts={"no_cache": True})
        async with app.run_test(size=(250, 30)) as pilot:  # wide enough for the whole status line
            await settle(app, pilot)
            out = []
            for _ in presses:
                app.last_export = []
                await pilot.press("e")
                await pilot.pause()
                out.append((list(app.last_export), screen_text(app)))
            return out

    return asyncio.run(asyncio.wait_for(go(), timeout=60))


def test_export_on_a_full_disk_leaves_nothing_and_says_so(tmp_path, monkeypatch):
    t = _trace(tmp_path)
    before = _listing(t.parent)
    _full_disk(monkeypatch, fsutil)
    [(paths, screen)] = _export_in_app(t, "e")
    assert paths == []
    assert "export failed" in screen and "No space left on device" in screen
    assert _listing(t.parent) == before


def test_export_failing_at_its_last_file_takes_back_the_first_ones(tmp_path, monkeypatch):
    """The export is three files (Markdown, JSON, SVG): when the SVG cannot be written, the report files
    written a moment before are removed again, so a failed export leaves the folder as it was."""
    t = _trace(tmp_path)
    before = _listing(t.parent)
    import gapscope.tui.export as export

    real = export.atomic_write_text

    def svg_fails(path, text, **kw):
        if str(path).endswith(".svg"):
            raise fsutil.GapscopeError(f"{path}: cannot write (No space left on device); nothing was changed")
        return real(path, text, **kw)

    monkeypatch.setattr(export, "atomic_write_text", svg_fails)
    [(paths, screen)] = _export_in_app(t, "e")
    assert paths == [] and "export failed" in screen
    assert _listing(t.parent) == before


def test_export_twice_writes_new_names_and_keeps_the_first(tmp_path):
    t = _trace(tmp_path)
    (first, _), (second, _) = _export_in_app(t, "e", "e")
    assert len(first) == 3 and len(second) == 3 and not set(first) & set(second)
    for p in first + second:
        assert Path(p).stat().st_size > 0
    assert not [n for n in _listing(t.parent) if n.endswith(".tmp")]


# ---------------------------------------------------------------------------------------------- cache
def test_cache_write_failure_keeps_the_load_and_the_previous_entry(tmp_path, monkeypatch):
    import numpy as np

    from gapscope.trace import cache, load

    cdir = tmp_path / "cache"
    monkeypatch.setenv("GAPSCOPE_CACHE_DIR", str(cdir))
    t = _trace(tmp_path)
    m1 = load(str(t))  # writes the entry
    entries = sorted(p for p in cdir.rglob("*") if p.is_file())
    assert entries and not [p for p in entries if p.name.endswith(".tmp")]
    saved = {p: p.read_bytes() for p in entries}
    os.utime(t, None)  # the trace changed: the next load rewrites its entry ...

    def no_space(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "savez", no_space)  # ... onto a full disk
    m2 = load(str(t))
    assert m2.n == m1.n and m2.warnings == m1.warnings
    after = sorted(p for p in cdir.rglob("*") if p.is_file())
    # no temporary and no torn entry: what is left is the previous entry as it was (or nothing, the stale
    # entry having been dropped by the load that found it stale)
    assert set(after) <= set(entries) and all(p.read_bytes() == saved[p] for p in after)
    monkeypatch.undo()
    monkeypatch.setenv("GAPSCOPE_CACHE_DIR", str(cdir))
    assert load(str(t)).n == m1.n and cache.cache_dir() == str(cdir)


def test_cache_folder_under_a_file_does_not_fail_the_load(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"x")
    monkeypatch.setenv("GAPSCOPE_CACHE_DIR", str(blocker / "cache"))
    t = _trace(tmp_path)
    assert main(["info", str(t)]) == 0
    assert capsys.readouterr().err == "" and blocker.read_bytes() == b"x"


# -------------------------------------------------------------------------------------------- capture
def test_captured_trace_is_linked_into_place_from_a_temporary_name(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    import gapscope.capture as capture
    import gapscope.capture.recorder as rec
    from tests.helpers.capture import Counter

    moves = []
    real_link = os.link

    def link(src, dst, *a, **k):
        moves.append((src, dst, os.path.getsize(src)))
        return real_link(src, dst, *a, **k)

    monkeypatch.setattr(rec.os, "link", link)
    r = capture.record(Counter(), name="x", out_dir=str(tmp_path), active=1, repeats=1, stacks=False, quiet=True)
    (src, dst, size) = moves[-1]
    assert Path(src).parent == tmp_path and Path(src).name.startswith(".x.") and dst == r.path
    assert size == os.path.getsize(r.path) > 0
    assert _listing(tmp_path) == ["x.json.gz"]


def test_capture_export_failing_leaves_nothing(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    import gapscope.capture as capture
    from gapscope.capture.recorder import CaptureError
    from tests.helpers.capture import Counter

    (tmp_path / "x.json.gz").write_bytes(b"precious")

    def export_fails(self, path):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch.profiler.profile, "export_chrome_trace", export_fails)
    with pytest.raises(CaptureError, match="No space left on device"):
        capture.record(Counter(), name="x", out_dir=str(tmp_path), active=1, repeats=1, stacks=False, quiet=True,
                       overwrite=True)
    assert _listing(tmp_path) == ["x.json.gz"] and (tmp_path / "x.json.gz").read_bytes() == b"precious"


def test_written_files_get_the_usual_permissions(tmp_path):
    import stat

    from gapscope.fsutil import atomic_write_text

    old = os.umask(0o022)
    try:
        p = atomic_write_text(tmp_path / "r.md", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o644
