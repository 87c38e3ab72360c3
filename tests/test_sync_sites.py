"""Issue 23 item 4: look-alike sync findings. One finding per call site, whatever the detail cap
(``max_detailed_gaps``), and counts that say what they count: the title counts gaps, the fix counts calls."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.synth import Synth
from tests.helpers import model_of
from gapscope.analysis import analyze
from gapscope.analysis.thresholds import DEFAULT
from gapscope.report import build_json

MIXTRAL = Path(__file__).resolve().parent.parent / "traces" / "hf-mixtral.decode_eager.json.gz"
FORWARD = "model.py(69): forward"


def six_gaps_seven_calls(n: int = 7) -> Synth:
    """Seven iterations 100 µs apart (µs). Iterations 0-5 run ``forward``: a kernel [T+5, T+25), an ``.item()``
    whose cudaStreamSynchronize [T+6, T+26) is open when the GPU runs dry at T+25, host work, and the next
    iteration's kernel at T+105: 6 gaps of 80 µs (480 µs) at the sync. Iteration 2 reads a second value in the
    same gap (a 7th synchronising call, no gap of its own). Iteration 6 runs ``other.py(10): log`` (its sync
    ends the window's work: no gap)."""
    s = Synth()
    for i in range(n):
        T = 100 * i
        s.launch(ts=T, dur=2, kernel=f"k{i}", k_ts=T + 5, k_dur=20)
        with s.frame(FORWARD if i < n - 1 else "other.py(10): log", T + 3, 57):
            s.cpu_op("aten::item", T + 4, 23)
            s.cpu_op("aten::_local_scalar_dense", T + 4.5, 22)
            s.runtime("cudaStreamSynchronize", T + 6, 20)
            if i == 2:
                s.cpu_op("aten::item", T + 28, 5)
                s.cpu_op("aten::_local_scalar_dense", T + 28.5, 4)
                s.runtime("cudaStreamSynchronize", T + 29, 3)
            s.python("model.py(80): post", T + 35, 20)
    return s


def test_one_finding_per_call_site_past_the_detail_cap():
    # the cap at 2 detailed gaps: the 4 others used to make a frameless "4 syncs cost 320.0 µs" finding
    a = analyze(model_of(six_gaps_seven_calls()), replace(DEFAULT, max_detailed_gaps=2))
    sync = [f for f in a.findings if f.cause == "sync"]
    assert len(sync) == 1
    f = sync[0]
    assert f.evidence["frame"] == FORWARD and f.evidence["gaps"] == 6 and f.idle_ns == 480_000
    assert f.title == f"6 gaps after syncs from `{FORWARD}` cost 480.0 µs of GPU idle"
    doc = build_json([a])
    fj = next(x for x in doc["findings"] if x["id"] == f.id)
    # the fix counts the calls it removes: 7 in forward (not the 8 of the trace: log's is not this site's)
    assert fj["fix"] == f"remove the 7 synchronising calls in `{FORWARD}`"


def test_one_gap_reads_as_one_gap_after_a_sync():
    a = analyze(model_of(six_gaps_seven_calls(2)))  # forward then log: one gap of 80 µs at forward's sync
    f = next(f for f in a.findings if f.cause == "sync")
    assert f.title == f"1 gap after a sync from `{FORWARD}` cost 80.0 µs of GPU idle"


def test_mixtral_eager_decode_has_one_sync_finding_for_its_call_site():
    """The real trace: 478 sync gaps, all at ``modeling_mixtral.py(69): forward`` (62 of them past the detail cap
    were a frameless look-alike), and 352 synchronising calls in the frame within the measured steps."""
    from gapscope.trace import load

    a = analyze(load(str(MIXTRAL)))
    sync = [f for f in a.findings if f.cause == "sync"]
    assert len(sync) == 1
    f = sync[0]
    assert f.evidence["frame"] == "transformers/models/mixtral/modeling_mixtral.py(69): forward"
    assert f.evidence["gaps"] == 478
    assert f.title.startswith("478 gaps after syncs from ")
    doc = build_json([a])
    fj = next(x for x in doc["findings"] if x["id"] == f.id)
    assert fj["fix"].startswith("remove the 352 synchronising calls in ")
