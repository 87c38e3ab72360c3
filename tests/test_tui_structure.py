"""The explorer's classes and how it reads an analysis, from the source (issue 37, "layout that shows the
architecture"): no class under tui/ has more than 30 methods, counting those it inherits from the project's own
classes (a mix-in counts toward the class that takes it in); the explorer asks an unfinished load its state
(tui/loadstate.py ``AnalysisState``) or reads the analysis' attributes, never ``getattr(analysis, "x", default)``."""

from __future__ import annotations

import ast

from tests.helpers import ROOT

APP = ROOT / "tui"
MAX_METHODS = 30


def _sources() -> dict[str, str]:
    return {p.stem: p.read_text() for p in sorted(APP.glob("*.py"))}


def class_methods(sources: dict[str, str]) -> dict[str, set[str]]:
    """Per class defined in ``sources`` (module name -> source): the names of its methods, its own and those of its
    bases defined in these sources (followed up, a ``*TUPLE`` of bases included); a property and its setter are one
    name. A base is found by its name (``progress.MarksUse``: ``MarksUse``)."""
    own: dict[str, set[str]] = {}
    bases: dict[str, list[str]] = {}
    for src in sources.values():
        tree = ast.parse(src)
        tuples = {t.id: [ast.unparse(e) for e in node.value.elts] for node in tree.body
                  if isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple)
                  for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            assert node.name not in own, f"two classes named {node.name}: the count would mix them up"
            own[node.name] = {b.name for b in node.body if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef))}
            names = []
            for b in node.bases:
                if isinstance(b, ast.Starred):
                    names += tuples.get(ast.unparse(b.value), [])
                else:
                    names.append(ast.unparse(b))
            bases[node.name] = [n.rsplit(".", 1)[-1] for n in names]

    def every(name: str, seen: frozenset) -> set[str]:
        out = set(own[name])
        for b in bases[name]:
            if b in own and b not in seen:
                out |= every(b, seen | {b})
        return out

    return {name: every(name, frozenset({name})) for name in own}


def test_the_count_takes_in_mixins_and_project_bases():
    """The counter on a made-up module: a mix-in's methods, a base's, a ``*PANES`` tuple's and a dotted base's count
    toward the class that takes them in; an override counts once; a base from outside (Textual's) adds nothing."""
    src = "\n".join([
        "from textual.screen import Screen",
        "class Mix:",
        *(f"    def m{i}(self): pass" for i in range(20)),
        "class Pane:",
        "    def p(self): pass",
        "PANES = (Pane,)",
        "class Big(Mix, *PANES, Screen):",
        *(f"    def b{i}(self): pass" for i in range(12)),
        "    def m0(self): pass",
        "class Sub(other.Big):",
        "    def s(self): pass",
    ])
    got = class_methods({"made_up": src})
    assert len(got["Big"]) == 20 + 1 + 12 and len(got["Sub"]) == 34 and len(got["Mix"]) == 20


def test_no_explorer_class_has_more_than_30_methods():
    methods = class_methods(_sources())
    # the classes the issue named, and the subclasses of the project's own widgets, are seen at all
    assert {"MainScreen", "Scene", "DiffScreen", "RowList", "GapList", "DiffScene", "GapscopeApp"} <= methods.keys()
    assert {"vertical_scrollbar", "move_cursor", "fill"} <= methods["GapList"]  # SteadyBars, RowList, its own
    big = {name: len(m) for name, m in methods.items() if len(m) > MAX_METHODS}
    assert big == {}


# --------------------------------------------------------------------------------- the analysis, not getattr
#: the names an analysis goes by in the explorer (a bare name, or the last attribute: ``sc.analysis``)
ANALYSIS_NAMES = {"a", "an", "analysis", "source", "final"}


def analysis_getattrs(src: str) -> list[str]:
    """The ``getattr(...)`` calls of ``src`` on an analysis: its first argument a name or an attribute of
    ``ANALYSIS_NAMES`` (``a``, ``self.analysis``, ``pt.analysis``, ``sc.state.source``)."""
    out = []
    for n in ast.walk(ast.parse(src)):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "getattr" and n.args:
            obj = n.args[0]
            name = obj.id if isinstance(obj, ast.Name) else obj.attr if isinstance(obj, ast.Attribute) else None
            if name in ANALYSIS_NAMES:
                out.append(ast.unparse(n))
    return out


def test_the_getattr_check_sees_an_analysis_read():
    src = ("x = getattr(sc.analysis, 'provisional_note', None)\ny = getattr(a, 'plan_if_ready', None)\n"
           "z = getattr(self.analysis, 'devices', [])\nw = getattr(args, 'ascii', False)\n")
    assert analysis_getattrs(src) == ["getattr(sc.analysis, 'provisional_note', None)",
                                      "getattr(a, 'plan_if_ready', None)", "getattr(self.analysis, 'devices', [])"]


def test_the_explorer_reads_the_analysis_without_getattr():
    found = {name: got for name, src in _sources().items() if (got := analysis_getattrs(src))}
    assert found == {}
