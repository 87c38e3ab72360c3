"""The explorer's shape (issue 18): a thin App, small modules, the CSS in a .tcss shipped with the package, and
one failure formatter whose lines are one line each."""

from __future__ import annotations

import ast

import pytest

from tests.helpers import ROOT

APP = ROOT / "tui"


def _methods(path, cls: str) -> list[str]:
    tree = ast.parse(path.read_text())
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls)
    return [f.name for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_the_app_is_thin():
    assert len(_methods(APP / "app.py", "GapscopeApp")) < 30


def test_the_css_is_a_tcss_file_shipped_with_the_package():
    from gapscope.tui.app import GapscopeApp

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    assert GapscopeApp.CSS_PATH == "gapscope.tcss" and not GapscopeApp.CSS
    assert "#gaplist" in (APP / "gapscope.tcss").read_text()
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "*.tcss" in data["gapscope.tui"]


def test_failure_is_one_line_and_keeps_bad_input_as_it_is():
    from gapscope.tui.loading import failure
    from gapscope.errors import GapscopeError

    assert failure("loading", GapscopeError("t.json: not a trace")) == "t.json: not a trace"
    assert failure("analysis", GapscopeError("no window")) == "analysis failed: no window"
    assert failure("export", OSError(28, "No space left on device")) == \
        "export failed: [Errno 28] No space left on device"
    assert failure("loading", MemoryError(), "t.json").startswith("t.json: out of memory while loading (try --max-size")
    line = failure("loading", ValueError("bad\nvalue  " + "x" * 500), "2 traces")
    assert line.startswith("2 traces: loading failed (internal error ValueError: bad value xxx")
    assert "\n" not in line and len(line) < 260


def _imported_names(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:  # the explorer's own modules (relative imports)
            for a in node.names:
                yield node.module or "", a.name


@pytest.mark.parametrize("path", sorted(APP.glob("*.py")), ids=lambda p: p.name)
def test_no_explorer_module_imports_another_modules_private_names(path):
    private = [f"{mod}.{name}" for mod, name in _imported_names(path) if name.startswith("_")]
    assert private == []


def test_names_are_made_safe_to_draw_in_one_place():
    """"safe, then ASCII-safe" (tui/safe.py ``shown``) is written once: every other module calls ``shown``."""
    for path in APP.glob("*.py"):
        if path.name == "safe.py":
            continue
        calls = {n.func.id for n in ast.walk(ast.parse(path.read_text()))
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert not calls & {"safe", "ascii_safe"}, path.name


#: what redraws the screen: the screen's watcher (MainScreen.watch_shown, through ScreenDraw) calls these, a key
#: never does
REDRAWS = {"refresh_view", "refresh_stack", "refresh_status", "refresh_header", "refresh_all", "refresh_bindings",
           "refresh", "refresh_line", "fill_gap_list", "fill_tables", "sync_rows", "ensure_cursor_visible",
           "set_text", "_draw_status", "draw_status", "shown_changed", "move_list_cursor", "fit_lanes",
           "cursor_row_moved"}


def _calls(path, cls: str | None = None) -> set[str]:
    tree = ast.parse(path.read_text())
    if cls is not None:
        tree = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls)
    return {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}


@pytest.mark.parametrize("path, cls", [("lanekeys.py", "LaneKeys"), ("gapkeys.py", "GapKeys"),
                                       ("search.py", "SearchKeys"), ("screenkeys.py", "ScreenKeys")])
def test_the_panes_keys_change_state_and_never_redraw(path, cls):
    assert _calls(APP / path, cls) & REDRAWS == set()
    assert "update" in _calls(APP / path, cls) or "goto_gap" in _calls(APP / path, cls)


def _action_calls(path, cls: str, names: set[str] | None = None) -> dict[str, set[str]]:
    """For each key of class ``cls`` (its ``action_*`` methods, or the methods ``names``), what it calls, the class's own methods it calls
    included (followed down): the screen's ``update`` (``self.update(...)``, or a pane's ``self.main.update`` and
    ``main.update``) as "self.update", any other ``x.update(...)`` (a widget's text) as "widget.update"."""
    tree = ast.parse(path.read_text())
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls)
    methods = {f.name: f for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}

    def direct(f) -> set[str]:
        out = set()
        for n in ast.walk(f):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                v = n.func.value
                on_self = isinstance(v, ast.Name) and v.id in ("self", "main") or \
                    isinstance(v, ast.Attribute) and v.attr == "main" and isinstance(v.value, ast.Name) and \
                    v.value.id == "self"
                if n.func.attr == "update":
                    out.add("self.update" if on_self else "widget.update")
                else:
                    out.add(n.func.attr)
        return out

    def reach(name: str, seen: set[str]) -> set[str]:
        seen.add(name)
        got = direct(methods[name])
        for m in sorted(got & methods.keys() - seen - {"update"}):
            got |= reach(m, seen)
        return got

    return {name: reach(name, set()) for name in methods
            if (name.startswith("action_") if names is None else name in names)}


def test_the_diff_screens_keys_change_state_and_never_redraw():
    """The before/after screen as the explorer's: a key changes the scene and calls ``update``; the screen's
    watcher (DiffScreen.watch_shown) redraws."""
    actions = _action_calls(APP / "diffview.py", "DiffScreen")
    assert {"action_step", "action_gap", "action_new_gap", "action_pan", "action_lane"} <= actions.keys()
    redraws = REDRAWS | {"lanes_moved", "set_scene", "widget.update"}
    for name, calls in actions.items():
        assert calls & redraws == set(), name
        assert "self.update" in calls or name == "action_leave", name  # leave: the screen goes
    watcher = _calls(APP / "diffview.py", "DiffScreen")
    # what the watcher does, in the same class (a lane move alone: LanesView.cursor_row_moved, two rows)
    assert {"lanes_moved", "refresh", "cursor_row_moved"} <= watcher


def _handlers(path, cls: str) -> set[str]:
    """The methods of ``cls`` that answer a widget's message (decorated with ``@on(...)``)."""
    tree = ast.parse(path.read_text())
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls)
    return {f.name for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
            and any(isinstance(d, ast.Call) and getattr(d.func, "id", "") == "on" for d in f.decorator_list)}


def test_the_screens_own_keys_change_state_and_never_redraw():
    """The explorer screen's own keys (views, tabs, detail, Esc ...; ``ScreenKeys``, a part the screen holds) and
    the messages of its widgets as the panes' keys: they change the state and call ``update``; what the tables, the
    gap list and the lanes show follows from the state in ``watch_shown`` (``1 2 3`` switch the view, the watcher
    fills the table shown, through ``ScreenDraw``)."""
    actions = _action_calls(APP / "screenkeys.py", "ScreenKeys")
    assert {"action_view", "action_escape", "action_detail", "action_next_trace"} <= actions.keys()
    for name, calls in actions.items():
        assert calls & REDRAWS == set(), name
    assert "self.update" in actions["action_view"] and "switch_view" in actions["action_view"]
    handlers = _handlers(APP / "main.py", "MainScreen")
    assert {"_find_kernel", "_show_finding_gaps", "_gap_highlighted"} <= handlers
    for name, calls in _action_calls(APP / "main.py", "MainScreen", handlers).items():
        assert calls & REDRAWS == set(), name
    answers = _action_calls(APP / "screenkeys.py", "ScreenKeys",
                            {"find_kernel", "show_finding_gaps", "show_action_kernels"})
    assert len(answers) == 3
    for name, calls in answers.items():
        assert calls & REDRAWS == set(), name
    assert "shown_changed" in _calls(APP / "main.py", "MainScreen")  # the watcher hands the change over
    watcher = _calls(APP / "screendraw.py", "ScreenDraw")
    assert {"fill_tables", "fill_gap_list", "sync_rows", "refresh_bindings"} <= watcher


def test_widgets_talk_to_the_screen_by_messages():
    """No widget calls a method of its screen (``self.screen.x()``): it posts a message the screen answers."""
    for path in APP.glob("*.py"):
        tree = ast.parse(path.read_text())
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and isinstance(n.func.value, ast.Attribute) and n.func.value.attr == "screen"
                 and isinstance(n.func.value.value, ast.Name) and n.func.value.value.id == "self"]
        assert calls == [], path.name


def test_the_app_and_the_screen_meet_at_a_small_api():
    """The screen asks the App for the tab, the next tab, the before/after pair and the export; it never reads
    the App's list of scenes or its tab index. The App tells the screen what changed; it never fills, selects
    or redraws the screen's widgets itself."""
    screen_side = ("main.py", "lanekeys.py", "gapkeys.py", "search.py", "screenkeys.py", "screendraw.py")
    for name in screen_side:
        src = (APP / name).read_text()
        assert "app.scenes" not in src and "app.current" not in src, name
    app_calls = {n.func.attr for n in ast.walk(ast.parse((APP / "app.py").read_text()))
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and isinstance(n.func.value, ast.Attribute) and n.func.value.attr == "main"}
    assert app_calls <= {"show_loading", "show_tab", "scene_changed", "update", "mount_footer"}, app_calls


def test_the_explorer_modules_import_each_other_without_a_cycle():
    """Module-level imports between the explorer's modules (``from .x import y``) form no cycle."""
    graph = {}
    for path in APP.glob("*.py"):
        tree = ast.parse(path.read_text())
        graph[path.stem] = {n.module.split(".")[0] for n in tree.body
                            if isinstance(n, ast.ImportFrom) and n.level == 1 and n.module}
    done, active = set(), []

    def visit(m):
        assert m not in active, " -> ".join(active[active.index(m):] + [m])
        if m in done or m not in graph:
            return
        active.append(m)
        for d in sorted(graph[m]):
            visit(d)
        active.pop()
        done.add(m)

    for m in sorted(graph):
        visit(m)


def test_the_scene_is_made_of_parts_with_one_responsibility_each_and_no_textual():
    """``Scene`` holds its parts (the traces) and is made of a ``View`` (the time window), ``DisplayRows`` (the rows
    and the lane cursor), a ``GapSelection`` (the listed gaps, the filter, the selected gap) and a ``SearchState``
    (the / query and its matches); none of them, nor the scene, imports textual (a test builds them without an
    app)."""
    import subprocess
    import sys

    code = ("import sys; import gapscope.tui.scene, gapscope.tui.diffscene, gapscope.tui.shown; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'textual', 'rich'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"
    from tests.synth import Synth
    from tests.helpers import model_of
    from gapscope.tui.matches import SearchState
    from gapscope.tui.rows import DisplayRows
    from gapscope.tui.scene import Scene
    from gapscope.tui.scenegaps import GapSelection
    from gapscope.tui.view import View

    s = Synth()
    s.launch(ts=0, dur=2, kernel="k0", k_ts=5, k_dur=10)
    sc = Scene("<synth>", model_of(s))
    assert (type(sc.view), type(sc.display), type(sc.gaps), type(sc.search)) == \
        (View, DisplayRows, GapSelection, SearchState)
    assert sc.display.view is sc.view  # the rows fold what the view shows
    # what moved out is not on the scene any more (no forwarding names)
    gone = {"order", "selected", "g_dur", "lane_cursor", "matches", "search_query", "cause_filter", "rows",
            "invalidate_rows", "toggle_expand", "gap_span", "selected_gap"}
    assert gone & set(dir(sc)) == set()


def test_the_tables_are_filled_by_the_watcher_when_the_view_changes(tmp_path, monkeypatch):
    """1 2 3 only switch the view; the table shown is filled because ``Shown.view`` changed (once per change: 2
    again fills nothing, 1 fills nothing), with the scene's kernels in it."""
    from tests.helpers.app import opened, run, three_gaps
    from gapscope.tui.screendraw import ScreenDraw
    from gapscope.tui.tables import TableView

    calls = []
    real = ScreenDraw.fill_tables

    def counted(self):
        calls.append(self.main.shown.view)
        return real(self)

    monkeypatch.setattr(ScreenDraw, "fill_tables", counted)
    p = three_gaps(tmp_path)

    async def go():
        async with opened(p) as (app, pilot):
            calls.clear()
            seen = []
            for key in ("2", "2", "3", "1", "2"):
                await pilot.press(key)
                await pilot.pause()
                seen.append(list(calls))
            rows = {type(v).__name__: v.table.row_count for v in app.screen.query(TableView)}
            return seen, rows

    seen, rows = run(go())
    assert seen == [["kernels"], ["kernels"], ["kernels", "findings"], ["kernels", "findings"],
                    ["kernels", "findings", "kernels"]]
    assert rows["KernelsView"] >= 4  # k0, k1, k2 and the sgemm
