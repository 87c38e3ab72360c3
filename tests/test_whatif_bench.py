"""benchmarks/whatif.py reads whatif_pairs.py's measured table (short keys, round-paired savings)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SYNC = ROOT / "traces" / "demo-eager-sync.decode.json.gz"


def test_whatif_uses_the_paired_saving_of_the_measured_table(tmp_path, capsys):
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import whatif
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    tdir = tmp_path / "traces"
    tdir.mkdir()
    shutil.copy(SYNC, tdir / SYNC.name)
    measured = {
        "eager.decode": {"min_us": 3500.0, "median_us": 3600.0, "n": 40},
        "sync.decode": {"min_us": 3900.0, "median_us": 4000.0, "n": 40,
                        "saving_pct": {"vs": "eager.decode", "median": 60.0, "p25": 58.0, "p75": 62.5}},
    }
    mj = tmp_path / "m.json"
    mj.write_text(json.dumps(measured))
    assert whatif.main(["--traces", str(tdir), "--measured", str(mj), "--json"]) == 0
    out = capsys.readouterr().out
    rows = json.loads(out[out.index("\n[") + 1:])
    assert [r["bad"] for r in rows] == ["demo-eager-sync.decode"]  # the pairs without a trace are left out
    r = rows[0]
    assert r["measured_pct"] == 60.0 and r["n"] == [40, 40] and r["bad_ms"] == 4.0 and r["fixed_ms"] == 3.6
    assert "60.0% (58.0–62.5)" in out
    # the projection of removing the .item() syncs is far below 60%: a miss, said plainly
    assert r["projected_pct"] < 30 and r["verdict"] == "miss"


def test_whatif_bad_measured_file_is_one_line_exit_2(tmp_path, capsys):
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import whatif
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    bad = tmp_path / "m.json"
    bad.write_text("{not json")
    assert whatif.main(["--measured", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("whatif: error: ") and err.count("\n") == 1


def test_whatif_rows_against_the_isolating_twin_and_a_later_traces_folder(tmp_path, capsys):
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import whatif
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    first, later = tmp_path / "a", tmp_path / "b"
    first.mkdir(), later.mkdir()
    (first / SYNC.name).write_bytes(b"not a trace")  # replaced by the later folder's copy
    shutil.copy(SYNC, later / SYNC.name)
    measured = {
        "eager.decode": {"median_us": 3000.0, "n": 60},
        "sync-noitem.decode": {"median_us": 3200.0, "n": 60},
        "sync.decode": {"median_us": 3500.0, "n": 60,
                        "saving_pct": {"vs": "eager.decode", "median": 13.0, "p25": 12.0, "p75": 14.0},
                        "saving_pct_fix_only": {"vs": "sync-noitem.decode", "median": 7.0, "p25": 5.0, "p75": 8.0}},
    }
    mj = tmp_path / "m.json"
    mj.write_text(json.dumps(measured))
    assert whatif.main(["--traces", str(first), "--traces", str(later), "--measured", str(mj), "--json"]) == 0
    out = capsys.readouterr().out
    rows = json.loads(out[out.index("\n[") + 1:])
    assert [(r["bad"], r["fixed"]) for r in rows] == [("demo-eager-sync.decode", "demo-eager.decode"),
                                                    ("demo-eager-sync.decode", "demo-eager-sync-noitem.decode")]
    assert [r["measured_pct"] for r in rows] == [13.0, 7.0]
    # one finding: against the clean twin its whole check (the .item() and abs/amax), against the isolating one the read
    assert [r["figure"] for r in rows] == ["whole check", "fix"]
    assert rows[0]["projected_pct"] > rows[1]["projected_pct"] > 0
    # without the isolating variant in the table, its row is left out
    del measured["sync-noitem.decode"]
    mj.write_text(json.dumps(measured))
    assert whatif.main(["--traces", str(later), "--measured", str(mj), "--json"]) == 0
    out = capsys.readouterr().out
    assert [r["fixed"] for r in json.loads(out[out.index("\n[") + 1:])] == ["demo-eager.decode"]


def test_every_pair_of_the_steady_traces_is_within_target(capsys):
    """Issue #14's done-criterion on real data: the what-if traces re-recorded on the H200 with the profiler warm-up
    step (benchmarks/whatif_steady/, picked by benchmarks/pick_steady.py) against the pairs measured right after
    them (benchmarks/whatif_steady_after.json). A change to the replay model that moves any projection out of
    ±35% / ±5 points of its measured saving, or above 2x it, fails here."""
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import whatif
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert whatif.main(["--traces", str(ROOT / "benchmarks" / "whatif_steady"), "--measured",
                        str(ROOT / "benchmarks" / "whatif_steady_after.json"), "--json"]) == 0
    out = capsys.readouterr().out
    rows = json.loads(out[out.index("\n[") + 1:])
    assert len(rows) == 15  # 11 pairs against the clean or graph twin, 4 against an isolating twin
    bad = [(r["bad"], r["fixed"], r["projected_pct"], r["measured_pct"]) for r in rows if r["verdict"] != "ok"]
    assert bad == []
    assert all(r["calibrated"] for r in rows)


def test_the_real_client_pairs_against_their_measured_savings(capsys):
    """Issue #25 on the real clients in traces/ (benchmarks/hf_clients.py, one capture run per pair: the two phases'
    un-profiled medians come from the same interleaved rounds). The Mixtral eager experts as one fused GPU call and
    the host top-p sampling's whole round trip are within ±35% / ±5 points of what the fix measured, neither above 2x;
    eager attention, the matmul width and ResNet's precision are projected by the op-pattern findings."""
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import whatif
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert whatif.main(["--pairs", "real", "--json"]) == 0
    out = capsys.readouterr().out
    rows = {r["bad"]: r for r in json.loads(out[out.index("\n[") + 1:])}
    assert list(rows) == ["hf-mixtral.decode_eager", "hf-sampling.decode_host", "hf-attn.prefill_eager",
                          "hf-mlp.prefill_i5633", "resnet50.fp32"]
    mx, sm = rows["hf-mixtral.decode_eager"], rows["hf-sampling.decode_host"]
    # measured: 1 - 31.38 / 49.31 ms and 1 - 25.31 / 44.04 ms (the traces' metadata, n = 60 each)
    assert round(mx["measured_pct"], 1) == 36.4 and round(sm["measured_pct"], 1) == 42.5
    assert mx["finding"] == "transformers/models/mixtral/modeling_mixtral.py(69): forward" and mx["figure"] == "frame"
    assert sm["figure"] == "round-trip" and mx["calibrated"] and sm["calibrated"]
    assert mx["verdict"] == "ok" and sm["verdict"] == "ok"
    # the GPU-side fixes are projected by the op-pattern findings (patterns.py): the matmul width, eager
    # attention (10.5% for 13.4%: the score ops and the additive mask's builder, masking_utils' eager_mask with
    # its sync, removed) and fp32 without TF32 (the twin is bf16 channels_last, compared against the pattern's
    # recommended bf16 fix: 70.7% for 64.2%, since the kernels launched while their stream was busy follow their
    # predecessors; 32.2% when they kept their recorded 0.6-3.9 ms launch-to-start) all within target
    at, ml, rn = rows["hf-attn.prefill_eager"], rows["hf-mlp.prefill_i5633"], rows["resnet50.fp32"]
    assert ml["verdict"] == "ok" and round(ml["measured_pct"], 1) == 41.0
    assert at["verdict"] == "ok" and round(at["measured_pct"], 1) == 13.4
    assert 0 < at["projected_pct"] < at["measured_pct"]
    assert rn["verdict"] == "ok" and round(rn["measured_pct"], 1) == 64.2
    assert rn["measured_pct"] < rn["projected_pct"] < 1.35 * rn["measured_pct"]
    assert all(r["verdict"] == "ok" for r in rows.values())
