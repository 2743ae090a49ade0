"""FaceFusion's ways of running its detectors on a frame: ``many``
(retinaface, scrfd and yolo_face together), detector angles (the frame
turned, the hits turned back) and the detector margin (a zero border), all
hits merged by one suppression at FaceFusion's overlap.  Pure steps with
known inputs, stand-in detectors with known heads (tests/analysis_fixtures.py),
the options, the CLI and a turned photo through the whole analyser."""

from __future__ import annotations

import numpy as np
import pytest
from tests.analysis_fixtures import anchor_heads, constant_model, yolo_head
from tests.test_face_detectors import _Model

from faceweave.analysis import FaceAnalyser, decoding
from faceweave.analysis.decoding import RawDetections
from faceweave.analysis.face_detectors import (
    MANY_DETECTORS,
    FaceDetection,
    create_face_detection,
    create_face_detector,
    detector_models,
)
from faceweave.errors import ChosenModelMissingError, InvalidOptionError
from faceweave.models import builtin_specs
from faceweave.options import AnalysisOptions, RuntimeOptions, SwapOptions
from faceweave.sessions import ModelSessions

CATALOG = builtin_specs()
FIVE = (-8, -6, 8, -6, 0, 2, -6, 10, 6, 10)


def _anchor(name: str, hits) -> _Model:
    return _Model(constant_model([1, 3, "height", "width"], anchor_heads(640, 2, hits), name=name))


def _yolo(rows) -> _Model:
    return _Model(constant_model([1, 3, 640, 640], [yolo_head(8400, rows)], name="yolo_face"))


def _yolo_row(box, score=0.9):
    x1, y1, x2, y2 = box
    row = [(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1, score]
    for dx, dy in ((-10, -8), (10, -8), (0, 2), (-7, 12), (7, 12)):
        row += [(x1 + x2) / 2 + dx, (y1 + y2) / 2 + dy, 1.0]
    return row


def _raw(boxes, scores=None) -> RawDetections:
    boxes = np.asarray(boxes, np.float64)
    scores = np.full(len(boxes), 0.9) if scores is None else np.asarray(scores, np.float64)
    return RawDetections(boxes, scores, np.zeros((len(boxes), 5, 2)))


# -- pure steps -----------------------------------------------------------------


def test_the_merge_overlap_is_facefusion_s():
    assert decoding.merge_iou(False, 1) == 0.4
    assert [decoding.merge_iou(False, n) for n in (2, 3, 4)] == [0.3, 0.2, 0.1]
    assert decoding.merge_iou(True, 1) == decoding.merge_iou(True, 4) == 0.1


def test_margin_pads_are_percent_of_half_the_frame():
    assert decoding.margin_pads((400, 600, 3), (0, 0, 0, 0)) == (0, 0, 0, 0)
    assert decoding.margin_pads((400, 600, 3), (100, 50, 10, 1)) == (200, 150, 20, 3)


def test_turning_keeps_the_whole_frame_and_goes_back():
    matrix, size = decoding.turning(90, 600, 400)
    assert size == (400, 600)
    corners = np.array([[0.0, 0.0], [600, 0], [600, 400], [0, 400]]) @ matrix[:, :2].T + matrix[:, 2]
    np.testing.assert_allclose(corners.min(axis=0), [0, 0], atol=1e-9)
    np.testing.assert_allclose(corners.max(axis=0), [400, 600], atol=1e-9)
    # 90 degrees counter-clockwise: the frame's top-right corner is now the top-left one
    np.testing.assert_allclose(corners[1], [0, 0], atol=1e-9)
    back = decoding.moved(decoding.moved(_raw([[10, 20, 50, 80]]), matrix), decoding.cv2.invertAffineTransform(matrix))
    np.testing.assert_allclose(back.boxes, [[10, 20, 50, 80]], atol=1e-9)
    assert decoding.turning(180, 600, 400)[1] == (600, 400)


def test_moved_boxes_are_the_bounding_box_of_their_corners_and_shifted_ordered():
    turn = np.array([[0.0, -1.0, 100.0], [1.0, 0.0, 0.0]])  # (x, y) -> (100 - y, x)
    raw = RawDetections(np.array([[10.0, 20, 30, 60]]), np.array([0.9]), np.array([[[10.0, 20]] * 5]))
    moved = decoding.moved(raw, turn)
    np.testing.assert_allclose(moved.boxes, [[40, 10, 80, 30]])
    np.testing.assert_allclose(moved.points[0, 0], [80, 10])
    np.testing.assert_allclose(decoding.shifted(moved, -5, 2).boxes, [[35, 12, 75, 32]])
    np.testing.assert_allclose(decoding.ordered(_raw([[30, 60, 10, 20]])).boxes, [[10, 20, 30, 60]])


# -- FaceDetection --------------------------------------------------------------


def test_one_detector_at_angle_0_without_margin_is_the_detector_s_own(astronaut):
    hits = [
        (16, 900, 0.8, (40, 50, 44, 60), FIVE),
        (16, 905, 0.7, (38, 52, 46, 58), FIVE),
        (32, 120, 0.95, (9,) * 4, FIVE),
    ]
    model = _anchor("scrfd", hits)
    alone = create_face_detector("scrfd", model).detect(np.ascontiguousarray(astronaut))
    merged = create_face_detection("scrfd", lambda name: model).detect(np.ascontiguousarray(astronaut))
    assert len(alone) >= 1 and [d.bbox for d in merged] == [d.bbox for d in alone]
    assert [d.score for d in merged] == [d.score for d in alone]
    np.testing.assert_array_equal(np.array([d.keypoints for d in merged]), np.array([d.keypoints for d in alone]))


def test_a_margin_finds_the_box_of_the_bordered_frame_back_in_the_frame():
    frame = np.zeros((300, 400, 3), np.uint8)  # with its border still inside 640 px: not scaled
    model = _yolo([(10, _yolo_row((100, 60, 180, 160)))])
    found = create_face_detection("yolo_face", lambda n: model, margin=(10, 0, 0, 20)).detect(frame)
    top, left = 15, 40  # 10 % of half the height, 20 % of half the width
    (face,) = found
    box = [face.bbox.x1, face.bbox.y1, face.bbox.x2, face.bbox.y2]
    np.testing.assert_allclose(box, [100 - left, 60 - top, 180 - left, 160 - top])
    np.testing.assert_allclose(face.keypoints[2], [140 - left, 112 - top])


def test_an_angle_finds_a_face_in_the_turned_frame_and_turns_it_back():
    frame = np.zeros((400, 600, 3), np.uint8)
    model = _yolo([(10, _yolo_row((100, 60, 180, 160)))])  # at this place of whatever the detector sees
    (face,) = create_face_detection("yolo_face", lambda n: model, angles=(90,)).detect(frame)
    matrix, _ = decoding.turning(90, 600, 400)
    back = decoding.moved(_raw([[100, 60, 180, 160]]), decoding.cv2.invertAffineTransform(matrix))
    np.testing.assert_allclose([face.bbox.x1, face.bbox.y1, face.bbox.x2, face.bbox.y2], back.boxes[0], atol=1e-6)
    # at angles 0 and 90 both places are faces, kept apart
    both = create_face_detection("yolo_face", lambda n: model, angles=(0, 90)).detect(frame)
    assert len(both) == 2


def test_many_merges_the_three_detectors_at_facefusion_s_overlap():
    frame = np.zeros((480, 640, 3), np.uint8)
    box = (300.0, 200.0, 380.0, 300.0)  # every detector sees this face, a little apart
    # cell (20, 12) of the stride-16 grid, at (320, 192); distances in strides: the box (280, 142, 360, 242)
    anchor = [(16, (12 * 40 + 20) * 2, 0.8, (2.5, 3.125, 2.5, 3.125), FIVE)]
    models = {
        "retinaface": _anchor("retinaface", anchor),
        "scrfd": _anchor("scrfd", [(s, r, 0.85, d, f) for s, r, _, d, f in anchor]),
        "yolo_face": _yolo([(10, _yolo_row(box, 0.9)), (20, _yolo_row((20, 20, 80, 90), 0.7))]),
    }
    made = create_face_detection("many", models.__getitem__)
    assert isinstance(made, FaceDetection) and [d.name for d in made.detectors] == list(MANY_DETECTORS)
    assert made.iou == 0.1
    found = made.detect(frame)
    assert [round(d.score, 2) for d in found] == [0.9, 0.7]  # one face where all three saw it, the best kept
    np.testing.assert_allclose([found[0].bbox.x1, found[0].bbox.y1, found[0].bbox.x2, found[0].bbox.y2], box)


def test_bad_angles_are_refused_naming_the_accepted_ones():
    model = _yolo([])
    with pytest.raises(InvalidOptionError, match="angle 45; one of 0, 90, 180, 270"):
        FaceDetection([create_face_detector("yolo_face", model)], name="yolo_face", angles=(45,))


# -- options, files, CLI --------------------------------------------------------


def test_the_options_take_many_angles_and_a_margin():
    options = AnalysisOptions(face_detector="many", face_detector_angles=(0, 90, 90), face_detector_margin=(5, 0, 5, 0))
    assert options.face_detector_angles == (0, 90)
    assert options.onnx_models() == ("retinaface", "scrfd", "yolo_face") == detector_models("many")
    assert detector_models("mediapipe") == () and detector_models("yunet") == ("yunet",)
    for fields, message in (
        ({"face_detector": "many", "face_detector_size": 320}, "face detector size 320 for many; one of 640"),
        ({"face_detector": "scrfd", "face_detector_angles": (0, 45)}, "angles: 45; one or more of 0, 90, 180, 270"),
        ({"face_detector": "scrfd", "face_detector_margin": (0, 101, 0, 0)}, r"margin is 4 percentages in \[0, 100\]"),
        ({"face_detector_angles": (0, 90)}, "angles and margin are for FaceFusion's detectors"),
        ({"face_detector_margin": (1, 0, 0, 0)}, "angles and margin are for FaceFusion's detectors"),
    ):
        with pytest.raises(ValueError, match=message):
            AnalysisOptions(**fields)


def test_many_needs_its_three_files_before_any_loads(tmp_path):
    (tmp_path / CATALOG["scrfd"].file_name).write_bytes(b"not looked at")
    sessions = ModelSessions(RuntimeOptions(models_dir=str(tmp_path)))
    try:
        with pytest.raises(ChosenModelMissingError, match="face detector many: model retinaface is not present"):
            FaceAnalyser(AnalysisOptions(face_detector="many"), sessions=sessions)
        assert sessions.loads() == []
    finally:
        sessions.close()


def test_the_cli_and_the_job_spec_take_them(tmp_path, faces_dir):
    from tests.test_cli import assert_clean_error, faceweave

    from faceweave.service.jobspec import options_from_form

    src, tgt = faces_dir / "single/biden2.jpg", faces_dir / "single/astronaut_eileen_collins.png"
    base = ["swap", "-s", src, "-t", tgt, "-o", tmp_path / "out.png", "--models-dir", tmp_path]
    proc = faceweave(*base, "--face-detector", "scrfd", "--face-detector-angles", "0,45")
    assert_clean_error(proc, 2, "--face-detector-angles", "45", "0, 90, 180, 270")
    proc = faceweave(*base, "--face-detector-margin", "10", "0", "0", "0")
    assert_clean_error(proc, 2, "face detector angles and margin are for FaceFusion's detectors")
    proc = faceweave(*base, "--face-detector", "many", "--face-detector-angles", "0", "--face-detector-angles", "90")
    assert_clean_error(proc, 2, "face detector many: model retinaface is not present", "faceweave models")
    job = options_from_form(
        {"face_detector": ["many"], "face_detector_angles": ["0,90", "270"], "face_detector_margin": ["10,0,5,0"]}
    )
    job.check(kind="image")
    made = job.swap_options(kind="image", has_reference=False, max_pixels=10**7, video_working_size=192).analysis
    assert (made.face_detector, made.face_detector_angles, made.face_detector_margin) == (
        "many",
        (0, 90, 270),
        (10, 0, 5, 0),
    )
    assert SwapOptions().analysis.face_detector_angles == (0,)


def test_a_turned_photo_is_found_at_its_angle_through_the_analyser(tmp_path, astronaut):
    """The astronaut turned a quarter clockwise; the yolo_face stand-in sees a
    face only where it is in the upright photo, so only the detection at 90
    degrees (the frame turned back upright) finds it, and the box, the five
    points and the mesh fitted in the box land on the turned face."""
    upright = np.ascontiguousarray(astronaut)
    with FaceAnalyser(AnalysisOptions(small_faces=False)) as plain:
        (face,) = plain.analyse(upright)
    b = face.bbox
    row = [(b.x1 + b.x2) / 2, (b.y1 + b.y2) / 2, b.x2 - b.x1, b.y2 - b.y1, 0.9]
    for x, y in face.kps5:
        row += [float(x), float(y), 1.0]
    model = constant_model([1, 3, 640, 640], [yolo_head(8400, [(1234, row)])], name="yolo_face")
    (tmp_path / CATALOG["yolo_face"].file_name).write_bytes(model.SerializeToString())
    turned = np.ascontiguousarray(np.rot90(upright, -1))  # clockwise: the frame turned 90 counter-clockwise is upright
    matrix, _ = decoding.turning(90, turned.shape[1], turned.shape[0])
    inverse = decoding.cv2.invertAffineTransform(matrix)
    expected = np.asarray(face.kps5, np.float64) @ inverse[:, :2].T + inverse[:, 2]
    sessions = ModelSessions(RuntimeOptions(models_dir=str(tmp_path)))
    try:
        options = AnalysisOptions(small_faces=False, face_detector="yolo_face", face_detector_angles=(90,))
        with FaceAnalyser(options, sessions=sessions) as analyser:
            (found,) = analyser.analyse(turned)
    finally:
        sessions.close()
    np.testing.assert_allclose(found.kps5, expected, atol=1e-3)
    mesh_eyes = found.mesh[[33, 263], :2].mean(axis=0)
    assert np.linalg.norm(mesh_eyes - expected[:2].mean(axis=0)) < 0.15 * (b.x2 - b.x1)


# -- peppa_wutz and many landmarkers ----------------------------------------------


def _landmarkers(peaks: dict[str, float]):
    from tests.analysis_fixtures import landmarker_stand_in

    from faceweave.analysis.face_landmarkers import create_face_landmarker

    def load(name: str) -> _Model:
        return _Model(landmarker_stand_in(name, peak=peaks.get(name, 0.95)))

    return lambda name: create_face_landmarker(name, load)


_FRAME = np.full((600, 800, 3), 128, np.uint8)
_BOX = np.array([300.0, 200.0, 495.0, 395.0])  # 195 px: the crop is the box, shifted


def _five():
    from faceweave.geometry.templates import template_points

    return template_points("ffhq_512", 195) + (300.0, 200.0)


def test_peppa_wutz_points_go_back_to_the_frame_with_its_score():
    from faceweave.analysis.face_landmarkers import FACE_LANDMARKERS, LANDMARKER_MODELS

    assert FACE_LANDMARKERS == ("mediapipe", "2dfan4", "peppa_wutz", "many", "fan_68_5")
    assert LANDMARKER_MODELS["peppa_wutz"] == ("peppa_wutz", "fan_68_5")
    assert LANDMARKER_MODELS["many"] == ("2dfan4", "peppa_wutz", "fan_68_5")
    found = _landmarkers({})("peppa_wutz").points(_FRAME, _BOX, _five())
    angles = np.linspace(0.0, 2 * np.pi, 68, endpoint=False)
    crop = np.stack([32 + 18 * np.cos(angles), 32 + 22 * np.sin(angles)], -1) * 4  # 64 -> 256 px
    np.testing.assert_allclose(found.points68, crop + (397.5 - 128, 297.5 - 128), atol=1e-4)
    assert found.score == pytest.approx(1.0)
    np.testing.assert_allclose(found.five, decoding.five_from_68(found.points68))
    unsure = _landmarkers({"peppa_wutz": 0.38})("peppa_wutz").points(_FRAME, _BOX, _five())
    assert unsure.score == pytest.approx(0.4) and np.allclose(unsure.five, _five())


def test_many_keeps_2dfan4_unless_peppa_wutz_is_clearly_surer():
    # 2dfan4's score: the mean heatmap peak over 0.9; peppa_wutz's: its mean confidence over 0.95
    surer = _landmarkers({"2dfan4": 0.45, "peppa_wutz": 0.7125})("many").points(_FRAME, _BOX, _five())  # 0.5, 0.75
    peppa = _landmarkers({"peppa_wutz": 0.7125})("peppa_wutz").points(_FRAME, _BOX, _five())
    np.testing.assert_allclose(surer.points68, peppa.points68)
    assert surer.score == pytest.approx(0.75)
    close = _landmarkers({"2dfan4": 0.54, "peppa_wutz": 0.7125})("many").points(_FRAME, _BOX, _five())  # 0.6, 0.75
    fan = _landmarkers({"2dfan4": 0.54})("2dfan4").points(_FRAME, _BOX, _five())
    np.testing.assert_allclose(close.points68, fan.points68)
    assert close.score == pytest.approx(0.6)


def test_peppa_wutz_with_another_output_size_is_refused():
    from tests.analysis_fixtures import landmarker_stand_in

    from faceweave.analysis.face_landmarkers import create_face_landmarker
    from faceweave.errors import ModelSignatureError

    def load(name):
        if name == "peppa_wutz":
            return _Model(constant_model([1, 3, 256, 256], [np.zeros((1, 98, 3), np.float32)], name=name))
        return _Model(landmarker_stand_in(name))

    with pytest.raises(ModelSignatureError, match="peppa_wutz: expected 68 x .* 204 values, got shape \\[1, 98, 3\\]"):
        create_face_landmarker("peppa_wutz", load).points(_FRAME, _BOX, _five())


def test_faces_lists_what_swap_finds_with_the_same_detector_flags(tmp_path, faces_dir):
    import json

    from tests.test_cli import assert_clean_error, faceweave

    from faceweave.io.images import read_image

    photo = faces_dir / "single/astronaut_eileen_collins.png"
    with FaceAnalyser(AnalysisOptions(small_faces=False)) as plain:
        (face,) = plain.analyse(np.ascontiguousarray(read_image(photo).pixels))
    b = face.bbox
    model = constant_model([1, 3, 640, 640], [yolo_head(8400, [(1234, _yolo_row((b.x1, b.y1, b.x2, b.y2), 0.77))])])
    (tmp_path / CATALOG["yolo_face"].file_name).write_bytes(model.SerializeToString())
    blind = constant_model([1, 3, "height", "width"], anchor_heads(640, 2, []), name="retinaface")
    (tmp_path / CATALOG["retinaface"].file_name).write_bytes(blind.SerializeToString())
    base = ["faces", photo, "--models-dir", tmp_path, "--json"]
    found = faceweave(*base, "--face-detector", "yolo_face", "--face-detector-angles", "0")
    assert found.returncode == 0, found.stderr
    (row,) = json.loads(found.stdout)["faces"]
    assert row["score"] == pytest.approx(0.77, abs=1e-3)  # the stand-in's, not mediapipe's
    none = faceweave(*base, "--face-detector", "retinaface")
    assert none.returncode == 0 and json.loads(none.stdout)["faces"] == []
    missing = faceweave(*base, "--face-detector", "scrfd")
    assert_clean_error(missing, 2, "face detector scrfd: model scrfd is not present")
