"""Ordering and selection of target faces, on synthetic faces."""

from __future__ import annotations

import numpy as np
import pytest

from faceweave.errors import InvalidOptionError, NoMatchingFaceError
from faceweave.options import FACE_ORDERS, SelectionOptions
from faceweave.selection import order_faces, select_faces
from faceweave.types import MESH_POINTS, BBox, Face, Pose


def make_face(x: float, y: float, size: float, *, score: float = 0.9, embedding=None) -> Face:
    """A face whose box has its top-left corner at (x, y) and side ``size``,
    with a fake mesh spread inside the box."""
    rng = np.random.default_rng(int(x * 31 + y * 17 + size))
    mesh = np.zeros((MESH_POINTS, 3), np.float32)
    mesh[:, 0] = x + rng.uniform(0.05, 0.95, MESH_POINTS) * size
    mesh[:, 1] = y + rng.uniform(0.05, 0.95, MESH_POINTS) * size
    return Face(
        bbox=BBox(x, y, x + size, y + size), score=score, mesh=mesh, pose=Pose(0.0, 0.0, 0.0), embedding=embedding
    )


def unit(axis: int, scale: float = 1.0) -> np.ndarray:
    v = np.zeros(128, np.float32)
    v[axis] = scale
    return v


#: four faces:   index: position (x, y), side, score
#:   0: middle, medium, best score      1: left, small
#:   2: right, large                    3: bottom, tiny, worst score
FACES = (
    make_face(200, 50, 60, score=0.99, embedding=unit(0)),
    make_face(10, 80, 40, score=0.80, embedding=unit(1)),
    make_face(400, 20, 100, score=0.90, embedding=unit(2)),
    make_face(250, 300, 20, score=0.60, embedding=unit(0, 1.3)),
)


@pytest.mark.parametrize(
    "order, expected",
    [
        ("left-right", [1, 0, 3, 2]),
        ("right-left", [2, 3, 0, 1]),
        ("top-bottom", [2, 0, 1, 3]),
        ("bottom-top", [3, 1, 0, 2]),
        ("large-small", [2, 0, 1, 3]),
        ("small-large", [3, 1, 0, 2]),
        ("best-score", [0, 2, 1, 3]),
    ],
)
def test_order_faces(order, expected):
    assert order_faces(FACES, order) == expected


def test_every_order_is_covered():
    assert set(FACE_ORDERS) == {
        "left-right",
        "right-left",
        "top-bottom",
        "bottom-top",
        "large-small",
        "small-large",
        "best-score",
    }


def test_order_ties_keep_detection_order():
    twins = (make_face(0, 0, 50), make_face(0, 0, 50), make_face(0, 0, 50))
    assert order_faces(twins, "large-small") == [0, 1, 2]


def test_order_empty_and_unknown():
    assert order_faces((), "left-right") == []
    with pytest.raises(InvalidOptionError, match="unknown face order"):
        order_faces(FACES, "diagonal")


@pytest.mark.parametrize(
    "options, reference, expected",
    [
        (SelectionOptions(), None, [2]),
        (SelectionOptions(mode="one", order="left-right"), None, [1]),
        (SelectionOptions(mode="one", order="best-score"), None, [0]),
        (SelectionOptions(mode="many"), None, [2, 0, 1, 3]),
        (SelectionOptions(mode="many", order="left-right"), None, [1, 0, 3, 2]),
        (SelectionOptions(mode="many", min_face_size=40), None, [2, 0, 1]),
        (SelectionOptions(mode="one", order="small-large", min_face_size=50), None, [0]),
        (SelectionOptions(mode="index", indices=(0,)), None, [2]),
        (SelectionOptions(mode="index", indices=(3, 1)), None, [3, 0]),
        (SelectionOptions(mode="index", indices=(1, 1)), None, [0]),
        (SelectionOptions(mode="index", order="left-right", indices=(0, 3)), None, [1, 2]),
        (SelectionOptions(mode="index", indices=(2,), min_face_size=30), None, [1]),
        (SelectionOptions(mode="reference"), unit(0), [0, 3]),
        (SelectionOptions(mode="reference", reference_distance=0.2), unit(0), [0]),
        (SelectionOptions(mode="reference"), unit(0, 1.25), [3, 0]),
        (SelectionOptions(mode="reference", min_face_size=30), unit(0), [0]),
        (SelectionOptions(mode="reference", reference_distance=1.5), unit(2), [2, 0, 1]),
    ],
)
def test_select_faces(options, reference, expected):
    assert select_faces(FACES, options, reference=reference) == expected


@pytest.mark.parametrize(
    "faces, options, reference, error, message",
    [
        ((), SelectionOptions(), None, NoMatchingFaceError, "no faces"),
        (
            FACES,
            SelectionOptions(min_face_size=200),
            None,
            NoMatchingFaceError,
            r"smaller than the minimum face size of 200 px \(the largest is 100 px\)",
        ),
        (FACES, SelectionOptions(mode="index", indices=(4,)), None, NoMatchingFaceError, "valid indices are 0 to 3"),
        (FACES, SelectionOptions(mode="index", indices=(-1,)), None, NoMatchingFaceError, "out of range"),
        (
            FACES,
            SelectionOptions(mode="index", indices=(1,), min_face_size=90),
            None,
            NoMatchingFaceError,
            "valid indices are 0$",
        ),
        (FACES, SelectionOptions(mode="index", indices=()), None, InvalidOptionError, "at least one index"),
        (FACES, SelectionOptions(mode="reference"), None, InvalidOptionError, "needs a reference"),
        (FACES, SelectionOptions(mode="reference"), np.zeros(64), InvalidOptionError, r"expected shape \(128,\)"),
        ((make_face(0, 0, 50),), SelectionOptions(mode="reference"), unit(0), InvalidOptionError, "needs embeddings"),
        (
            FACES,
            SelectionOptions(mode="reference"),
            unit(5),
            NoMatchingFaceError,
            r"nearest is at distance 1\.414, above the threshold of 0\.600",
        ),
    ],
)
def test_select_faces_errors(faces, options, reference, error, message):
    with pytest.raises(error, match=message):
        select_faces(faces, options, reference=reference)


@pytest.mark.parametrize(
    ("faces", "reference", "indices", "words", "expected"),
    [
        (None, False, False, "cli", "one"),
        (None, True, False, "cli", "reference"),
        (None, False, True, "form", "index"),
        ("many", False, False, "form", "many"),
        ("sideways", False, False, "cli", "sideways"),  # SelectionOptions refuses it with the list
        (None, True, True, "cli", "give either --reference-face or --face-index, not both"),
        (None, True, True, "form", "give either a reference face or face_index, not both"),
        ("one", True, False, "cli", "--reference-face is only used with --faces reference, not --faces one"),
        ("many", False, True, "form", "face_index is only used with faces=index, not faces=many"),
        ("reference", False, False, "cli", "--faces reference needs --reference-face PHOTO of the person to replace"),
        ("reference", False, False, "form", "faces=reference needs a 'reference' file of the person to replace"),
    ],
)
def test_one_selection_mode_rule_for_the_cli_and_the_form(faces, reference, indices, words, expected):
    from faceweave.errors import InvalidOptionError
    from faceweave.options import CLI_WORDS, FORM_WORDS, selection_mode

    said = {"cli": CLI_WORDS, "form": FORM_WORDS}[words]
    if " " not in expected:
        assert selection_mode(faces, has_reference=reference, has_indices=indices, words=said) == expected
    else:
        with pytest.raises(InvalidOptionError) as caught:
            selection_mode(faces, has_reference=reference, has_indices=indices, words=said)
        assert str(caught.value) == expected
