"""gapscope report: Markdown, JSON against findings.schema.json, -o/--force, write_reports, compare, ranks."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tests.synth import Synth
from tests.helpers import SCHEMA_PATH, model_of, one_gap, sync_scenario
from gapscope.analysis import analyze
from gapscope.cli import main
from gapscope.report import build_json, render_markdown, write_reports
from gapscope.report.markdown_text import code, esc, inline


@pytest.fixture(scope="module")
def schema():
    return json.loads(SCHEMA_PATH.read_text())


def sync_trace(tmp_path, name="sync.json", meta=None) -> Path:
    s = one_gap()
    if meta:
        s.top.update(meta)
    sync_scenario(s)
    s.launch(ts=195, dur=3, kernel="next", k_ts=200, k_dur=10)
    return s.write(tmp_path / name)


def test_json_validates_on_synthetic(tmp_path, schema):
    from gapscope.trace import load

    p = sync_trace(tmp_path, meta={"gapscope": {"phase": "decode", "profiled_us": 300.0, "unprofiled_us": 150.0}})
    a = analyze(load(str(p), no_cache=True))
    doc = build_json([a])
    jsonschema.validate(doc, schema)
    assert doc["traces"][0]["phase"] == "decode"
    assert doc["traces"][0]["distortion"]["ratio"] == pytest.approx(2.0)
    assert any("slowed" in w for w in doc["traces"][0]["warnings"])
    g = doc["gaps"][0]
    assert g["cause"] == "sync" and g["dur_us"] == pytest.approx(100.0)
    assert g["start_us"] == pytest.approx(50.0)  # relative to the window start (prev kernel at 50 µs)
    assert g["cpu_stack"][0] == "model.py(42): hook"
    assert doc["causes"]["sync"] == {"count": 1, "total_us": pytest.approx(100.0)}
    assert doc["findings"][0]["id"] == "sync-1"


def test_json_validates_on_shared_traces(shared_traces, schema):
    from gapscope.trace import load

    for p in sorted(shared_traces.glob("*/*")):
        if p.suffix == ".md":
            continue
        a = analyze(load(str(p), no_cache=True))
        doc = json.loads(json.dumps(build_json([a])))
        jsonschema.validate(doc, schema)


def test_markdown_headline_findings_and_stack(tmp_path):
    from gapscope.trace import load

    a = analyze(load(str(sync_trace(tmp_path)), no_cache=True))
    md = render_markdown([a])
    assert md.startswith("# gapscope report: sync.json")
    assert "Biggest cause: **sync**" in md
    assert "1 gap after a sync from `model.py(42): hook` cost 100.0 µs of GPU idle" in md
    assert "cudaStreamSynchronize" in md and "Remove the host synchronisation" in md
    assert len(md.splitlines()) < 80


def test_markdown_escapes_trace_strings():
    assert esc("a_b*c[d]|<x>") == r"a\_b\*c\[d\]\|\<x\>"
    assert code("x|y") == "`x\\|y`"
    assert code("a`b") == "``a`b``"
    assert inline("1 sync from `f[0]_*` here_") == r"1 sync from `f[0]_*` here\_"
    s = Synth()
    s.launch(ts=0, dur=1, kernel="void k<[bold]|`x`>()", k_ts=10, k_dur=5)
    md = render_markdown([analyze(model_of(s))])
    assert "``void k<[bold]\\|`x`>()``" in md


def test_cli_report_stdout_and_json(tmp_path, capsys, schema):
    p = sync_trace(tmp_path)
    assert main(["report", "--no-cache", str(p)]) == 0
    out = capsys.readouterr().out
    assert "## Findings" in out
    assert main(["report", "--no-cache", "--json", str(p)]) == 0
    jsonschema.validate(json.loads(capsys.readouterr().out), schema)


def test_cli_output_never_overwrites_without_force(tmp_path, capsys):
    p = sync_trace(tmp_path)
    out = tmp_path / "r.md"
    out.write_text("keep me")
    assert main(["report", "--no-cache", "-o", str(out), str(p)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert out.read_text() == "keep me"
    assert main(["report", "--no-cache", "-o", str(out), "--force", str(p)]) == 0
    assert out.read_text().startswith("# gapscope report")


def test_cli_bad_input_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("this is not json")
    assert main(["report", "--no-cache", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gapscope: error:") and err.count("\n") == 1
    assert main(["report", "--no-cache", str(tmp_path / "missing.json")]) == 2


def test_write_reports_picks_free_stem(tmp_path):
    s = Synth()
    s.launch(ts=0, dur=1, kernel="k", k_ts=10, k_dur=5)
    a = analyze(model_of(s))
    p1 = write_reports([a], tmp_path, "decode")
    p2 = write_reports([a], tmp_path, "decode")
    assert [Path(x).name for x in p1] == ["decode.md", "decode.json"]
    assert [Path(x).name for x in p2] == ["decode-1.md", "decode-1.json"]
    (tmp_path / "x-1.json").write_text("{}")
    (tmp_path / "x.md").write_text("")
    assert [Path(x).name for x in write_reports([a], tmp_path, "x")] == ["x-2.md", "x-2.json"]
    assert json.loads(Path(p2[1]).read_text())["schema"] == "gapscope.findings/1"


def test_two_traces_before_after(tmp_path, schema):
    from gapscope.trace import load

    a = analyze(load(str(sync_trace(tmp_path, "before.json")), no_cache=True))
    s = one_gap()
    s.python("serve.py(88): postprocess", 100, 92)
    s.launch(ts=195, dur=3, kernel="next", k_ts=200, k_dur=10)
    b = analyze(model_of(s))
    md = render_markdown([a, b])
    assert "## What changed" in md and "Every number is **per step**" in md
    # no step ranges: each window is one step, and the report says so
    assert "- ⚠ A: no step ranges" in md
    assert "| sync | 100.0 µs | 1 | 0 ns | 0 | **−100.0 µs** |" in md
    assert "| python | 0 ns | 0 | 100.0 µs | 1 | **+100.0 µs** |" in md
    assert "- new in B: 1 gap while host work from `serve.py(88): postprocess`" in md
    assert "- gone in B: 1 gap after a sync from `model.py(42): hook`" in md
    doc = build_json([a, b])
    jsonschema.validate(doc, schema)
    assert {g["trace"] for g in doc["gaps"]} == {0, 1}
    assert [d["trace"] for d in doc["devices"]] == [0, 1]
    # each trace keeps its own causes; the comparison is per step
    assert doc["traces"][0]["causes"]["sync"] == {"count": 1, "total_us": 100.0}
    assert doc["traces"][1]["causes"]["sync"] == {"count": 0, "total_us": 0.0}
    assert doc["traces"][1]["causes"]["python"] == {"count": 1, "total_us": 100.0}
    cmp = doc["comparison"]
    by = {c["cause"]: c for c in cmp["causes"]}
    assert by["sync"]["a"]["idle_us_per_step"] == 100.0 and by["sync"]["per_step_delta_us"] == -100.0
    assert by["python"]["b"]["count_per_step"] == 1.0
    assert {(f["status"], f["frame"]) for f in cmp["findings"]} >= {("gone", "model.py(42): hook"),
                                                                  ("new", "serve.py(88): postprocess")}
    assert "comparison" not in build_json([a]) and "comparison" not in build_json([a, b, a])


def test_json_comparison_on_sample_pair(schema):
    from tests.helpers import SAMPLE_TRACES
    from gapscope.trace import load

    names = ["demo-eager.prefill.json.gz", "demo-eager.decode.json.gz"]
    assert all((SAMPLE_TRACES / n).is_file() for n in names), names  # in the repository: missing is a failure
    a, b = (analyze(load(str(SAMPLE_TRACES / n), no_cache=True)) for n in names)
    doc = json.loads(json.dumps(build_json([a, b])))
    jsonschema.validate(doc, schema)
    cmp = doc["comparison"]
    assert (cmp["steps"]["a"]["steps"], cmp["steps"]["b"]["steps"]) == (1, 4)
    la = next(c for c in cmp["causes"] if c["cause"] == "launch")
    # per step: decode's 4-step total over 4 against prefill's single step, not the totals
    ta, tb = (doc["traces"][i]["causes"]["launch"]["total_us"] for i in (0, 1))
    assert la["per_step_delta_us"] == pytest.approx(tb / 4 - ta, abs=0.01)
    md = render_markdown([a, b])
    line = next(ln for ln in md.splitlines() if ln.startswith("| launch |"))
    assert line.endswith(f"**+{(tb / 4 - ta) / 1e3:.2f} ms** |")


def test_json_validates_on_sample_traces(schema):
    from tests.helpers import SAMPLE_TRACES
    from gapscope.trace import load

    files = sorted(SAMPLE_TRACES.glob("*.json.gz"))
    assert len(files) >= 25, files  # the recordings listed in traces/README.md
    for p in files:
        a = analyze(load(str(p), no_cache=True))
        doc = json.loads(json.dumps(build_json([a])))
        jsonschema.validate(doc, schema)
        assert doc["traces"][0]["distortion"] is not None  # every sample carries capture metadata


def test_report_on_a_cpu_capture(tmp_path, capsys, schema, monkeypatch):
    """A trace made by our own capture on this CPU-only machine: no GPU activity, still a valid report."""
    pytest.importorskip("torch")
    from gapscope.capture import cli as capture_cli
    from gapscope.capture import recorder

    monkeypatch.setattr(recorder, "_PROFILER_SESSIONS", [0], raising=False)
    rc = capture_cli.main(["demo", "--size", "tiny", "--cpu", "--phase", "decode", "--active", "2",
                           "--out", str(tmp_path), "--repeats", "1", "--warmup", "1"])
    assert rc == 0
    (p,) = sorted(tmp_path.glob("*.json.gz"))
    capsys.readouterr()
    assert main(["report", "--no-cache", "--json", str(p)]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, schema)
    assert doc["devices"] == [] and doc["gaps"] == []
    assert doc["traces"][0]["phase"] == "decode" and doc["traces"][0]["distortion"]["ratio"] > 0
    assert main(["report", "--no-cache", str(p)]) == 0
    assert "No GPU activity" in capsys.readouterr().out


def test_report_schema_prints_the_packaged_contract(capsys):
    """`gapscope report --schema` prints the schema shipped in the package, byte for byte, without a trace."""
    from gapscope.cli import main

    assert main(["report", "--schema"]) == 0
    out = capsys.readouterr().out
    assert out == SCHEMA_PATH.read_text()
    assert json.loads(out)["properties"]["schema"]  # a JSON schema, not some other file


def test_every_trace_key_the_report_writes_is_in_the_schema_with_its_type(schema):
    """The contract names every key of ``traces[]`` (a key the schema does not declare is unchecked: an
    ``idle_pct`` written as a string would pass), and a wrong type there fails validation."""
    from gapscope.trace import load

    root = SCHEMA_PATH.parent.parent.parent / "traces"
    docs = [build_json([analyze(load(str(root / n)))]) for n in ("demo-eager-sync.decode.json.gz",
                                                              "demo-eager-tp.decode.rank0.json.gz")]
    declared = set(schema["properties"]["traces"]["items"]["properties"])
    for doc in docs:
        jsonschema.validate(doc, schema)
        for t in doc["traces"]:
            assert set(t) <= declared, set(t) - declared
    bad = json.loads(json.dumps(docs[0]))
    bad["traces"][0]["idle_pct"] = str(bad["traces"][0]["idle_pct"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    bad = json.loads(json.dumps(docs[0]))
    bad["traces"][0]["window"]["mode"] = "everything"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_markdown_calls_a_distortion_below_one_unknown(tmp_path):
    """An un-profiled time longer than the profiled run (hf-llama.decode: 213.5 ms against 50.0 ms) is no
    distortion of 0.23x: the profiler only adds time, so the report says the timing was disturbed."""
    from gapscope.trace import load

    p = sync_trace(tmp_path, meta={"gapscope": {"phase": "decode", "profiled_us": 1000.0, "unprofiled_us": 4000.0}})
    md = render_markdown([analyze(load(str(p), no_cache=True))])
    line = next(ln for ln in md.splitlines() if ln.startswith("- Profiler distortion"))
    assert line.startswith("- Profiler distortion: unknown: the un-profiled median (4000 µs) is longer than the "
                           "profiled run (1000 µs)"), line
    assert "0.25x" not in md
