"""Alignment templates: table, similarity fit, warp, and the five points of faces and crops."""

from __future__ import annotations

import numpy as np
import pytest

from faceweave.errors import InvalidOptionError
from faceweave.geometry.templates import (
    TEMPLATES,
    estimate_alignment,
    points5,
    template_points,
    warp_to_template,
)

NAMES = ["arcface_112_v1", "arcface_112_v2", "arcface_128", "ffhq_512", "mtcnn_512"]


def similarity(scale: float, degrees: float, tx: float, ty: float) -> np.ndarray:
    a = np.radians(degrees)
    return np.array([[scale * np.cos(a), -scale * np.sin(a), tx], [scale * np.sin(a), scale * np.cos(a), ty]])


def apply(m: np.ndarray, pts: np.ndarray) -> np.ndarray:
    return pts @ m[:, :2].T + m[:, 2]


@pytest.mark.parametrize("name", NAMES)
def test_templates_are_read_only_fractions_in_insightface_order(name):
    t = TEMPLATES[name]
    assert t.shape == (5, 2) and not t.flags.writeable
    assert np.all((t > 0.0) & (t < 1.0))
    left_eye, right_eye, nose, mouth_l, mouth_r = t
    assert left_eye[0] < nose[0] < right_eye[0] and mouth_l[0] < mouth_r[0]
    assert max(left_eye[1], right_eye[1]) < nose[1] < min(mouth_l[1], mouth_r[1])


def test_template_values_match_facefusion():
    assert TEMPLATES["arcface_128"][0].tolist() == [0.36167656, 0.40387734]
    assert TEMPLATES["ffhq_512"][4].tolist() == [0.61150205, 0.72490465]
    np.testing.assert_allclose(template_points("arcface_112_v1", 112)[2], [56.0, 112 * 0.61154464])


@pytest.mark.parametrize(
    "template, size, transform",
    [
        ("arcface_112_v2", 112, similarity(2.5, 0.0, 40.0, 30.0)),
        ("arcface_128", 256, similarity(0.7, 17.0, -12.0, 90.0)),
        ("ffhq_512", 512, similarity(1.3, -35.0, 300.0, 5.0)),
    ],
)
def test_estimate_alignment_inverts_an_exact_similarity(template, size, transform):
    ref = template_points(template, size)
    inv = np.vstack([transform, [0, 0, 1]])
    points = apply(np.linalg.inv(inv)[:2], ref)  # the face in the image
    m = estimate_alignment(points, template, size)
    np.testing.assert_allclose(m, transform, atol=1e-9)
    np.testing.assert_allclose(apply(m, points), ref, atol=1e-9)


def test_estimate_alignment_is_the_least_squares_fit_for_noisy_points():
    rng = np.random.default_rng(3)
    ref = template_points("arcface_128", 128)
    noisy = ref * 2.0 + 50.0 + rng.normal(0, 2.0, ref.shape)
    m = estimate_alignment(noisy, "arcface_128", 128)
    base = np.sum((apply(m, noisy) - ref) ** 2)
    for _ in range(20):  # any small change of the 4 parameters does worse
        a, b, tx, ty = rng.normal(0, 1e-3, 4)
        dm = np.array([[a, -b, tx], [b, a, ty]])
        assert np.sum((apply(m + dm, noisy) - ref) ** 2) >= base


def blob_image(points: np.ndarray, shape: tuple[int, int], sigma: float) -> np.ndarray:
    yy, xx = np.mgrid[0 : shape[0], 0 : shape[1]].astype(np.float32)
    img = np.zeros(shape, np.float32)
    for x, y in points:
        img += np.exp(-((xx - x) ** 2 + (yy - y) ** 2) / (2 * sigma**2))
    return img


def centroid(img: np.ndarray, at: np.ndarray, radius: int) -> np.ndarray:
    x0, y0 = round(float(at[0])), round(float(at[1]))
    win = img[y0 - radius : y0 + radius + 1, x0 - radius : x0 + radius + 1]
    win = np.clip(win - 0.05, 0, None)
    yy, xx = np.mgrid[y0 - radius : y0 + radius + 1, x0 - radius : x0 + radius + 1]
    return np.array([(win * xx).sum() / win.sum(), (win * yy).sum() / win.sum()])


@pytest.mark.parametrize("template, size", [("arcface_112_v2", 112), ("arcface_128", 256), ("ffhq_512", 256)])
def test_warp_puts_the_five_points_on_the_template(template, size):
    ref = template_points(template, size)
    to_image = similarity(1.9, 14.0, 60.0, 25.0)
    points = apply(to_image, ref)
    img = blob_image(points, (560, 620), sigma=3.0)
    crop, _ = warp_to_template(img, points, template, size)
    assert crop.shape == (size, size)
    for p in ref:
        assert np.linalg.norm(centroid(crop, p, radius=5) - p) < 0.5


def test_points5_of_arrays_meshes_and_bad_shapes():
    five = np.arange(10, dtype=np.float32).reshape(5, 2)
    assert points5(five) is not None and np.array_equal(points5(five), five)
    mesh = np.zeros((478, 3), np.float32)
    mesh[468] = (10, 20, 0)  # iris centre, image left
    mesh[473] = (30, 21, 0)
    mesh[1] = (20, 30, 0)
    mesh[61] = (12, 40, 0)
    mesh[291] = (28, 41, 0)
    np.testing.assert_array_equal(points5(mesh), [[10, 20], [30, 21], [20, 30], [12, 40], [28, 41]])
    with pytest.raises(ValueError, match=r"\(5, 2\)"):
        points5(np.zeros((4, 2)))


def test_unknown_template_and_bad_size_raise():
    with pytest.raises(InvalidOptionError, match="unknown alignment template"):
        template_points("arcface_99", 112)
    with pytest.raises(InvalidOptionError, match="positive"):
        template_points("arcface_128", 0)
    with pytest.raises(ValueError, match="expected shape"):
        estimate_alignment(np.zeros((4, 2)), "arcface_128", 128)


def test_real_face_and_its_working_crop_align_alike(astronaut):
    """The five points of a real face (image) and of its working crop (crop
    pixels, from the crop's mesh) give the same aligned picture."""
    from faceweave.analysis import FaceAnalyser
    from faceweave.pipeline import cut_crop

    with FaceAnalyser() as analyser:
        faces = analyser.analyse(np.ascontiguousarray(astronaut), small_faces=False)
    face = max(faces, key=lambda f: f.bbox.area)
    crop = cut_crop(astronaut, face, face_size=256)
    a, ma = warp_to_template(astronaut, points5(face), "arcface_112_v2", 112)
    b, mb = warp_to_template(crop.pixels, points5(crop), "arcface_112_v2", 112)
    # the crop's points are the image points under the crop matrix: the fits agree
    np.testing.assert_allclose(apply(mb, apply(crop.matrix, points5(face))), apply(ma, points5(face)), atol=1e-3)
    assert np.abs(a.astype(int) - b.astype(int)).mean() < 6.0
    # the fitted points lie near the template (a real face is not the mean face)
    residual = np.linalg.norm(apply(ma, points5(face)) - template_points("arcface_112_v2", 112), axis=1)
    assert residual.max() < 8.0
