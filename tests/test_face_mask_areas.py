"""FaceFusion's face mask areas (upper-face, lower-face, mouth): the hull of
the target's 68 landmarks of the chosen areas, smoothed as FaceFusion
smooths its masks, in both compositing modes, through the options, the CLI
and the service; and a video track's 68 landmarks following its mesh.

The 68 landmarks come from a fan_68_5 stand-in (an oval of known points on
the template, tests/analysis_fixtures.py), the swapper is a stand-in whose
face is known (tests/test_face_masker_swaps.py), the target a real photo."""

from __future__ import annotations

import json

import cv2
import numpy as np
import onnx
import pytest
from tests.analysis_fixtures import landmarker_stand_in
from tests.neural_fixtures import arcface_model
from tests.test_face_masker_swaps import (
    ARC_W,
    SOURCE,
    TARGET,
    UNMARKED,
    expected_facefusion,
    mirrored_swapper,
    on_frame,
)

from faceweave.compositing.facefusion import FACE_MASK_AREAS, area_mask, crop_points, smooth_occlusion
from faceweave.options import SwapOptions
from faceweave.pipeline import FaceSwapper

AREAS = ("upper-face", "lower-face", "mouth")


def _oval68(center=(100.0, 110.0), radii=(40.0, 55.0)) -> np.ndarray:
    angles = np.linspace(0.0, 2 * np.pi, 68, endpoint=False)
    return np.stack([center[0] + radii[0] * np.cos(angles), center[1] + radii[1] * np.sin(angles)], axis=-1)


# -- the mask itself ------------------------------------------------------------


def test_the_area_sets_are_facefusion_s_landmark_indices():
    assert tuple(FACE_MASK_AREAS) == AREAS
    assert set(FACE_MASK_AREAS["upper-face"]) == {0, 1, 2, 14, 15, 16, *range(17, 27), *range(31, 36)}
    assert set(FACE_MASK_AREAS["lower-face"]) == {*range(3, 14), *range(31, 36)}
    assert set(FACE_MASK_AREAS["mouth"]) == set(range(48, 68))


def test_an_area_mask_is_the_smoothed_hull_of_its_points():
    points = _oval68(center=(150.0, 160.0), radii=(90.0, 120.0))
    mask = area_mask(300, points, ["mouth"])
    assert mask.shape == (300, 300) and mask.dtype == np.float32
    hull = np.zeros((300, 300), np.float32)
    cv2.fillConvexPoly(hull, cv2.convexHull(points[48:68].astype(np.int32)), 1.0)
    np.testing.assert_array_equal(mask, smooth_occlusion(hull))
    inside = cv2.erode((hull > 0).astype(np.uint8), np.ones((25, 25), np.uint8)) > 0
    outside = cv2.dilate((hull > 0).astype(np.uint8), np.ones((25, 25), np.uint8)) == 0
    assert inside.sum() > 50 and np.all(mask[inside] > 0.97) and np.all(mask[outside] == 0.0)
    moved = points.copy()
    moved[:48] += 30.0  # only the mouth's points count for the mouth
    np.testing.assert_array_equal(area_mask(300, moved, ["mouth"]), mask)
    both = area_mask(300, points, ["mouth", "upper-face"])  # one hull over the union of the areas
    assert both.sum() > mask.sum() and np.all(both >= mask)


def test_crop_points_follow_the_matrix():
    matrix = np.array([[0.5, 0.1, 3.0], [-0.1, 0.5, -2.0]])
    points = np.array([[10.0, 20.0], [0.0, 0.0]])
    np.testing.assert_allclose(crop_points(points, matrix), [[10.0, 7.0], [3.0, -2.0]])


# -- options --------------------------------------------------------------------


def _options(**fields) -> dict:
    return {"swapper": "inswapper_128", "analysis": {"face_landmarker": "fan_68_5"}, **fields}


def test_the_options_refuse_what_cannot_draw_areas():
    from pydantic import ValidationError

    made = SwapOptions.model_validate(_options(masks={"face_mask_areas": ["mouth", "upper-face", "mouth"]}))
    assert made.masks.face_mask_areas == ("mouth", "upper-face")
    assert SwapOptions().masks.face_mask_areas == ()  # off by default
    with pytest.raises(ValidationError, match="unknown face mask area 'chin'; one of upper-face, lower-face, mouth"):
        SwapOptions.model_validate(_options(masks={"face_mask_areas": ["chin"]}))
    with pytest.raises(ValidationError, match="68 landmarks.*--face-landmarker.*2dfan4 or fan_68_5"):
        SwapOptions.model_validate({"swapper": "inswapper_128", "masks": {"face_mask_areas": ["mouth"]}})
    with pytest.raises(ValidationError, match="for the neural swappers"):
        SwapOptions.model_validate(_options(swapper="mesh", masks={"face_mask_areas": ["mouth"]}))


def test_the_service_job_spec_carries_the_areas():
    from faceweave.errors import InvalidOptionError
    from faceweave.service.jobspec import JobOptions, options_from_form

    job = options_from_form(
        {"swapper": ["inswapper_128"], "face_landmarker": ["2dfan4"], "face_mask_areas": ["mouth,lower-face"]}
    )
    job.check(kind="image")
    made = job.swap_options(kind="image", has_reference=False, max_pixels=10**7, video_working_size=192)
    assert made.masks.face_mask_areas == ("mouth", "lower-face") and made.analysis.face_landmarker == "2dfan4"
    with pytest.raises(InvalidOptionError, match="unknown face mask area 'nose'"):
        JobOptions(swapper="inswapper_128", face_landmarker="2dfan4", face_mask_areas=("nose",)).check(kind="image")
    with pytest.raises(InvalidOptionError, match="68-point face landmarker"):
        JobOptions(swapper="inswapper_128", face_mask_areas=("mouth",)).check(kind="image")


# -- whole swaps ----------------------------------------------------------------


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    from faceweave.models import ModelStore, import_model

    folder = tmp_path_factory.mktemp("models")
    files = tmp_path_factory.mktemp("files")
    made = {
        "inswapper_128": mirrored_swapper(source_gain=3.0),
        "arcface_w600k_r50": arcface_model(ARC_W, input_name="input"),
        "fan_68_5": landmarker_stand_in("fan_68_5"),
    }
    store = ModelStore(folder)
    for name, model in made.items():
        onnx.save(model, files / f"{name}.onnx")
        import_model(store, name, files / f"{name}.onnx")
    return folder


def _swap(faces_dir, models_dir, areas=(), **fields):
    opts = SwapOptions.model_validate(
        _options(masks={"face_mask_areas": list(areas)}, runtime={"models_dir": str(models_dir)}, **fields)
    )
    with FaceSwapper(opts, provenance=UNMARKED) as swapper:
        result = swapper.swap([faces_dir / SOURCE], faces_dir / TARGET)
        target = swapper.read(faces_dir / TARGET, role="target").pixels
        face = result.faces[result.swapped[0].target_index]
        source = swapper.load_sources([faces_dir / SOURCE])[0]
        found = swapper.swapper.swap_frame(source, target, [face.kps5])[0]
    return result.image, target, found, face


@pytest.mark.slow
def test_areas_are_the_frame_s_mask_in_facefusion_mode(models_dir, faces_dir):
    areas = ["upper-face", "lower-face"]
    pixels, target, found, face = _swap(faces_dir, models_dir, areas, compositing="facefusion", pixel_boost=256)
    assert face.landmarks68 is not None
    side = int(found.face.shape[0])
    area = area_mask(side, crop_points(face.landmarks68, found.matrix), areas)
    np.testing.assert_array_equal(pixels, expected_facefusion(target, found, [None, None, area]))
    plain, _, _, _ = _swap(faces_dir, models_dir, compositing="facefusion", pixel_boost=256)
    on = on_frame(area, found.matrix, target.shape)
    box = on_frame(found.mask, found.matrix, target.shape) > 0.99
    outside, inside = box & (on == 0.0), box & (on > 0.99)
    assert outside.sum() > 500 and inside.sum() > 500
    assert np.array_equal(pixels[outside], target[outside])  # outside the lower face: the target's own
    assert np.abs(pixels[inside].astype(int) - plain[inside]).max() <= 3  # inside: the swap as without areas
    assert np.abs(plain[outside].astype(int) - target[outside]).mean() > 5


@pytest.mark.slow
def test_areas_keep_the_target_outside_them_in_faceweave_mode(models_dir, faces_dir):
    pixels, target, found, face = _swap(faces_dir, models_dir, ["upper-face"], compositing="faceweave", pixel_boost=256)
    plain, _, _, _ = _swap(faces_dir, models_dir, compositing="faceweave", pixel_boost=256)
    side = int(found.face.shape[0])
    area = area_mask(side, crop_points(face.landmarks68, found.matrix), ["upper-face"])
    on = on_frame(area, found.matrix, target.shape)
    inside = on_frame(np.ones((side, side), np.float32), found.matrix, target.shape) > 0.99
    # faceweave feathers its masks at half resolution: well away from the area's hull
    far = cv2.erode((on == 0.0).astype(np.uint8), np.ones((17, 17), np.uint8)) > 0
    changed = np.abs(plain.astype(int) - target).max(axis=2) > 8
    kept, shown = inside & far & changed, inside & (on > 0.99) & changed
    assert kept.sum() > 300 and shown.sum() > 50
    assert np.abs(pixels[kept].astype(int) - target[kept]).max() <= 1
    assert np.abs(pixels[shown].astype(int) - target[shown]).mean() > 5


@pytest.mark.slow
def test_the_cli_takes_the_areas(models_dir, faces_dir, tmp_path):
    from tests.test_cli import assert_clean_error, faceweave

    out = tmp_path / "out.png"
    neural = ["-s", faces_dir / SOURCE, "-t", faces_dir / TARGET, "-o", out, "--swapper", "inswapper_128"]
    neural += ["--models-dir", models_dir, "--compositing", "facefusion", "--no-watermark"]
    proc = faceweave("swap", *neural, "--face-landmarker", "fan_68_5", "--face-mask-areas", "chin")
    assert_clean_error(proc, 2, "unknown face mask area 'chin'", "upper-face, lower-face, mouth")
    proc = faceweave("swap", *neural, "--face-mask-areas", "mouth")
    assert_clean_error(proc, 2, "68-point face landmarker", "--face-landmarker")
    assert not out.exists()
    args = ["--face-landmarker", "fan_68_5", "--face-mask-areas", "upper-face,lower-face", "--face-mask-areas", "mouth"]
    audit = tmp_path / "audit.jsonl"
    proc = faceweave("swap", *neural, *args, "--audit-log", audit)
    assert proc.returncode == 0, proc.stderr
    assert out.is_file()
    line = json.loads(audit.read_text().splitlines()[-1])
    assert line["options"]["swap"]["masks"]["face_mask_areas"] == list(AREAS)


# -- videos ---------------------------------------------------------------------


def test_a_video_track_s_68_landmarks_follow_its_mesh(astronaut):
    """Between detections the 68 landmarks move with the smoothed mesh (the
    similarity from the mesh at the last detection), as the five points do."""
    from dataclasses import replace

    from faceweave.analysis import FaceAnalyser
    from faceweave.analysis.follow import follow_points, similarity
    from faceweave.options import AnalysisOptions
    from faceweave.video.tracker import FaceTracker

    pixels = np.ascontiguousarray(astronaut)
    with (
        FaceAnalyser(AnalysisOptions(small_faces=False)) as analyser,
        FaceTracker(analyser, detect_every=50) as tracker,
    ):
        (face,) = analyser.analyse(pixels)
        points = _oval68(center=tuple(face.kps5.mean(axis=0)))
        (track,) = tracker.update(pixels, 0.0, found=[replace(face, landmarks68=points)])
        np.testing.assert_allclose(track.face.landmarks68, points, atol=0.5)
        shifted = np.ascontiguousarray(np.roll(pixels, 6, axis=1))  # the face moves 6 px right
        for t in (0.04, 0.08, 0.12):
            (track,) = tracker.update(shifted, t, found=None)
        mesh_then, mesh_now = face.mesh[:, :2], track.face.mesh[:, :2]
        np.testing.assert_allclose(track.face.landmarks68, follow_points(points, mesh_then, mesh_now), atol=1e-6)
        assert 3.0 < float(np.mean(track.face.landmarks68[:, 0] - points[:, 0])) < 7.0
        assert np.allclose(similarity(mesh_then, mesh_then), np.hstack([np.eye(2), np.zeros((2, 1))]), atol=1e-9)
        (plain,) = FaceTracker(analyser).update(pixels, 0.0, found=[face])
        assert plain.face.landmarks68 is None
