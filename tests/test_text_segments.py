"""Text as data (gapscope/analysis/text.py): the findings' titles, advice and the gaps' explanations reach the
Markdown, the JSON and the explorer as spans (prose, or a name from the trace), read from the analysis's sentences
in one place; no front end shows a name's backticks or escapes them."""

from __future__ import annotations

import ast
import functools
import json
import re

from gapscope.analysis import analyze
from gapscope.analysis.text import Span, plain, sentence
from gapscope.report import render_markdown
from gapscope.report.jsonout import build_json
from gapscope.trace import load
from tests.helpers import ROOT, SAMPLE_TRACES


@functools.lru_cache(maxsize=None)
def _analysis(name: str):
    return analyze(load(str(SAMPLE_TRACES / f"{name}.json.gz")))


def test_sentence_splits_names_from_prose():
    assert sentence("1 sync in `a.py(3): f` then `aten::item`.") == (
        Span("1 sync in "), Span("a.py(3): f", True), Span(" then "), Span("aten::item", True), Span("."))
    assert sentence("no names here") == (Span("no names here"),)
    assert sentence("") == () and sentence(None) == ()
    # an unpaired backtick is prose, kept as written
    assert plain(sentence("a ` b")) == "a ` b"


def test_the_attention_fix_names_its_mask_builder_as_code_not_escaped_backticks():
    # hf-attn's eager-attention advice names the mask builder: the report printed it as \`...\` before
    a = _analysis("hf-attn.prefill_eager")
    f = next(f for f in a.findings if f.cause == "pattern" and "eager_mask" in f.suggestion)
    assert any(s.code and s.text.endswith("eager_mask") for s in f.suggestion_text)
    md = render_markdown([a])
    line = next(ln for ln in md.splitlines() if ln.lstrip().startswith("→ Use fused attention"))
    assert "`transformers/masking_utils.py(539): eager_mask`" in line
    assert "\\`" not in md


def test_json_segments_join_to_the_sentences_and_keep_names_apart():
    a = _analysis("hf-synchook.decode_hook")
    doc = json.loads(json.dumps(build_json([a])))
    seen_code = 0
    for f in doc["findings"]:
        for key in ("title", "suggestion"):
            segs = f[f"{key}_segments"]
            assert "".join(s["text"] for s in segs) == f[key].replace("`", "")
            assert all("`" not in s["text"] for s in segs if s["code"])
            seen_code += sum(s["code"] for s in segs)
    for g in doc["gaps"]:
        assert "".join(s["text"] for s in g["explanation_segments"]) == g["explanation"].replace("`", "")
    assert seen_code > 0


def test_no_front_end_reads_backticks_itself():
    """The report and the explorer render spans; only analysis/text.py reads the backtick convention."""
    bad = []
    for path in [*(ROOT / "gapscope" / "report").glob("*.py"), *(ROOT / "tui").glob("*.py")]:
        src = path.read_text()
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "`([^`]" in node.value:
                bad.append(f"{path.name}: a pattern for names between backticks")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("replace", "split", "strip") and node.args
                    and isinstance(node.args[0], ast.Constant) and node.args[0].value == "`"):
                bad.append(f"{path.name}:{node.lineno}: .{node.func.attr}('`')")
    assert bad == []


def test_the_explorer_shows_names_without_backticks():
    """Every row of the findings view, every info box behind it and the gap detail: names styled, no backticks
    (they showed in the rows and the boxes of findings no action fixes)."""
    from tests.helpers.app import opened, run
    from gapscope.tui.textdump import screen_text

    async def go():
        async with opened(SAMPLE_TRACES / "hf-attn.prefill_eager.json.gz", size=(160, 48)) as (app, pilot):
            lanes = screen_text(app)
            await pilot.press("3")
            await pilot.pause()
            ft = app.query_one("#findings")
            rows = [" ".join(str(v) for v in ft.get_row_at(r)) for r in range(ft.row_count)]
            infos = []
            for r in range(ft.row_count):
                ft.move_cursor(row=r)
                await pilot.pause()
                infos.append(str(app.query_one("#findinginfo").render()))
            return lanes, rows, infos, app.scene.analysis

    lanes, rows, infos, a = run(go())
    assert len(rows) >= len(a.plan.actions) and len(infos) == len(rows)
    # the sentences behind them do hold names between backticks: what the test is about
    assert any("`" in f.title for f in a.findings) and any("`" in f.suggestion for f in a.findings)
    assert [r for r in rows if "`" in r] == []
    assert [i for i in infos if "`" in i] == []
    assert "`" not in lanes
