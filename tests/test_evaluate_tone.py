"""The skin-tone metric (the judge's ``tone_err``): synthetic faces whose
answer follows by hand, and a real photo tinted on the face or all over."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from faceweave.evaluate import tone as T
from faceweave.evaluate.metrics import delta_e, rgb_to_lab
from faceweave.evaluate.regions import polygon_mask
from faceweave.geometry import topology as topo

SKIN = (200, 150, 125)
BACKGROUND = (40, 60, 110)  # dark blue: not skin


# ------------------------------------------------------------------ helpers


def face_mesh(width: float = 150.0, centre=(200.0, 190.0)) -> np.ndarray:
    """(478, 3) frontal mesh (the reference shape) ``width`` pixels wide."""
    ref = topo.reference_mesh().astype(np.float64)
    scale = width / float(np.ptp(ref[:468, 0]))
    mesh = ref * scale
    mesh[:, :2] += centre
    return mesh


def oval(mesh: np.ndarray, shape) -> np.ndarray:
    return polygon_mask(shape, mesh[topo.face_oval(), :2])


def textured(shape=(420, 400), color=SKIN, std: float = 6.0, seed: int = 0) -> np.ndarray:
    """Skin-coloured picture with smooth grey noise."""
    rng = np.random.default_rng(seed)
    noise = cv2.GaussianBlur(rng.normal(0, std, shape).astype(np.float32), (0, 0), 1.5)[..., None]
    return np.clip(np.array(color, np.float32) + noise, 0, 255).astype(np.uint8)


def lab_distance(rgb_a, rgb_b) -> float:
    return float(delta_e(rgb_to_lab(np.array(rgb_a, np.uint8)), rgb_to_lab(np.array(rgb_b, np.uint8))))


MESH = face_mesh()


# ------------------------------------------------------------------ regions


def test_canonical_crop_scales_the_face_to_the_canonical_width():
    for width in (60.0, 150.0):
        mesh = face_mesh(width)
        crop = T.canonical_crop(textured(), textured(seed=1), mesh, mesh)
        assert float(np.ptp(crop.target_points[:468, 0])) == pytest.approx(200.0, rel=0.02)
        assert crop.result.shape == crop.target.shape and crop.result_points is not None


def test_the_cheeks_are_two_mirror_polygons_below_the_eyes():
    shape = (420, 400)
    cheeks = T.cheek_mask(MESH[:, :2], shape)
    ys, xs = np.nonzero(cheeks)
    centre_x = MESH[topo.CHIN, 0]
    left, right = xs < centre_x, xs > centre_x
    assert left.sum() == pytest.approx(right.sum(), rel=0.05)  # the reference face is symmetric
    eyes_y = MESH[[topo.RIGHT_EYE_LOWER, topo.LEFT_EYE_LOWER], 1].max()
    assert ys.min() > eyes_y and ys.max() < MESH[topo.UPPER_LIP_INNER, 1]


def test_the_surroundings_lie_outside_the_face():
    shape = (420, 400)
    around = T.surroundings_mask(MESH[:, :2], shape, face_width=150.0)
    assert around.sum() > 1000 and not (around & oval(MESH, shape)).any()
    ys, _ = np.nonzero(around)
    assert ys.max() > MESH[topo.CHIN, 1] and ys.min() < MESH[topo.FOREHEAD_TOP, 1]  # neck and hairline


# ------------------------------------------------------------------ the value


@pytest.mark.parametrize(
    "tint",
    [(230, 140, 90), (215, 150, 125), (170, 160, 150), (225, 185, 165)],
    ids=["orange", "redder", "grey", "pale"],
)
def test_a_tinted_face_scores_the_tints_delta_e(tint):
    target = np.full((420, 400, 3), SKIN, np.uint8)
    result = target.copy()
    result[oval(MESH, target.shape)] = tint
    assert T.tone_error(result, target, MESH, MESH) == pytest.approx(lab_distance(tint, SKIN), abs=0.02)
    shift = T.tone_shift(result, target, MESH, MESH)
    assert shift is not None
    np.testing.assert_allclose(shift, rgb_to_lab(np.array(tint, np.uint8)) - rgb_to_lab(np.array(SKIN, np.uint8)))


def test_the_sign_of_the_vector():
    target = np.full((420, 400, 3), SKIN, np.uint8)
    pale, orange = target.copy(), target.copy()
    pale[oval(MESH, target.shape)] = (225, 185, 165)
    orange[oval(MESH, target.shape)] = (230, 140, 90)
    d_pale, d_orange = T.tone_shift(pale, target, MESH), T.tone_shift(orange, target, MESH)
    assert d_pale is not None and d_orange is not None
    assert d_pale[0] > 0  # paler
    assert d_orange[1] > 0 and d_orange[2] > 0  # redder and yellower


def lab_to_rgb(lab) -> tuple[int, int, int]:
    rgb = cv2.cvtColor(np.array([[lab]], np.float32), cv2.COLOR_Lab2RGB)[0, 0]
    return tuple(int(v) for v in np.clip(rgb * 255.0 + 0.5, 0, 255))


def test_a_face_as_far_from_the_neck_in_another_direction_is_not_zero():
    """The old score (difference of the two distances to the neck) gave 0 here:
    the target's face was redder than its neck, the result's is as much paler."""
    neck = rgb_to_lab(np.array(SKIN, np.uint8)).astype(np.float64)
    face_before, face_after = lab_to_rgb(neck + (0, 8, 0)), lab_to_rgb(neck + (8, 0, 0))
    target = np.full((420, 400, 3), SKIN, np.uint8)
    face = oval(MESH, target.shape)
    target[face] = face_before
    result = target.copy()
    result[face] = face_after
    assert lab_distance(face_before, SKIN) == pytest.approx(lab_distance(face_after, SKIN), abs=0.3)
    got = T.tone_error(result, target, MESH, MESH)
    assert got == pytest.approx(lab_distance(face_after, face_before), abs=0.02) and got > 10


def test_a_whole_image_regrade_scores_about_zero():
    target = textured()
    lab = rgb_to_lab(target) + np.array([3.0, 4.0, 6.0], np.float32)  # warmer and brighter everywhere
    result = np.clip(cv2.cvtColor(lab, cv2.COLOR_Lab2RGB) * 255.0 + 0.5, 0, 255).astype(np.uint8)
    assert T.tone_error(result, target, MESH, MESH) == pytest.approx(0.0, abs=0.3)
    assert T.tone_error(target, target, MESH, MESH) == 0.0


def test_only_skin_around_counts():
    """Hair or background around the face is left out; with none of it skin, None."""
    target = np.full((420, 400, 3), BACKGROUND, np.uint8)
    face = oval(MESH, target.shape)
    target[face] = SKIN
    result = target.copy()
    result[face] = (230, 140, 90)
    assert T.tone_shift(result, target, MESH, MESH) is None
    neck = T.surroundings_mask(MESH[:, :2], target.shape, face_width=150.0)
    neck[: int(MESH[topo.CHIN, 1]) + 1] = False  # the neck box only: skin there
    target[neck], result[neck] = SKIN, SKIN
    assert T.tone_error(result, target, MESH, MESH) == pytest.approx(lab_distance((230, 140, 90), SKIN), abs=0.02)


@pytest.mark.parametrize("width", [40.0, 150.0, 600.0])
def test_the_value_does_not_depend_on_the_face_size(width):
    size = int(width * 2.8)
    mesh = face_mesh(width, centre=(size / 2, size / 2))
    target = textured((size, size), seed=3)
    result = target.copy()
    face = oval(mesh, target.shape)
    result[face] = np.clip(result[face].astype(int) + (20, -5, -25), 0, 255).astype(np.uint8)
    small = T.tone_error(result, target, mesh, mesh)
    assert small is not None and small == pytest.approx(lab_distance((220, 145, 100), SKIN), abs=0.6)


def test_the_targets_mesh_stands_in_for_a_missing_result_mesh():
    target = np.full((420, 400, 3), SKIN, np.uint8)
    result = target.copy()
    result[oval(MESH, target.shape)] = (230, 140, 90)
    assert T.tone_error(result, target, MESH) == T.tone_error(result, target, MESH, MESH)


def test_the_results_own_mesh_finds_its_cheeks():
    """A result whose face moved: its cheeks are read where its own mesh is."""
    target = np.full((420, 400, 3), SKIN, np.uint8)
    moved = MESH + (12.0, 6.0, 0.0)
    result = target.copy()
    result[T.cheek_mask(moved[:, :2], target.shape)] = (230, 140, 90)
    assert T.tone_error(result, target, MESH, moved) == pytest.approx(lab_distance((230, 140, 90), SKIN), abs=0.02)


@pytest.mark.parametrize(
    "result, target, mesh, message",
    [
        (np.zeros((50, 50, 3), np.uint8), np.zeros((60, 50, 3), np.uint8), MESH, "differ in shape"),
        (np.zeros((50, 50), np.uint8), np.zeros((50, 50), np.uint8), MESH, "uint8"),
        (np.zeros((50, 50, 3), np.uint8), np.zeros((50, 50, 3), np.uint8), MESH[:100], "mesh"),
    ],
)
def test_bad_inputs_raise(result, target, mesh, message):
    with pytest.raises(ValueError, match=message):
        T.tone_shift(result, target, mesh)


# ------------------------------------------------------------- real photo


def shift_lab(pixels: np.ndarray, mask: np.ndarray, dlab) -> np.ndarray:
    """A copy with ``dlab`` added to the CIELAB colour of the masked pixels."""
    out = pixels.copy()
    lab = rgb_to_lab(pixels[mask]) + np.asarray(dlab, np.float32)
    rgb = cv2.cvtColor(lab.reshape(-1, 1, 3), cv2.COLOR_Lab2RGB).reshape(-1, 3)
    out[mask] = np.clip(rgb * 255.0 + 0.5, 0, 255).astype(np.uint8)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("photo", ["single/biden2.jpg", "single/happy_man.png"])
def test_tone_on_a_real_photo_tinted_warm(faces_dir, photo):
    from faceweave.io import read_image
    from faceweave.pipeline import FaceSwapper

    target = np.array(read_image(faces_dir / photo).pixels)
    warm = (0.0, 3.0, 6.0)  # ΔE 6.7: redder and yellower
    with FaceSwapper() as swapper:

        def mesh(pixels: np.ndarray) -> np.ndarray:
            return max(swapper.analyser.analyse(pixels), key=lambda f: f.bbox.area).mesh

        target_mesh = mesh(target)
        face = polygon_mask(target.shape, target_mesh[topo.face_oval(), :2])
        on_face = shift_lab(target, face, warm)
        everywhere = shift_lab(target, np.ones(target.shape[:2], bool), warm)
        redetected = {"face": mesh(on_face), "whole": mesh(everywhere)}
    # with the target's mesh on both sides only the tint counts
    assert T.tone_error(on_face, target, target_mesh) == pytest.approx(float(np.linalg.norm(warm)), abs=0.3)
    assert T.tone_error(everywhere, target, target_mesh) == pytest.approx(0.0, abs=0.3)
    # each image's own mesh, as faceweave evaluate measures: the mesh found again on the
    # tinted picture sits a pixel or two off, and a shaded cheek's median L* moves with it
    face_only = T.tone_error(on_face, target, target_mesh, redetected["face"])
    whole = T.tone_error(everywhere, target, target_mesh, redetected["whole"])
    assert face_only == pytest.approx(float(np.linalg.norm(warm)), abs=0.75)
    assert whole == pytest.approx(0.0, abs=0.75)


@pytest.mark.slow
def test_face_sharpness_is_judged_on_a_200_px_face_whatever_the_photo_s_size(astronaut):
    """The judge's sharpness: 1 for the target itself, below 1 for a blurred
    face, and about the same figure for the same pair at twice the size."""
    import cv2

    from faceweave.analysis import FaceAnalyser
    from faceweave.evaluate.metrics import face_sharpness_ratio
    from faceweave.options import SwapOptions

    target = np.array(astronaut)
    with FaceAnalyser(SwapOptions().analysis) as analyser:
        face = max(analyser.analyse(target), key=lambda f: f.bbox.area)
    blurred = cv2.GaussianBlur(target, (0, 0), 2.0)
    assert face_sharpness_ratio(target, target, face.mesh) == pytest.approx(1.0)
    small = face_sharpness_ratio(blurred, target, face.mesh)
    assert small is not None and small < 0.8
    big = [cv2.resize(x, None, fx=2, fy=2, interpolation=cv2.INTER_CUBIC) for x in (blurred, target)]
    mesh2 = np.array(face.mesh) * np.array([2.0, 2.0, 2.0], np.float32)
    doubled = face_sharpness_ratio(big[0], big[1], mesh2)
    assert doubled is not None and abs(doubled - small) < 0.15
