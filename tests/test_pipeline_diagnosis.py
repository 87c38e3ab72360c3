"""The analysis pipeline's declared parts (types.py, evidence.py, core's stages, ranks as an input) and the one
diagnosis a trace set gets (diagnosis.py), which Markdown, JSON, the export and the explorer render."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tests.synth import Synth
from tests.helpers import model_of
from gapscope.analysis import CAUSES, analyze, analyze_ranks
from gapscope.analysis import causes as registry
from gapscope.analysis.core import profiler_distortion
from gapscope.analysis.diagnosis import diagnose, model_distortion, trace_set_kind
from gapscope.analysis.thresholds import DEFAULT
from gapscope.analysis.types import AnalysisWarning, Finding, GapDetail, GapTable
from gapscope.trace import load
from gapscope.trace.model import Kind

TRACES = Path(__file__).resolve().parent.parent / "traces"


def _sample(name: str) -> Path:
    p = TRACES / f"{name}.json.gz"
    assert p.is_file(), p  # in the repository: missing is a failure
    return p


@pytest.mark.parametrize("ranks,kind", [
    ([None], "single"),
    ([0], "single"),
    ([None, None], "pair"),
    ([0, 0], "pair"),            # two traces of one rank: before and after, not a job
    ([0, None], "pair"),
    ([0, 1], "ranks"),
    ([1, 0, 2], "ranks"),
    ([None, None, None], "many"),
    ([0, 1, 1], "many"),
    ([None] * 5, "many"),
])
def test_the_trace_set_kind_is_decided_by_one_rule(ranks, kind):
    assert trace_set_kind([SimpleNamespace(rank=r) for r in ranks]) == kind


def _pollq() -> Synth:
    """prev ends at 100 µs, next starts at 200 µs; the launching thread runs aten::add (100-120 µs) and
    aten::mul (130-150 µs; aten::mm inside it) before launching next at 195 µs."""
    s = Synth()
    s.launch(ts=0, dur=2, kernel="prev", k_ts=50, k_dur=50)
    s.cpu_op("aten::add", 100, 20)
    s.cpu_op("aten::mul", 130, 20)
    s.cpu_op("aten::mm", 132, 10)
    s.launch(ts=195, dur=3, kernel="next", k_ts=200, k_dur=10)
    return s


def test_a_new_cause_gathers_its_evidence_through_the_public_api():
    """A cause registered from outside asks ``a.evidence`` for the ops issued in its gap and the thread's last
    event before the launch; the answers come from the events written above."""
    def gather(a, x):
        return a.stacks.stack_at(x.thr, x.t0), {"ops": a.evidence.ops_in(x.thr, x.t0, x.tl),
                                                 "last": a.evidence.last_before(x.thr, x.tl)}

    toy = registry.Cause(name="toy", order=1, letter="Z", colour="blue", summary="a toy cause",
                         title="{n} toy gaps{where}: {t}", suggestion="none",
                         rule=lambda c: c.thread >= 0, gather=gather,
                         explain=lambda a, d, tl: f"ops {', '.join(d.extra['ops'])}")
    with registry.register(toy):
        a = analyze(model_of(_pollq()))
        i = int(np.argmax(a.gaps.dur_ns))
        assert (int(a.gaps.start_ns[i]), int(a.gaps.end_ns[i])) == (100_000, 200_000)
        d = a.gap_detail(i)
        assert isinstance(d, GapDetail) and d.cause == "toy"
        assert d.extra["ops"] == ["aten::add", "aten::mul"]  # outermost ops only: aten::mm is inside mul
        # the latest-starting event that ended before the launch: aten::mm (132-142 µs), 195 - 142 = 53 µs
        assert d.extra["last"] == "`aten::mm` (ended 53.0 µs before the launch)"
        assert d.explanation == "ops aten::add, aten::mul"
        assert any(isinstance(f, Finding) and f.cause == "toy" for f in a.findings)
    assert isinstance(a.gaps, GapTable) and "toy" not in CAUSES


def test_the_projection_is_on_demand_and_says_whether_it_ran():
    a = analyze(model_of(_pollq()))
    assert not a.projected and a.projection_if_ready is None
    pj = a.projection
    assert a.projected and a.projection_if_ready is pj
    b = analyze(model_of(_pollq()))
    b.drop_projection()  # a failed projection (the explorer's loader): not tried again
    assert b.projected and b.projection_if_ready is None and b.projection is None


def test_the_distortion_verdict_carries_the_metadata_figures():
    m = load(str(_sample("demo-eager-sync.decode")), no_cache=True)
    g = m.gapscope_meta
    a = analyze(m)
    (td,) = diagnose([a]).traces
    dv = td.distortion
    assert dv.ratio == pytest.approx(g["profiled_us"] / g["unprofiled_us"])
    assert (dv.profiled_us, dv.unprofiled_us) == (g["profiled_us"], g["unprofiled_us"])
    assert dv.limit == DEFAULT.large_distortion and dv.large == (dv.ratio > DEFAULT.large_distortion)
    # the warning it gives is typed, with the same figure; the report lists every warning but that one
    (w,) = [w for w in td.warnings if w.kind == "distortion"]
    assert w.figures["ratio"] == dv.ratio and w.text in a.warnings
    assert w not in td.listed_warnings and len(td.listed_warnings) == len(td.warnings) - 1
    # the explorer's header, before the analysis, reads the same verdict from the metadata
    assert model_distortion(m, None) == dv


def _meta_scene(meta: dict, analysed: bool):
    s = Synth(meta={"gapscope": meta})
    s.python("app.py(1): main", 0, 1)
    s.launch(ts=0, dur=1, kernel="k", k_ts=10, k_dur=5)
    m = model_of(s)
    return SimpleNamespace(model=m, analysis=analyze(m) if analysed else None)


# un-profiled p25 900, p75 1100 (1.22 > 1.15: noisy), min 800, max 1360: "vary 1.7x"
_SPREAD = {"min_us": 800.0, "p25_us": 900.0, "p75_us": 1100.0, "max_us": 1360.0, "n": 5}


@pytest.mark.parametrize("analysed", [True, False], ids=["analysed", "analysing"])
def test_header_warnings_word_the_verdict_from_its_figures(analysed):
    from gapscope.tui.panels import header_warnings

    slow = _meta_scene({"profiled_us": 900.0, "unprofiled_us": 1000.0, "unprofiled": _SPREAD}, analysed)
    assert header_warnings(slow) == ["un-profiled slower than profiled: distortion unknown (times vary 1.7x)"]
    big = _meta_scene({"profiled_us": 1500.0, "unprofiled_us": 1000.0, "unprofiled": _SPREAD}, analysed)
    assert header_warnings(big, narrow=True) == ["profiler distortion 1.50x uncertain: un-profiled times vary 1.7x"]
    wide = header_warnings(big)
    assert wide[0] == ("profiler distortion 1.50x (profiled / un-profiled time): CPU-side causes look bigger than "
                       "they are")
    assert wide[1].startswith("times on this node vary 1.7x; distortion uncertain: un-profiled 900–1100 µs")
    calm = _meta_scene({"profiled_us": 1100.0, "unprofiled_us": 1000.0}, analysed)
    assert header_warnings(calm) == []


def test_profiler_distortion_is_a_pure_function_of_the_metadata():
    meta = {"profiled_us": 1500.0, "unprofiled_us": 1000.0, "unprofiled": _SPREAD}
    d, w = profiler_distortion(meta, DEFAULT)
    assert d["ratio"] == 1.5 and d["ratio_low"] == pytest.approx(1500 / 1100) and d["timing_noisy"] is True
    assert [x.kind for x in w] == ["timing-noisy", "distortion"]
    assert w[0].figures["vary"] == pytest.approx(1.7) and w[1].figures == {
        "ratio": 1.5, "profiled_us": 1500.0, "unprofiled_us": 1000.0, "limit": DEFAULT.large_distortion}
    assert profiler_distortion(meta, DEFAULT) == (d, w)  # nothing kept between calls
    assert profiler_distortion({"phase": "decode"}, DEFAULT) == (None, [])
    assert isinstance(w[0], AnalysisWarning)


def test_an_export_compares_a_pair_once(tmp_path, monkeypatch):
    from gapscope.analysis import compare as cmp_mod
    from gapscope.tui.export import export_all

    calls = []
    real = cmp_mod.compare

    def counted(a, b, *args, **kw):
        calls.append((a, b))
        return real(a, b, *args, **kw)

    monkeypatch.setattr(cmp_mod, "compare", counted)
    a, b = (analyze(model_of(_pollq())) for _ in range(2))
    trace = tmp_path / "x.json"
    trace.write_text("{}")
    paths = export_all([a, b], str(trace), None)
    assert sorted(Path(p).name for p in paths) == ["x.gapscope.json", "x.gapscope.md"]
    assert calls == [(a, b)]
    assert '"comparison"' in Path(paths[1] if paths[1].endswith(".json") else paths[0]).read_text()


def test_the_ranks_of_a_job_are_an_input_of_each_rank_analysis():
    files = sorted(TRACES.glob("demo-eager-tp-late1.decode.rank*.json.gz"))
    assert len(files) == 2
    aa = analyze_ranks([load(str(p), no_cache=True) for p in files])
    d = diagnose(aa)
    assert d.kind == "ranks" and d.comparison is None and d.cross_rank is aa[0].cross_rank is aa[1].cross_rank
    job = aa[0].job
    assert job is aa[1].job and job.match is d.cross_rank and job.late is not None
    late = job.late.rank
    other = next(a for a in aa if a.rank != late)
    # the other rank's collective gaps name the late rank from their first explanation on
    assert other.late_rank_note == f"Across the ranks, {job.late_note(other.rank)[len('Across the ranks, '):]}"
    rows = np.flatnonzero(other.gaps.cause == CAUSES.index("collective"))
    assert rows.size and all(other.gap_detail(int(r)).explanation.endswith(other.late_rank_note) for r in rows[:3])
    assert next(a for a in aa if a.rank == late).late_rank_note is None
    assert aa[[a.rank for a in aa].index(late)].findings[0].id == f"late-rank-{late}"
    assert [w.kind for w in other.alerts if w.kind == "ranks"] == ["ranks"] * sum(
        1 for w in job.match.warnings if w.startswith(f"rank {other.rank}:") or not w.startswith("rank "))


@pytest.mark.parametrize("ranks,pair", [((None, None), True), ((0, 0), True), ((0, 1), False)])
def test_the_explorers_diff_pair_follows_the_trace_set_rule(ranks, pair):
    """D diffs two tabs when the report would compare them: two traces each with its own rank are ranks."""
    from gapscope.tui.diffscene import diff_pair

    analyses = [SimpleNamespace(rank=r) for r in ranks]  # each the final analysis of its tab (its state's)
    scenes = [SimpleNamespace(multi=False, analysis=a, state=SimpleNamespace(final=a), part=f"p{i}")
              for i, a in enumerate(analyses)]
    assert diff_pair(scenes, 0) == (("p0", "p1") if pair else None)
    assert diff_pair(scenes[:1], 0) is None
