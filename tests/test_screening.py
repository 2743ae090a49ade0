"""Content screening: NudeNet's decoding (pure), the real model on real photos
(skipped without the nudenet wheel), and the policy with a fake detector."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from faceweave.errors import ContentRefusedError, InvalidOptionError
from faceweave.screening.nudenet import LABELS, ContentDetection, decode, letterbox
from faceweave.screening.policy import EXPOSED_LABELS, ScreeningPolicy, pixelate_boxes, screen

needs_nudenet = pytest.mark.skipif(
    importlib.util.find_spec("nudenet") is None,
    reason="nudenet is not installed (pip install 'faceweave[screening]')",
)


# ---------------------------------------------------------------- decoding


def _raw(rows: list[tuple[float, float, float, float, str, float]]) -> np.ndarray:
    """``(1, 22, N)`` model output from ``(cx, cy, w, h, label, score)`` rows (model pixels)."""
    out = np.zeros((1, 4 + len(LABELS), len(rows)), np.float32)
    for i, (cx, cy, w, h, label, score) in enumerate(rows):
        out[0, :4, i] = (cx, cy, w, h)
        out[0, 4 + LABELS.index(label), i] = score
    return out


def test_decode_scales_clips_and_suppresses():
    raw = _raw(
        [
            (100, 100, 40, 20, "FEMALE_BREAST_EXPOSED", 0.9),
            (102, 101, 40, 20, "FEMALE_BREAST_EXPOSED", 0.6),  # overlaps the first: suppressed
            (300, 300, 60, 60, "FACE_MALE", 0.15),  # under the candidate score
            (310, 10, 40, 40, "FEET_EXPOSED", 0.5),  # crosses the right edge: clipped
        ]
    )
    # a 640 x 400 image: padded to 640 x 640, so model pixels x 2
    found = decode(raw, scale=2.0, width=640, height=400)
    assert [(d.label, round(d.score, 2), d.box) for d in found] == [
        ("FEMALE_BREAST_EXPOSED", 0.9, (160, 180, 80, 40)),
        # x 620-40=580, width clipped to 640-580; y -20 clipped to 0 with the
        # height kept (80), as nudenet does
        ("FEET_EXPOSED", 0.5, (580, 0, 60, 80)),
    ]


def test_decode_nothing_and_wrong_shape():
    from faceweave.errors import ModelSignatureError

    assert decode(np.zeros((1, 22, 5), np.float32), scale=1.0, width=10, height=10) == []
    with pytest.raises(ModelSignatureError, match=r"\(1, 22, N\)"):
        decode(np.zeros((1, 21, 5), np.float32), scale=1.0, width=10, height=10)


def test_letterbox_pads_bottom_right_and_gives_bgr():
    pixels = np.zeros((100, 200, 3), np.uint8)
    pixels[..., 0] = 255  # pure red
    blob, scale = letterbox(pixels)
    assert blob.shape == (1, 3, 320, 320) and blob.dtype == np.float32 and scale == 200 / 320
    assert blob[0, 2, :150].mean() == pytest.approx(1.0)  # red lands in the last (R of BGR) channel
    assert blob[0, 0].max() == 0.0 and blob[0, 2, 170:].max() == 0.0  # bottom padding is black


# --------------------------------------------------------------- real model


@needs_nudenet
def test_real_model_on_face_photos_finds_faces_not_nudity(faces_dir):
    from faceweave.io.images import read_image
    from faceweave.screening.nudenet import NudeNetDetector

    with NudeNetDetector() as detector:
        image = read_image(faces_dir / "group/fr_two_people.jpg")
        found = detector.detect(image.pixels)
        # two faces, one box each, inside the image; nothing exposed
        faces = [d for d in found if d.label.startswith("FACE_")]
        assert len(faces) == 2 and not [d for d in found if d.label in EXPOSED_LABELS]
        for d in faces:
            x, y, w, h = d.box
            assert x >= 0 and y >= 0 and x + w <= image.pixels.shape[1] and y + h <= image.pixels.shape[0]
        # a face photo passes under refuse
        result = screen(image.pixels, ScreeningPolicy(action="refuse"), detector, role="target")
        assert result.flagged == () and result.pixels is image.pixels


@needs_nudenet
def test_real_model_matches_nudenets_own_code(faces_dir):
    """Same boxes and scores as nudenet.NudeDetector (when its module can be imported here)."""
    try:
        from nudenet import NudeDetector
    except ImportError as exc:  # it imports cv2 from an OpenCV wheel we may not have
        pytest.skip(f"nudenet's own module cannot be imported: {exc}")
    from faceweave.io.images import read_image
    from faceweave.screening.nudenet import NudeNetDetector

    path = faces_dir / "single/astronaut_eileen_collins.png"
    theirs = NudeDetector().detect(str(path))
    with NudeNetDetector() as detector:
        ours = detector.detect(read_image(path).pixels)
    assert [(d.label, d.box) for d in ours] == [(t["class"], tuple(t["box"])) for t in theirs]
    assert [d.score for d in ours] == pytest.approx([t["score"] for t in theirs], abs=1e-4)


# ------------------------------------------------------------------ policy


class FakeDetector:
    def __init__(self, detections):
        self.detections = detections
        self.calls = 0

    def detect(self, pixels):
        self.calls += 1
        return list(self.detections)


EXPOSED = ContentDetection(label="FEMALE_BREAST_EXPOSED", score=0.87, box=(10, 20, 30, 16))
WEAK = ContentDetection(label="BUTTOCKS_EXPOSED", score=0.3, box=(0, 0, 8, 8))
FACE = ContentDetection(label="FACE_FEMALE", score=0.95, box=(40, 0, 20, 20))


def _noise() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (64, 80, 3), dtype=np.uint8)


def test_refuse_raises_naming_label_and_score():
    with pytest.raises(ContentRefusedError, match=r"target a\.jpg refused .*FEMALE_BREAST_EXPOSED \(score 0\.87"):
        screen(
            _noise(), ScreeningPolicy(action="refuse"), FakeDetector([FACE, WEAK, EXPOSED]), role="target", path="a.jpg"
        )


def test_blur_changes_only_the_flagged_boxes():
    pixels = _noise()
    result = screen(pixels, ScreeningPolicy(action="blur"), FakeDetector([FACE, EXPOSED, WEAK]), role="source")
    assert result.flagged == (EXPOSED,) and result.changed
    changed = np.any(result.pixels != pixels, axis=2)
    x, y, w, h = EXPOSED.box
    inside = np.zeros_like(changed)
    inside[y : y + h, x : x + w] = True
    assert changed[inside].mean() > 0.9 and not changed[~inside].any()
    assert pixels is not result.pixels  # the input is left alone


def test_log_records_only():
    pixels = _noise()
    result = screen(
        pixels, ScreeningPolicy(action="log", threshold=0.25), FakeDetector([EXPOSED, WEAK, FACE]), role="target"
    )
    assert result.flagged == (EXPOSED, WEAK) and result.pixels is pixels and not result.changed
    assert result.as_dict()["flagged"][0] == {"label": "FEMALE_BREAST_EXPOSED", "score": 0.87, "box": [10, 20, 30, 16]}


def test_off_does_not_run_the_detector():
    detector = FakeDetector([EXPOSED])
    result = screen(_noise(), ScreeningPolicy(), detector, role="target")
    assert detector.calls == 0 and result.flagged == () and result.action == "off"


def test_labels_choose_what_counts():
    policy = ScreeningPolicy(action="refuse", labels=frozenset({"FACE_FEMALE"}))
    with pytest.raises(ContentRefusedError, match="FACE_FEMALE"):
        screen(_noise(), policy, FakeDetector([FACE]), role="target")
    screen(_noise(), policy, FakeDetector([EXPOSED]), role="target")  # not counted: passes


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"action": "delete"}, "--screening"),
        ({"labels": frozenset({"NOT_A_LABEL"})}, "NOT_A_LABEL"),
        ({"threshold": 0.0}, "threshold"),
        ({"threshold": 1.5}, "threshold"),
    ],
)
def test_bad_policy_is_refused(kwargs, fragment):
    with pytest.raises(InvalidOptionError, match=fragment):
        ScreeningPolicy(**kwargs)


def test_pixelate_boxes_is_pure_and_clips():
    pixels = _noise()
    frozen = pixels.copy()
    out = pixelate_boxes(pixels, [(70, 50, 100, 100), (5, 5, 0, 10)])  # runs off the edge; empty box
    assert np.array_equal(pixels, frozen)
    assert np.array_equal(out[:50], pixels[:50]) and np.array_equal(out[:, :70], pixels[:, :70])
    assert not np.array_equal(out[50:, 70:], pixels[50:, 70:])
