"""Face analysis on real photos: detection counts, frozen values, mesh and
box, head pose, identity embeddings.  One analyser for the whole module."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from faceweave.analysis import FaceAnalyser, embedding_distance
from faceweave.analysis.embedder import SAME_PERSON_DISTANCE
from faceweave.io import read_image
from faceweave.types import Face

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def analyser():
    with FaceAnalyser() as model:
        model.prepare()
        yield model


@pytest.fixture(scope="module")
def load(faces_dir):
    """``load("single/biden2.jpg")`` -> ``(H, W, 3)`` uint8 RGB pixels."""

    def read(rel: str) -> np.ndarray:
        return read_image(faces_dir / rel).pixels

    return read


@pytest.mark.parametrize(
    "photo, at_least, at_most",
    [
        ("group/insightface_t1.jpg", 6, 64),
        ("hard/small_face_240p.jpg", 1, 1),
        ("hard/rotated_90.jpg", 1, 1),
        ("hard/pose_roll_left_wryneck.png", 1, 1),
        ("identity/robert_downey_jr/rd_d5.jpeg", 1, 1),
        ("hard/neg_dogs.jpg", 0, 0),
        ("hard/neg_no_face.png", 0, 0),
    ],
)
def test_face_count(analyser, load, photo, at_least, at_most):
    faces = analyser.analyse(load(photo))
    assert at_least <= len(faces) <= at_most
    assert all(isinstance(face, Face) for face in faces)


def test_small_faces_in_a_crowd_are_found(analyser, load):
    pixels = load("group/dlib_2008_004176.jpg")
    faces = analyser.analyse(pixels)
    assert len(faces) >= 6
    assert all(face.size < 0.15 * max(pixels.shape[:2]) for face in faces)
    # no two faces are the same face found twice
    for i, a in enumerate(faces):
        for b in faces[i + 1 :]:
            assert a.bbox.iou(b.bbox) < 0.3


@pytest.fixture(scope="module")
def frontal(analyser, load) -> Face:
    faces = analyser.analyse(load("single/biden2.jpg"), embeddings=True)
    assert len(faces) == 1
    return faces[0]


def test_face_values_are_frozen(frontal):
    assert not frontal.mesh.flags.writeable
    assert not frontal.embedding.flags.writeable
    with pytest.raises(ValueError):
        frontal.mesh[0, 0] = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        frontal.score = 0.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        frontal.bbox.x1 = 0.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        frontal.pose.yaw = 0.0  # type: ignore[misc]


def test_face_shapes_and_types(frontal):
    assert frontal.mesh.shape == (478, 3) and frontal.mesh.dtype == np.float32
    assert frontal.embedding.shape == (128,) and frontal.embedding.dtype == np.float32
    assert frontal.points2d.shape == (478, 2)
    assert frontal.kps5.shape == (5, 2)
    assert 0.0 < frontal.score <= 1.0
    assert frontal.size == max(frontal.bbox.width, frontal.bbox.height) > 100


@pytest.mark.parametrize("photo", ["single/biden2.jpg", "hard/rotated_90.jpg", "group/insightface_t1.jpg"])
def test_mesh_points_lie_in_the_face_box(analyser, load, photo):
    pixels = load(photo)
    h, w = pixels.shape[:2]
    for face in analyser.analyse(pixels):
        pts = face.points2d
        slack = 0.02 * face.size
        assert (pts[:, 0] >= face.bbox.x1 - slack).all() and (pts[:, 0] <= face.bbox.x2 + slack).all()
        assert (pts[:, 1] >= face.bbox.y1 - slack).all() and (pts[:, 1] <= face.bbox.y2 + slack).all()
        assert -0.1 * w <= face.bbox.x1 and face.bbox.x2 <= 1.1 * w
        assert -0.1 * h <= face.bbox.y1 and face.bbox.y2 <= 1.1 * h


def test_frontal_face_has_small_yaw_and_roll(frontal):
    assert abs(frontal.pose.yaw) < 10.0
    assert abs(frontal.pose.roll) < 10.0
    assert abs(frontal.pose.pitch) < 20.0


def test_rotated_photo_has_a_large_roll(analyser, load):
    (face,) = analyser.analyse(load("hard/rotated_90.jpg"))
    assert 60.0 < abs(face.pose.roll) < 120.0


def test_mirror_image_has_the_opposite_yaw(analyser, load):
    pixels = load("hard/pose_left_face_down.jpeg")
    (face,) = analyser.analyse(pixels)
    (mirrored,) = analyser.analyse(np.ascontiguousarray(pixels[:, ::-1]))

    assert abs(face.pose.yaw) > 20.0  # clearly turned
    assert np.sign(mirrored.pose.yaw) == -np.sign(face.pose.yaw)
    assert abs(abs(mirrored.pose.yaw) - abs(face.pose.yaw)) < 10.0
    assert abs(mirrored.pose.pitch - face.pose.pitch) < 10.0


def test_mirror_image_mesh_mirrors_the_key_points(analyser, load):
    pixels = load("single/biden2.jpg")
    w = pixels.shape[1]
    (face,) = analyser.analyse(pixels)
    (mirrored,) = analyser.analyse(np.ascontiguousarray(pixels[:, ::-1]))
    # image-left eye of the mirror image is the image-right eye of the photo, flipped
    kps, kps_m = face.kps5, mirrored.kps5
    expected = np.stack([w - 1 - kps[[1, 0, 2, 4, 3], 0], kps[[1, 0, 2, 4, 3], 1]], axis=1)
    assert np.abs(kps_m - expected).max() < 0.05 * face.size


@pytest.fixture(scope="module")
def embed(analyser, load):
    cache: dict[str, np.ndarray] = {}

    def get(photo: str) -> np.ndarray:
        if photo not in cache:
            faces = analyser.analyse(load(photo), embeddings=True)
            assert len(faces) == 1, photo
            cache[photo] = faces[0].embedding
        return cache[photo]

    return get


@pytest.mark.parametrize(
    "a, b, same",
    [
        ("identity/matt_damon/df_img29.jpg", "identity/matt_damon/df_img30.jpg", True),
        ("identity/matt_damon/df_img29.jpg", "identity/matt_damon/df_img31.jpg", True),
        ("identity/matt_damon/df_img30.jpg", "identity/matt_damon/df_img32.jpg", True),
        ("identity/matt_damon/df_img29.jpg", "single/biden2.jpg", False),
        ("identity/matt_damon/df_img30.jpg", "single/paul_rudd.jpg", False),
        ("single/biden2.jpg", "single/paul_rudd.jpg", False),
    ],
)
def test_embedding_distance_separates_people(embed, a, b, same):
    d = embedding_distance(embed(a), embed(b))
    if same:
        assert d < SAME_PERSON_DISTANCE
    else:
        assert d > SAME_PERSON_DISTANCE


def test_embed_keeps_an_existing_embedding_and_adds_a_missing_one(analyser, load, frontal):
    assert analyser.embed(load("single/biden2.jpg"), frontal) is frontal
    pixels = load("single/biden2.jpg")
    (bare,) = analyser.analyse(pixels)
    assert bare.embedding is None
    with_embedding = analyser.embed(pixels, bare)
    assert embedding_distance(with_embedding.embedding, frontal.embedding) < 1e-4


def test_analyse_adds_stage_timings(analyser, load):
    timings: dict[str, float] = {}
    analyser.analyse(load("hard/small_face_240p.jpg"), embeddings=True, timings=timings)
    assert {"detect", "mesh", "embed"} <= set(timings)
    assert all(isinstance(v, float) and v >= 0.0 for v in timings.values())
