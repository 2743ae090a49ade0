"""The target's creases along the nasolabial folds (video and live faces,
whose mouth is the target's own): ``regions.fold_zone`` and
``composite.target_folds``."""

from __future__ import annotations

import numpy as np
import pytest

from faceweave.compositing.composite import FOLD_SIGMA, target_folds
from faceweave.compositing.regions import fold_zone
from faceweave.compositing.resample import gaussian_lowpass
from faceweave.geometry import topology as topo

SIZE = (256, 256)
FACE = 200.0  # face size in pixels


def face_mesh() -> np.ndarray:
    """(478, 2) frontal mesh (the reference shape) 200 pixels wide, centred."""
    ref = topo.reference_mesh().astype(np.float64)
    mesh = ref[:, :2] * (FACE / float(np.ptp(ref[:468, 0])))
    return mesh + (128.0, 128.0)


def at(image: np.ndarray, point) -> float:
    return float(image[int(round(point[1])), int(round(point[0]))])


def test_the_fold_zone_lies_along_both_folds_and_nowhere_else():
    mesh = face_mesh()
    zone = fold_zone(SIZE, mesh, width=0.1 * FACE, soft=0.025 * FACE)
    assert zone.shape == (256, 256) and zone.dtype == np.float32
    for chain in (topo.RIGHT_FOLD, topo.LEFT_FOLD):
        # the middle of each fold, between its mesh points
        for a, b in zip(chain[:-1], chain[1:], strict=True):
            assert at(zone, (mesh[a] + mesh[b]) / 2.0) > 0.8
    for far in (topo.NOSE_TIP, topo.CHIN, topo.FOREHEAD_TOP, topo.RIGHT_EYE_OUTER, topo.LEFT_EYE_OUTER):
        assert at(zone, mesh[far]) < 0.05
    # the middle of the lips lies between the folds, outside both
    assert at(zone, (mesh[topo.UPPER_LIP_INNER] + mesh[topo.LOWER_LIP_INNER]) / 2.0) < 0.05
    # the two sides mirror each other on a frontal face
    assert zone.sum() == pytest.approx(np.fliplr(zone).sum(), rel=0.05)
    assert float(np.abs(zone - np.fliplr(zone)).mean()) < 0.2 * float(zone.mean())


def creased(colour, seed: int) -> np.ndarray:
    """A flat colour with fine vertical creases (a 6-pixel period) and noise."""
    rng = np.random.default_rng(seed)
    x = np.arange(SIZE[0], dtype=np.float32)
    stripes = 12.0 * np.sin(2 * np.pi * x / 6.0)[None, :, None]
    noise = rng.normal(0, 1.0, (SIZE[1], SIZE[0], 1)).astype(np.float32)
    return np.array(colour, np.float32) + stripes + noise + np.zeros((SIZE[1], SIZE[0], 3), np.float32)


def test_the_folds_take_the_target_s_creases_under_the_new_face_s_colour():
    mesh = face_mesh()
    front = np.zeros((SIZE[1], SIZE[0], 3), np.float32) + np.array((200.0, 150.0, 125.0), np.float32)
    behind = creased((90.0, 70.0, 60.0), seed=1)
    out = target_folds(front, behind, mesh, FACE)
    assert out.shape == front.shape and out.dtype == np.float32
    assert np.array_equal(front, np.zeros_like(front) + (200.0, 150.0, 125.0))  # the input is left alone
    zone = fold_zone(SIZE, mesh, width=0.1 * FACE, soft=0.025 * FACE)
    inside, outside = zone > 0.95, zone < 1e-4
    sigma = FOLD_SIGMA * FACE
    detail_out = (out - gaussian_lowpass(out, sigma))[inside]
    detail_behind = (behind - gaussian_lowpass(behind, sigma))[inside]
    # inside: the target's creases, at their full depth ...
    assert np.corrcoef(detail_out[:, 0], detail_behind[:, 0])[0, 1] > 0.99
    assert float(detail_out.std()) == pytest.approx(float(detail_behind.std()), rel=0.05)
    # ... on the new face's colour, not the target's
    assert np.abs(out[inside].mean(axis=0) - (200.0, 150.0, 125.0)).max() < 3.0
    # outside the zone the new face is untouched (to within the feather's last trace)
    assert np.allclose(out[outside], front[outside], atol=0.05)
    far = np.ones(zone.shape, bool)
    far[40:230, 40:220] = False
    assert np.array_equal(out[far], front[far])


def test_a_new_face_without_creases_of_its_own_is_left_as_it_is_where_the_target_has_none():
    mesh = face_mesh()
    rng = np.random.default_rng(3)
    front = creased((200.0, 150.0, 125.0), seed=2)
    flat = np.zeros_like(front) + np.array((90.0, 70.0, 60.0), np.float32) + rng.normal(0, 0.01, front.shape)
    out = target_folds(front, flat.astype(np.float32), mesh, FACE)
    zone = fold_zone(SIZE, mesh, width=0.1 * FACE, soft=0.025 * FACE)
    inside = zone > 0.95
    # the source's creases are gone inside the zone (a smooth target there) ...
    detail = (out - gaussian_lowpass(out, FOLD_SIGMA * FACE))[inside]
    assert float(detail.std()) < 0.15 * float((front - gaussian_lowpass(front, FOLD_SIGMA * FACE))[inside].std())
    # ... and the mean colour is still the new face's
    assert np.abs(out[inside].mean(axis=0) - front[inside].mean(axis=0)).max() < 3.0


def test_folds_outside_the_picture_change_nothing():
    front = creased((200.0, 150.0, 125.0), seed=4)
    far = face_mesh() + (5000.0, 5000.0)
    assert np.array_equal(target_folds(front, creased((0, 0, 0), seed=5), far, FACE), front)


def crease_depth(pixels: np.ndarray, mesh: np.ndarray) -> float:
    """RMS of the grey detail finer than :data:`FOLD_SIGMA` along the folds."""
    import cv2

    fs = float(np.ptp(mesh[:, 0]))
    h, w = pixels.shape[:2]
    zone = fold_zone((w, h), mesh[:, :2], width=0.1 * fs, soft=0.025 * fs) > 0.8
    grey = cv2.cvtColor(pixels, cv2.COLOR_RGB2GRAY).astype(np.float32)
    band = grey - gaussian_lowpass(grey, FOLD_SIGMA * fs)
    return float(np.sqrt(np.mean(band[zone] ** 2)))


def test_a_laughing_source_leaves_its_smile_folds_behind_where_the_target_s_lips_are_kept(faces_dir):
    """A talking head at rest (a frame of ``lp_d18``) given the deep smile
    folds of a laughing source: with the target's lips kept (videos by
    default) the folds are as faint as the target's own, not the source's
    (RMS detail along them 3.5 against the target's 2.4; 13.9 without)."""
    from faceweave.options import MaskOptions, SwapOptions
    from faceweave.pipeline import FaceSwapper
    from faceweave.provenance.stamp import Provenance
    from faceweave.video.io import VideoReader

    with VideoReader(faces_dir / "video/lp_d18_talking_face.mp4", start=0.6, end=0.7) as reader:
        frame = next(iter(reader)).pixels
    depth = {}
    for keep in ("always", "never"):
        with FaceSwapper(SwapOptions(masks=MaskOptions(target_lips=keep))) as swapper:
            result = swapper.swap(
                [faces_dir / "single/happy_man.png"], frame, provenance=Provenance.new(watermark=False)
            )
            target_mesh = swapper.find_faces(frame)[0].mesh
        depth[keep] = crease_depth(result.image, result.faces[0].mesh)
    target = crease_depth(frame, target_mesh)
    assert depth["always"] < 2.0 * target, (depth, target)
    assert depth["never"] > 2.0 * depth["always"], (depth, target)


def test_the_reshaping_carries_the_whole_lower_lip_with_a_moved_mouth():
    """Both lip lines pin the reshaping warp: a mouth moved up 6 pixels takes
    its lower lip's outer edge along, instead of stretching it towards the
    chin (which the eye, and a face mesh, read as a wider-open mouth)."""
    from faceweave.swappers.base import AlignedCrop
    from faceweave.swappers.mesh import MeshSwapper

    ref = topo.reference_mesh().astype(np.float32)
    mesh = ref * (FACE / 2.0 / float(np.ptp(ref[:468, 0]))) + np.array((128.0, 128.0, 0.0), np.float32)
    crop = AlignedCrop(pixels=np.zeros((256, 256, 3), np.uint8), matrix=np.eye(2, 3), mesh=mesh, face_size=FACE / 2.0)
    moved = mesh.copy()
    lips = np.unique(np.concatenate([topo.lips_inner(), topo.lips_outer()]))
    moved[lips, 1] -= 6.0
    _, _, offsets = MeshSwapper._reshape(crop, moved)
    lower = moved[17, :2]  # the middle of the lower lip's outer edge, where it now is
    dy = float(offsets[int(round(lower[1])), int(round(lower[0])), 1])
    # the new place shows what was 6 pixels below it: the old lower lip
    assert dy == pytest.approx(6.0, abs=0.5)
