"""The debug overlay draws on a copy and stays inside the image."""

from __future__ import annotations

import numpy as np
import pytest

from faceweave.debug import draw_faces
from faceweave.errors import InputError
from faceweave.types import MESH_POINTS, BBox, Face, Pose


def make_face(x: float, y: float, size: float) -> Face:
    rng = np.random.default_rng(0)
    mesh = np.zeros((MESH_POINTS, 3), np.float32)
    mesh[:, 0] = x + rng.uniform(0.1, 0.9, MESH_POINTS) * size
    mesh[:, 1] = y + rng.uniform(0.1, 0.9, MESH_POINTS) * size
    return Face(bbox=BBox(x, y, x + size, y + size), score=0.87, mesh=mesh, pose=Pose(12.0, -3.0, 5.0))


def box_changed(before: np.ndarray, after: np.ndarray, face: Face) -> bool:
    b = face.bbox
    region = (slice(int(b.y1), int(b.y2) + 1), slice(int(b.x1), int(b.x2) + 1))
    return bool(np.any(before[region] != after[region]))


@pytest.mark.parametrize(
    "shape, faces",
    [
        ((48, 64, 3), [make_face(10, 8, 30)]),
        ((480, 640, 3), [make_face(100, 100, 120), make_face(400, 60, 80)]),
        ((3000, 2000, 3), [make_face(500, 900, 900)]),
        ((200, 200, 3), [make_face(0, 0, 200)]),  # a face filling the image, text at the border
        ((100, 100, 3), []),
    ],
)
def test_draw_faces(shape, faces):
    pixels = np.full(shape, 90, np.uint8)
    pixels.setflags(write=False)
    before = pixels.copy()
    drawn = draw_faces(pixels, faces)
    assert drawn.shape == pixels.shape and drawn.dtype == np.uint8
    assert np.array_equal(pixels, before)
    assert drawn is not pixels
    for face in faces:
        assert box_changed(before, drawn, face)
    if not faces:
        assert np.array_equal(drawn, before)


@pytest.mark.parametrize("mesh", [True, False])
def test_draw_faces_with_order_and_without_mesh(mesh):
    pixels = np.zeros((300, 400, 3), np.uint8)
    faces = [make_face(20, 20, 100), make_face(200, 120, 100)]
    drawn = draw_faces(pixels, faces, order=[1], mesh=mesh)  # face 0 left out: drawn grey, unnumbered
    assert all(box_changed(pixels, drawn, f) for f in faces)
    assert not np.any(pixels)


@pytest.mark.parametrize(
    "pixels", [np.zeros((10, 10), np.uint8), np.zeros((10, 10, 3), np.float32), np.zeros((10, 10, 4), np.uint8)]
)
def test_draw_faces_rejects_bad_pixels(pixels):
    with pytest.raises(InputError, match=r"\(H, W, 3\)"):
        draw_faces(pixels, [])
