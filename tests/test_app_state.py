"""The explorer screen's state (tui/shown.py): one frozen value made from a scene; its fields change
exactly when what they stand for changes, which is what decides the screen's redraws (MainScreen.watch_shown;
DiffScreen.watch_shown for the before/after screen's ``DiffShown``). No app here."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import gapscope.trace
from gapscope.tui.diffscene import DiffScene
from gapscope.tui.scene import Scene
from gapscope.tui.shown import DiffShown, Shown
from tests.helpers import A_STEP, B_STEP, stepped
from tests.helpers.app import three_gaps


@pytest.fixture
def scene(tmp_path):
    p = three_gaps(tmp_path)
    from gapscope.analysis import analyze

    model = gapscope.trace.load(str(p), no_cache=True)
    sc = Scene(str(p), model)
    a = analyze(model)
    sc.set_analysis(a, a.config.min_listed_gap_ns)
    return sc


def shown(sc, msg="", view="lanes"):
    return Shown.of(sc, tabs=(0, 1), data=1, view=view, msg=msg, diff=False)


def test_nothing_changed_is_the_same_state(scene):
    assert shown(scene) == shown(scene)
    with pytest.raises(dataclasses.FrozenInstanceError):
        shown(scene).msg = "x"


def test_a_pan_changes_the_window_and_redraws_the_lanes(scene):
    before = shown(scene)
    scene.view.pan(0.25)
    after = shown(scene)
    assert after.window != before.window and after.lanes_changed(before)
    assert (after.selected, after.gaps, after.lane) == (before.selected, before.gaps, before.lane)


def test_a_lane_move_alone_is_not_a_change_of_the_lanes(scene):
    """Only the lane cursor moved: the screen redraws the two rows whose label changed, not every lane."""
    before = shown(scene)
    scene.display.cursor += 1
    after = shown(scene)
    assert after.lane == before.lane + 1 and not after.lanes_changed(before)


def test_the_selection_and_the_filter(scene):
    before = shown(scene)
    gid = scene.select(1)
    after = shown(scene)
    assert after.selected == (gid, 0) != before.selected and after.gaps == before.gaps
    scene.apply_filter(int(scene.gaps.cause[gid]))
    filtered = shown(scene)
    assert filtered.gaps != after.gaps and filtered.gaps[1] == int(scene.gaps.cause[gid])


def test_the_keys_that_apply_follow_the_search(scene):
    before = shown(scene)
    assert scene.find("k1")
    after = shown(scene)
    assert after.search != before.search and after.keys != before.keys  # n / N step through the matches now
    assert shown(scene, msg="hello") != after and shown(scene, view="kernels").keys != after.keys


# ---------------------------------------------------------------- the before/after screen (DiffShown)
@pytest.fixture
def diff(tmp_path):
    """A: 2 steps of k1 k2 k3; B: 4 steps of k1 k23: B's gaps before k1 are new, those before k23 match A's
    before k2."""
    from gapscope.analysis import analyze

    a = stepped([A_STEP] * 2).write(tmp_path / "a.json")
    b = stepped([B_STEP] * 4, frame="app.py(9): other").write(tmp_path / "b.json")
    ma, mb = (gapscope.trace.load(str(p), no_cache=True) for p in (a, b))
    return DiffScene(str(a), ma, analyze(ma), str(b), mb, analyze(mb))


def test_the_diff_state_is_frozen_and_a_pan_changes_only_the_window(diff):
    before = DiffShown.of(diff)
    assert DiffShown.of(diff) == before
    with pytest.raises(dataclasses.FrozenInstanceError):
        before.msg = "x"
    diff.view.pan(0.25)
    after = DiffShown.of(diff)
    assert after.window != before.window and after.window[0] > before.window[0] and after.lanes_changed(before)
    assert (after.step, after.moved, after.selected, after.lane) == \
        (before.step, before.moved, before.selected, before.lane)


def test_a_step_moves_b_and_a_lane_move_alone_redraws_no_lane(diff):
    before = DiffShown.of(diff)
    diff.set_step(1)
    on_step = DiffShown.of(diff)
    assert on_step.step == (1, None) != before.step and on_step.moved == before.moved + 1
    assert on_step.lanes_changed(before)
    diff.display.cursor += 1
    moved = DiffShown.of(diff)
    assert moved.lane == on_step.lane + 1 and not moved.lanes_changed(on_step)
    assert DiffShown.of(diff, "no gap of B is new") != moved


def test_visiting_a_b_gap_selects_it_and_its_match_in_a(diff):
    before = DiffShown.of(diff)
    matched = [int(g) for g in diff.b_order if diff.a_match[g] >= 0]
    new = [int(g) for g in diff.new_order]
    assert matched and new and not set(matched) & set(new)
    gid = matched[0]
    diff.align_on_gap(gid)
    diff.select_gid(gid)
    on_gap = DiffShown.of(diff)
    assert on_gap.selected == (gid, int(diff.a_match[gid])) and on_gap.selected[1] >= 0
    assert on_gap.step[1] == "the kernel after the gap" and on_gap.moved > before.moved
    diff.select_gid(new[0])  # a new gap of B matches no gap of A
    assert DiffShown.of(diff).selected == (new[0], -1)


def test_the_listed_gaps_of_a_scene_are_merged_largest_first(scene):
    """tui/scenegaps.py: the scene's gap columns, its order and its gap rows come from the analysis."""
    from gapscope.tui.scenegaps import gap_lanes_of, listed_gaps

    g = listed_gaps(scene.parts)
    gaps = scene.analysis.gaps
    assert sorted(g.dur.tolist()) == [100_000, 300_000, 500_000] and g.part.tolist() == [0, 0, 0]
    assert g.dur.tolist() == np.asarray(gaps.dur_ns)[g.row].tolist()
    assert g.dur[g.largest_first].tolist() == [500_000, 300_000, 100_000]
    assert g.largest_first.tolist() == scene.gaps.all_listed.tolist()
    assert (g.end - g.start).tolist() == g.dur.tolist()
    lanes, cover = gap_lanes_of(g)
    assert lanes.keys() == cover.keys() == {(0, int(d)) for d in g.device}
    assert sorted(np.concatenate([ln.segs.ref for ln in lanes.values()]).tolist()) == [0, 1, 2]
