"""The explorer screen's state (tui/app/shown.py): one frozen value made from a scene; its fields change
exactly when what they stand for changes, which is what decides the screen's redraws (MainScreen.watch_shown).
No app here."""

from __future__ import annotations

import dataclasses

import pytest

import gapscope.tui.trace
from gapscope.tui.app.scene import Scene
from gapscope.tui.app.shown import Shown
from tests.helpers.app import three_gaps


@pytest.fixture
def scene(tmp_path):
    p = three_gaps(tmp_path)
    from gapscope.tui.analysis import analyze

    model = gapscope.tui.trace.load(str(p), no_cache=True)
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
    scene.lane_cursor += 1
    after = shown(scene)
    assert after.lane == before.lane + 1 and not after.lanes_changed(before)


def test_the_selection_and_the_filter(scene):
    before = shown(scene)
    gid = scene.select(1)
    after = shown(scene)
    assert after.selected == (gid, 0) != before.selected and after.gaps == before.gaps
    scene.apply_filter(int(scene.g_cause[gid]))
    filtered = shown(scene)
    assert filtered.gaps != after.gaps and filtered.gaps[1] == int(scene.g_cause[gid])


def test_the_keys_that_apply_follow_the_search(scene):
    before = shown(scene)
    assert scene.search("k1")
    after = shown(scene)
    assert after.search != before.search and after.keys != before.keys  # n / N step through the matches now
    assert shown(scene, msg="hello") != after and shown(scene, view="kernels").keys != after.keys
