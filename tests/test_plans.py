"""Plan once per track, apply per frame (faceweave.compositing.plans): when a
track's tone plan is made anew, how it is handed between render threads, and
that what changes from frame to frame (hands, a second face) stays per frame."""

from __future__ import annotations

import threading
from dataclasses import replace

import numpy as np
import pytest

from faceweave.compositing.plans import HeldPlan, PlanPolicy, PlanSlot, crop_layout, layout_drift
from faceweave.compositing.values import FacePlan, MaskPlan, TonePlan
from faceweave.geometry.align import crop_matrix
from faceweave.types import BBox

SOURCE, OTHER = object(), object()
LAYOUT = np.random.default_rng(0).uniform(0.2, 1.6, (478, 2)).astype(np.float32)
LIGHT = np.array([60.0, 12.0, 15.0])


def _held(uses: int = 1, **change) -> HeldPlan:
    values = {"frame": 10, "source": SOURCE, "layout": LAYOUT, "face_size": 192, "light": LIGHT, "uses": uses}
    values.update(change)
    return HeldPlan(slot=PlanSlot(values["frame"]), **values)


@pytest.mark.parametrize(
    ("held", "frame", "change", "renews"),
    [
        (None, 0, {}, True),  # a new track (or a second face) makes its own
        (_held(), 11, {}, False),
        (_held(uses=5), 15, {}, False),  # used by 5 frames: a sixth may use it (every=6)
        (_held(uses=6), 16, {}, True),  # used by 6 frames: made anew
        (_held(uses=2), 40, {}, False),  # frames dropped between (live): counted as used, not as read
        (_held(), 11, {"source": OTHER}, True),
        (_held(), 11, {"face_size": 180}, True),  # another grid
        (_held(), 11, {"layout": LAYOUT + 0.005}, False),  # drift 0.007 < 0.01
        (_held(), 11, {"layout": LAYOUT + 0.008}, True),  # drift 0.011: it turned or moved its mouth
        (_held(), 11, {"light": LIGHT + [1.0, 0.5, 0.5]}, False),  # 1.2 dE
        (_held(), 11, {"light": LIGHT + [2.0, 0.0, 0.0]}, True),  # the light changed
    ],
)
def test_when_a_track_makes_its_plan_anew(held, frame, change, renews):
    now = {"source": SOURCE, "layout": LAYOUT, "face_size": 192, "light": LIGHT}
    now.update(change)
    use, kept = PlanPolicy().use(held, frame=frame, **now)
    assert use.makes is renews
    if renews:
        assert kept is not held and kept.frame == frame and use.slot is kept.slot and use.slot is not None
        assert held is None or use.slot is not held.slot
    else:
        assert kept.uses == held.uses + 1 and kept.frame == held.frame and use.slot is held.slot


def test_every_one_makes_a_plan_on_every_frame():
    held = _held()
    use, _ = PlanPolicy(every=1).use(held, frame=11, source=SOURCE, layout=LAYOUT, face_size=192, light=LIGHT)
    assert use.makes


@pytest.mark.parametrize("bad", [{"every": 0}, {"drift": -0.1}, {"light": -1.0}])
def test_a_bad_policy_is_refused(bad):
    with pytest.raises(ValueError, match="plan policy"):
        PlanPolicy(**bad)


def _turned(mesh: np.ndarray, degrees: float) -> np.ndarray:
    """``mesh`` turned about the vertical axis through its centre."""
    centre = mesh.mean(axis=0)
    a = np.radians(degrees)
    rot = np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]])
    return ((mesh - centre) @ rot.T + centre).astype(np.float32)


def _layout(mesh: np.ndarray) -> np.ndarray:
    x0, y0 = mesh[:, :2].min(axis=0)
    x1, y1 = mesh[:, :2].max(axis=0)
    m, _ = crop_matrix(BBox(float(x0), float(y0), float(x1), float(y1)), face_size=192, margin=1.8)
    return crop_layout(mesh, m, 192)


def test_a_face_that_moves_or_grows_in_the_frame_keeps_its_layout_and_one_that_turns_does_not():
    mesh = np.random.default_rng(1).normal(0.0, 40.0, (478, 3)).astype(np.float32) + (300, 200, 0)
    moved = mesh + np.array([37.0, -12.0, 0.0], np.float32)
    grown = (mesh - mesh.mean(axis=0)) * 1.3 + mesh.mean(axis=0)
    assert layout_drift(_layout(mesh), _layout(moved)) < 1e-4
    assert layout_drift(_layout(mesh), _layout(grown.astype(np.float32))) < 1e-4
    assert layout_drift(_layout(mesh), _layout(_turned(mesh, 15.0))) > PlanPolicy().drift


def _tone(value: float = 1.0) -> TonePlan:
    return TonePlan(shading=np.full((8, 8, 3), value, np.float32), amount=0.5, tint=np.zeros((8, 8, 3), np.float32))


def _plan(side: int = 8) -> FacePlan:
    grid = np.ones((side, side), np.float32)
    masks = MaskPlan(skin=grid, fade=grid, inner=grid, bare=grid, shaven=grid)
    return FacePlan(masks=masks, tone=_tone())


def test_a_slot_hands_the_plan_to_a_reuser_on_another_thread():
    slot, got = PlanSlot(3), []
    reader = threading.Thread(target=lambda: got.append(slot.get(timeout=5.0)))
    reader.start()
    plan = _plan()
    slot.put(plan)
    reader.join(5.0)
    assert got == [plan] and slot.get(timeout=0.0) is plan


def test_a_reuser_gets_the_masks_before_the_making_render_has_pasted():
    """The two parts come apart: the masks and tone as soon as the maker has
    composited, how the detail is matched once it has pasted."""
    slot, plan, detail = PlanSlot(4), _plan(), object()
    slot.put(plan)
    assert slot.get(timeout=0.0) is plan and slot.get_detail(timeout=0.01) is None  # not pasted yet
    reader = threading.Thread(target=lambda: got.append(slot.get_detail(timeout=5.0)))
    got: list = []
    reader.start()
    slot.put_detail(detail)  # type: ignore[arg-type]
    reader.join(5.0)
    assert got == [detail]
    slot.give_up()  # after a full hand-over: nothing changes
    assert slot.get(timeout=0.0) is plan and slot.get_detail(timeout=0.0) is detail


def test_a_maker_that_fails_after_compositing_keeps_its_masks_and_gives_up_the_detail():
    slot, plan = PlanSlot(5), _plan()
    slot.put(plan)
    slot.give_up()
    assert slot.get(timeout=0.0) is plan and slot.get_detail(timeout=0.0) is None
    never = PlanSlot(6)
    never.give_up()
    assert never.get(timeout=0.0) is None and never.get_detail(timeout=0.0) is None


def test_a_failed_or_missing_plan_leaves_the_reuser_to_make_its_own():
    failed = PlanSlot(1)
    failed.put(None)
    assert failed.get(timeout=0.0) is None
    assert PlanSlot(2).get(timeout=0.01) is None


def test_a_plan_fits_only_its_own_grid():
    assert _tone().fits((8, 8)) and not _tone().fits((9, 8))
    assert _plan().fits((8, 8)) and not _plan(9).fits((8, 8))
    with pytest.raises(ValueError):
        MaskPlan(
            **{k: np.ones((8, 8), np.float32) for k in ("skin", "fade", "inner", "bare")},
            shaven=np.ones((4, 4), np.float32),
        )
    with pytest.raises(ValueError):
        TonePlan(shading=np.zeros((8, 8, 3), np.float32), amount=1.5, tint=np.zeros((8, 8, 3), np.float32))
    with pytest.raises(ValueError):
        TonePlan(shading=np.zeros((8, 8, 3), np.float32), amount=0.5, tint=np.zeros((4, 4, 3), np.float32))


@pytest.fixture(scope="module")
def swapped(faces_dir):
    """A crop of the astronaut with biden2's face swapped onto it, video settings."""
    from skimage import data

    from faceweave.crops import cut_crop
    from faceweave.pipeline import FaceSwapper

    with FaceSwapper() as swapper:
        (source,) = swapper.load_sources([faces_dir / "single" / "biden2.jpg"])
        pixels = np.ascontiguousarray(data.astronaut())
        face = swapper.find_faces(pixels)[0]
        crop = cut_crop(pixels, face, face_size=192)
        out = swapper.swapper.swap(source, crop)
    return crop, out


def _composite(crop, out, **kw):
    from faceweave.compositing.composite import composite
    from faceweave.options import MaskOptions

    return composite(
        crop, out, mask_options=MaskOptions(), shading=0.5, target_lips=True, folds=True, warp_frame=False, **kw
    )


@pytest.mark.slow
def test_a_reused_plan_gives_the_face_it_was_made_for_exactly_and_a_nearby_frame_nearly(swapped):
    crop, out = swapped
    fresh = _composite(crop, out)
    assert fresh.plan is not None
    again = _composite(crop, out, plan=fresh.plan)
    assert again.plan is fresh.plan
    assert np.array_equal(again.pixels, fresh.pixels)
    # the next frame, a little brighter: the reused plan is within a few levels of a fresh one
    brighter = replace(out, background=np.clip(out.background.astype(int) + 6, 0, 255).astype(np.uint8))
    new, reused = _composite(crop, brighter), _composite(crop, brighter, plan=fresh.plan)
    face = fresh.mask > 0.5
    gap = np.abs(new.pixels.astype(int) - reused.pixels.astype(int))[face]
    assert np.percentile(gap, 99) <= 4


@pytest.mark.slow
def test_a_hand_that_enters_is_cut_out_on_its_first_frame_with_a_reused_plan(swapped):
    crop, out = swapped
    plan = _composite(crop, out).plan
    hands = np.zeros(crop.pixels.shape[:2], np.float32)
    y, x = np.round(crop.mesh[1, :2]).astype(int)[::-1]  # over the nose
    hands[y - 20 : y + 20, x - 30 : x + 30] = 1.0
    held = _composite(crop, out, plan=plan, hands_mask=hands)
    under = hands > 0.5
    # the hand keeps the target's own pixels and is never pasted over
    assert np.array_equal(held.pixels[under], crop.pixels[under])
    assert float(held.paste[under].max()) == 0.0


def test_a_second_face_entering_gets_its_own_plan(faces_dir):
    """Two tracks on one frame: each makes its own plan into its own slot;
    on the next frame both reuse their own."""
    from faceweave.io import read_image
    from faceweave.options import SelectionOptions, SwapOptions
    from faceweave.pipeline import FaceSwapper
    from faceweave.video.io import VideoFrame
    from faceweave.video.planning import FramePlanner, TrackStates
    from faceweave.video.smoothing import OneEuroFilter
    from faceweave.video.tracker import Track

    photo = read_image(faces_dir / "single" / "biden2.jpg").pixels
    pixels = np.ascontiguousarray(np.hstack([photo, photo]))
    with FaceSwapper(SwapOptions(selection=SelectionOptions(mode="many"))) as swapper:
        faces = swapper.find_faces(pixels)
        (source,) = swapper.load_sources([faces_dir / "single" / "biden2.jpg"])
        planner, states = FramePlanner(swapper), TrackStates()
        one = [Track(id=1, face=faces[0], filter=OneEuroFilter())]
        two = [*one, Track(id=2, face=faces[1], filter=OneEuroFilter())]
        plans = [
            planner.plan(VideoFrame(k, k, k / 30, pixels), tracks, states, [source], None, {})
            for k, tracks in enumerate([one, two, two])
        ]
    assert len(faces) >= 2
    first, second, third = ([p.plan for p in plan if p.plan is not None] for plan in plans)
    assert [u.makes for u in first] == [True]
    assert sorted(u.makes for u in second) == [False, True]  # the newcomer makes its own
    assert [u.makes for u in third] == [False, False]
    assert len({id(u.slot) for u in third}) == 2


@pytest.mark.slow
def test_the_occlusion_plan_holds_the_skin_model_of_its_frame_and_a_reusing_frame_reads_it(swapped):
    """The skin's colour, hue and texture statistics (medians) are measured
    once, on the frame that makes the plan: that frame's occlusion is what
    it was without a plan, and a later frame tests its pixels against them."""
    from faceweave.compositing.composite import half_crop
    from faceweave.compositing.occlusion import occlusion_plan, target_occlusion
    from faceweave.compositing.regions import skin_region
    from faceweave.compositing.skin import hue_statistics, skin_statistics

    crop, out = swapped
    view = half_crop(out, out.background, face_size=crop.face_size)
    lab, mesh, fs = view.behind_lab, view.mesh, view.face_size
    skin = skin_region(view.size, mesh, fs)
    plan = occlusion_plan(lab, mesh, skin, fs)
    assert plan.skin is not None
    centre, spread = skin_statistics(lab, skin)
    np.testing.assert_array_equal(plan.skin.centre, centre)
    np.testing.assert_array_equal(plan.skin.spread, spread)
    assert plan.skin.hue == hue_statistics(lab, skin)
    made = target_occlusion(lab, mesh, skin, fs, None, plan)
    np.testing.assert_array_equal(made, target_occlusion(lab, mesh, skin, fs, None, None))
    # a plan whose skin was far bluer: this frame's skin no longer passes its colour test
    bluer = replace(plan, skin=replace(plan.skin, centre=plan.skin.centre + np.float32([0.0, 0.0, -40.0])))
    assert float(target_occlusion(lab, mesh, skin, fs, None, bluer)[skin > 0.5].mean()) < 0.5 * float(
        made[skin > 0.5].mean()
    )
