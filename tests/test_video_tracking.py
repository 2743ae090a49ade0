"""Temporal smoothing, scene cuts and the face tracker."""

from __future__ import annotations

import numpy as np
import pytest

from faceweave.video.smoothing import OneEuroFilter
from faceweave.video.tracker import FaceTracker, frame_signature, is_scene_cut


def test_one_euro_filter_removes_jitter_of_a_still_value():
    rng = np.random.default_rng(0)
    flt = OneEuroFilter(min_cutoff=1.0, beta=0.0)
    truth = np.full((10, 2), 100.0)
    raw = [truth + rng.normal(0, 1.0, truth.shape) for _ in range(120)]
    out = [flt(x, t / 30.0) for t, x in enumerate(raw)]
    jitter_raw = np.mean([np.abs(b - a).mean() for a, b in zip(raw[60:], raw[61:], strict=False)])
    jitter_out = np.mean([np.abs(b - a).mean() for a, b in zip(out[60:], out[61:], strict=False)])
    assert jitter_out < 0.3 * jitter_raw
    assert np.abs(out[-1] - truth).max() < 1.5


def test_one_euro_filter_follows_fast_motion_with_little_lag():
    flt = OneEuroFilter(min_cutoff=1.0, beta=0.5)
    out = None
    for t in range(60):
        x = np.array([10.0 * t])  # 300 px/s
        out = flt(x, t / 30.0)
    assert abs(float(out[0]) - 590.0) < 15.0


def test_one_euro_filter_reset_and_first_value():
    flt = OneEuroFilter()
    first = flt(np.array([5.0, 6.0]), 0.0)
    np.testing.assert_allclose(first, [5.0, 6.0])
    flt(np.array([50.0, 60.0]), 0.1)
    flt.reset()
    np.testing.assert_allclose(flt(np.array([1.0, 2.0]), 0.2), [1.0, 2.0])
    # a time that does not move forward restarts the filter instead of dividing by zero
    np.testing.assert_allclose(flt(np.array([3.0, 3.0]), 0.2), [3.0, 3.0])


def test_scene_cut_detection():
    rng = np.random.default_rng(1)
    a = np.full((360, 640, 3), 120, np.uint8)
    a_noisy = np.clip(a + rng.normal(0, 3, a.shape), 0, 255).astype(np.uint8)
    b = np.zeros_like(a)
    b[:, :, 2] = 220
    assert not is_scene_cut(None, frame_signature(a))
    assert not is_scene_cut(frame_signature(a), frame_signature(a_noisy))
    assert is_scene_cut(frame_signature(a), frame_signature(b))


@pytest.mark.slow
def test_tracker_keeps_ids_and_detects_on_schedule(faces_dir):
    from faceweave.analysis import FaceAnalyser
    from faceweave.io import read_image

    pixels = read_image(faces_dir / "group/fr_two_people.jpg").pixels
    with FaceAnalyser() as analyser:
        tracker = FaceTracker(analyser, detect_every=3)
        ids = []
        for i in range(7):
            shifted = np.roll(pixels, 2 * i, axis=1)  # a slow pan
            tracks = tracker.update(np.ascontiguousarray(shifted), i / 25.0)
            ids.append(sorted(t.id for t in tracks))
        assert all(len(frame_ids) == 2 for frame_ids in ids)
        assert all(frame_ids == ids[0] for frame_ids in ids)  # the same two faces all along
        # a cut to another picture: tracks restart with new ids
        other = read_image(faces_dir / "single/biden2.jpg").pixels
        tracks = tracker.update(other, 8 / 25.0)
        assert tracker.scene_cuts == 1
        assert len(tracks) == 1 and tracks[0].id not in ids[0]


@pytest.mark.slow
def test_a_face_that_jumps_is_found_again_near_its_last_place(faces_dir):
    from faceweave.analysis import FaceAnalyser
    from faceweave.io import read_image

    pixels = read_image(faces_dir / "single/biden2.jpg").pixels
    h, w = pixels.shape[:2]
    canvas = np.zeros((h, w * 2, 3), np.uint8)
    canvas[:, :w] = pixels
    with FaceAnalyser() as analyser:
        tracker = FaceTracker(analyser, detect_every=100)
        first = tracker.update(canvas, 0.0)
        assert len(first) == 1
        box = first[0].face.bbox
        jump = int(box.width * 0.9)  # too far for the mesh on the old box
        moved = np.roll(canvas, jump, axis=1)
        tracks = tracker.update(np.ascontiguousarray(moved), 1.0)
        assert tracker.redetections >= 1
        assert len(tracks) == 1 and tracks[0].id == first[0].id
        assert abs(tracks[0].face.bbox.center[0] - (box.center[0] + jump)) < box.width * 0.25
        # nothing there any more: the track is dropped, not kept at a stale place
        empty = np.zeros_like(canvas)
        assert tracker.update(empty, 2.0) == [] or tracker.update(empty, 3.0) == []


@pytest.mark.slow
def test_detections_made_ahead_give_the_same_tracks(faces_dir):
    """The video pipeline runs the scheduled detections on the decoder
    thread (``due`` / ``detect_ahead``) and hands them to ``update``: the
    tracks are the ones the tracker finds on its own."""
    from faceweave.analysis import FaceAnalyser
    from faceweave.io import read_image

    pixels = read_image(faces_dir / "group/fr_two_people.jpg").pixels
    frames = [np.ascontiguousarray(np.roll(pixels, 3 * i, axis=1)) for i in range(8)]
    with (
        FaceAnalyser() as analyser,
        FaceTracker(analyser, detect_every=3) as alone,
        FaceTracker(analyser, detect_every=3) as ahead,
    ):
        assert [ahead.due(i) for i in range(7)] == [True, False, False, True, False, False, True]
        for i, frame in enumerate(frames):
            found = ahead.detect_ahead(frame) if ahead.due(i) else None
            a = alone.update(frame, i / 25.0)
            b = ahead.update(frame, i / 25.0, found=found)
            assert [t.id for t in a] == [t.id for t in b]
            for x, y in zip(a, b, strict=False):
                np.testing.assert_allclose(x.face.mesh, y.face.mesh, atol=1e-3)
        kept = list(ahead.tracks)
        assert kept and all(t.follower is not None for t in kept)
    # leaving the block closed every mesh graph
    assert all(t.follower is None for t in kept) and ahead.tracks == [] and ahead._spare == []


@pytest.mark.slow
def test_mesh_follower_follows_a_face_like_the_still_mesh_and_falls_back(faces_dir):
    from faceweave.analysis import FaceAnalyser
    from faceweave.analysis.landmarker import MeshFollower
    from faceweave.io import read_image

    pixels = read_image(faces_dir / "single/biden2.jpg").pixels
    with FaceAnalyser() as analyser:
        face = analyser.analyse(pixels)[0]
        follower = MeshFollower(analyser.mesher)
        try:
            box = face.bbox
            for i in range(6):
                frame = np.ascontiguousarray(np.roll(pixels, 2 * i, axis=1))
                mesh = follower.landmarks(frame, box)
                still = analyser.mesher.landmarks(frame, box)
                assert mesh is not None and mesh.shape == (478, 3)
                gap = np.median(np.linalg.norm(mesh[:, :2] - still[:, :2], axis=1))
                assert gap < 0.02 * face.size
                box = type(box)(
                    *(float(v) for v in (mesh[:, 0].min(), mesh[:, 1].min(), mesh[:, 0].max(), mesh[:, 1].max()))
                )
            # no face in the box: the follower (and then the still mesh) finds none
            assert follower.landmarks(np.zeros_like(pixels), box) is None
        finally:
            follower.close()


@pytest.mark.slow
def test_faces_beyond_the_follower_pool_are_followed_with_the_still_mesh(faces_dir):
    """At most ``followers`` video-mode graphs: a second face is still
    followed (with the still-image mesh), and a graph whose face ends is
    reused for the next face instead of a new one being made."""
    from faceweave.analysis import FaceAnalyser
    from faceweave.io import read_image

    pixels = read_image(faces_dir / "group/fr_two_people.jpg").pixels
    with FaceAnalyser() as analyser, FaceTracker(analyser, detect_every=100, followers=1) as tracker:
        for i in range(4):
            tracks = tracker.update(np.ascontiguousarray(np.roll(pixels, 2 * i, axis=1)), i / 25.0)
            assert len(tracks) == 2
        assert sum(t.follower is not None for t in tracks) == 1 and tracker._made == 1
        graph = next(t.follower for t in tracks if t.follower is not None)
        # a cut to another picture: the tracks end, their graph waits for the next face
        other = read_image(faces_dir / "single/biden2.jpg").pixels
        tracker.update(other, 5 / 25.0)
        tracks = tracker.update(other, 6 / 25.0)
        assert len(tracks) == 1 and tracks[0].follower is graph and tracker._made == 1
