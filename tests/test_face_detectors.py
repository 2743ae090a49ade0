"""FaceFusion's face detectors and landmarkers as faceweave components: each
decoding step with known inputs and outputs, stand-in ONNX models whose
heads hold a known face, and the options that choose them."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from tests.analysis_fixtures import (
    anchor_heads,
    constant_model,
    detector_stand_in,
    fan_68_5_points,
    landmarker_stand_in,
    yolo_head,
    yunet_heads,
)

from faceweave.analysis import decoding
from faceweave.analysis.decoding import Letterbox, RawDetections
from faceweave.analysis.face_detectors import FACE_DETECTORS, create_face_detector
from faceweave.analysis.face_landmarkers import FACE_LANDMARKERS, Fan2dLandmarker, create_face_landmarker
from faceweave.errors import InvalidOptionError, ModelSignatureError
from faceweave.geometry.templates import template_points
from faceweave.options import AnalysisOptions, SwapOptions


class _Model:
    """An onnxruntime session as faceweave's :class:`RunnableModel`."""

    def __init__(self, proto) -> None:
        self.session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
        self.inputs = self.session.get_inputs()
        self.outputs = self.session.get_outputs()

    def run(self, feeds):
        return dict(zip([o.name for o in self.outputs], self.session.run(None, feeds), strict=True))


def _unit_box(ratio: float = 1.0) -> Letterbox:
    return Letterbox(tensor=np.zeros((1, 3, 1, 1), np.float32), ratio_x=ratio, ratio_y=ratio)


# -- letterbox ------------------------------------------------------------------


def test_letterbox_scales_down_to_fit_pads_at_the_top_left_and_says_how_to_go_back():
    frame = np.full((960, 1280, 3), 200, np.uint8)
    boxed = decoding.letterbox(frame, (640, 640), "symmetric")
    assert boxed.tensor.shape == (1, 3, 640, 640) and boxed.tensor.dtype == np.float32
    assert (boxed.ratio_x, boxed.ratio_y) == (2.0, 2.0)
    inside, below = boxed.tensor[0, :, :480], boxed.tensor[0, :, 480:]
    np.testing.assert_allclose(inside, (200 - 127.5) / 128)
    np.testing.assert_allclose(below, -127.5 / 128)
    # a point of the detector's picture goes back to the frame by the ratios
    assert (320 * boxed.ratio_x, 240 * boxed.ratio_y) == (640.0, 480.0)


def test_letterbox_never_upscales_and_normalises_as_asked():
    frame = np.zeros((100, 50, 3), np.uint8)
    frame[10, 20] = (255, 51, 0)
    unit = decoding.letterbox(frame, (640, 640), "unit")
    assert (unit.ratio_x, unit.ratio_y) == (1.0, 1.0)
    np.testing.assert_allclose(unit.tensor[0, :, 10, 20], [1.0, 0.2, 0.0])
    raw = decoding.letterbox(frame, (640, 640), "raw")
    np.testing.assert_allclose(raw.tensor[0, :, 10, 20], [255.0, 51.0, 0.0])
    with pytest.raises(InvalidOptionError, match="symmetric, unit, raw"):
        decoding.letterbox(frame, (640, 640), "imagenet")


def test_letterbox_of_a_wide_frame_keeps_its_aspect():
    boxed = decoding.letterbox(np.ones((300, 1000, 3), np.uint8), (640, 640), "raw")
    assert boxed.ratio_x == pytest.approx(1000 / 640) and boxed.ratio_y == pytest.approx(300 / 192)
    assert boxed.tensor[0, 0, 191, 639] == 1.0 and boxed.tensor[0, 0, 192, 0] == 0.0


# -- anchors and distances ------------------------------------------------------


def test_anchor_centres_go_row_by_row_each_repeated_per_cell():
    centres = decoding.anchor_centres(32, 2, (96, 64))
    expected = [(0, 0), (0, 0), (32, 0), (32, 0), (64, 0), (64, 0), (0, 32), (0, 32), (32, 32), (32, 32)]
    assert [tuple(p) for p in centres[:10]] == expected
    assert len(centres) == 3 * 2 * 2
    assert len(decoding.anchor_centres(8, 1, (640, 640))) == 6400


def test_distances_to_boxes_and_points():
    anchors = np.array([[100.0, 50.0]])
    np.testing.assert_allclose(decoding.distance_boxes(anchors, np.array([[10.0, 20, 30, 40]])), [[90, 30, 130, 90]])
    points = decoding.distance_points(anchors, np.array([[1.0, 2, -3, -4]]))
    np.testing.assert_allclose(points, [[[101, 52], [97, 46]]])


def test_anchor_heads_decode_to_frame_pixels():
    heads = anchor_heads(640, 2, [(16, 840, 0.9, (2, 3, 4, 5), (-1, -1, 1, -1, 0, 0, -1, 1, 1, 1))])
    raw = decoding.decode_anchor_heads(heads, _unit_box(2.0), (640, 640), threshold=0.5, model="scrfd")
    # anchor 840 at stride 16 is cell 420: row 10, column 20, at (320, 160)
    np.testing.assert_allclose(raw.boxes, [[576, 224, 768, 480]])
    np.testing.assert_allclose(raw.points[0], [[608, 288], [672, 288], [640, 320], [608, 352], [672, 352]])
    assert raw.scores.tolist() == [pytest.approx(0.9)]
    assert len(decoding.decode_anchor_heads(heads, _unit_box(), (640, 640), threshold=0.95, model="x").scores) == 0


def test_anchor_heads_of_the_wrong_size_are_refused_with_the_shapes():
    heads = anchor_heads(320, 2, [])
    with pytest.raises(ModelSignatureError, match=r"scrfd scores at stride 8: output of shape \[3200, 1\]"):
        decoding.decode_anchor_heads(heads, _unit_box(), (640, 640), threshold=0.0, model="scrfd")


def test_yunet_heads_multiply_class_and_object_and_decode_log_sizes():
    heads = yunet_heads(
        640, [(32, 21, 0.8, 0.5, (0.5, 0.25, np.log(2.0), np.log(3.0)), (1, 0, 0, 1, 0, 0, 0, 0, 0, 0))]
    )
    raw = decoding.decode_yunet(heads, _unit_box(), (640, 640), threshold=0.3)
    # cell 21 of the 20-wide stride-32 grid: row 1, column 1, at (32, 32)
    centre = (32 + 0.5 * 32, 32 + 0.25 * 32)
    np.testing.assert_allclose(raw.boxes, [[centre[0] - 32, centre[1] - 48, centre[0] + 32, centre[1] + 48]], atol=1e-5)
    np.testing.assert_allclose(raw.points[0][:2], [[64, 32], [32, 64]])
    assert raw.scores.tolist() == [pytest.approx(0.4)]
    assert len(decoding.decode_yunet(heads, _unit_box(), (640, 640), threshold=0.41).scores) == 0


def test_yolo_rows_decode_centre_size_and_points_and_need_a_score_above_the_threshold():
    row = [300, 200, 80, 100, 0.8] + [280, 180, 1, 320, 180, 1, 300, 200, 1, 285, 225, 1, 315, 225, 1]
    raw = decoding.decode_yolo(yolo_head(8400, [(5000, row)]), _unit_box(2.0), threshold=0.5)
    np.testing.assert_allclose(raw.boxes, [[520, 300, 680, 500]])
    np.testing.assert_allclose(raw.points[0], [[560, 360], [640, 360], [600, 400], [570, 450], [630, 450]])
    assert (
        len(decoding.decode_yolo(yolo_head(10, [(3, [0] * 4 + [0.5] + [0] * 15)]), _unit_box(), threshold=0.5).scores)
        == 0
    )
    with pytest.raises(ModelSignatureError, match=r"expected \[1, 20, anchors\]"):
        decoding.decode_yolo(np.zeros((1, 16, 10)), _unit_box(), threshold=0.5)


# -- suppression ----------------------------------------------------------------


def _raw(boxes, scores) -> RawDetections:
    return RawDetections(np.array(boxes, float), np.array(scores, float), np.zeros((len(scores), 5, 2)))


def test_box_iou_by_hand():
    iou = decoding.box_iou(np.array([0.0, 0, 10, 10]), np.array([[5.0, 0, 15, 10], [20, 20, 30, 30], [0, 0, 10, 10]]))
    np.testing.assert_allclose(iou, [50 / 150, 0.0, 1.0])


def test_suppression_keeps_the_best_of_overlapping_hits_best_first():
    raw = _raw(
        [[0, 0, 10, 10], [1, 0, 11, 10], [5, 0, 15, 10], [50, 50, 60, 60], [0, 0, 10, 10]],
        [0.7, 0.9, 0.8, 0.6, 0.5],
    )
    # 1 (best) suppresses 0 (IoU 0.82); 2 overlaps 1 by 6/14 = 0.43 > 0.4; 3 is apart; 4 is not above 0.5
    assert decoding.suppress(raw, score_threshold=0.5, iou_threshold=0.4) == [1, 3]
    assert decoding.suppress(raw, score_threshold=0.5, iou_threshold=0.45) == [1, 2, 3]
    assert decoding.suppress(raw, score_threshold=0.95, iou_threshold=0.4) == []


def test_suppression_breaks_ties_in_input_order():
    raw = _raw([[0, 0, 10, 10], [0, 0, 10, 10], [30, 30, 40, 40]], [0.8, 0.8, 0.8])
    assert decoding.suppress(raw, score_threshold=0.5, iou_threshold=0.4) == [0, 2]


# -- the 68-point landmarker's geometry ----------------------------------------


def test_fan_crop_matrix_puts_the_longer_side_at_195_px_in_the_middle():
    m = decoding.fan_crop_matrix(np.array([100.0, 200.0, 490.0, 400.0]))
    corners = decoding.transform(np.array([[100.0, 200.0], [490.0, 400.0]]), m)
    np.testing.assert_allclose(corners, [[30.5, 78.0], [225.5, 178.0]])


def test_five_from_68_and_the_face_angle():
    points = np.zeros((68, 2))
    points[36:42], points[42:48] = (10.0, 20.0), (30.0, 22.0)
    points[36, 0], points[41, 0] = 7.0, 13.0
    points[30], points[48], points[54] = (20, 30), (12, 40), (28, 41)
    np.testing.assert_allclose(decoding.five_from_68(points), [[10, 20], [30, 22], [20, 30], [12, 40], [28, 41]])
    points[0], points[16] = (0.0, 0.0), (10.0, 1.0)
    assert decoding.face_angle(points) == 0
    points[16] = (1.0, 10.0)
    assert decoding.face_angle(points) == 90
    points[16] = (-10.0, 1.0)
    assert decoding.face_angle(points) == 180
    points[16] = (2.0, -10.0)
    assert decoding.face_angle(points) == 270


def test_heatmap_score_is_the_mean_peak_stretched_to_0_9():
    maps = np.zeros((2, 4, 4))
    maps[0, 1, 2], maps[1, 3, 3] = 0.45, 0.27
    assert decoding.heatmap_score(maps) == pytest.approx(0.36 / 0.9)
    maps[:, 0, 0] = 0.95
    assert decoding.heatmap_score(maps) == 1.0


def test_lift_dark_equalises_only_dark_crops():
    bright = np.full((32, 32, 3), 120, np.uint8)
    assert np.abs(decoding.lift_dark(bright).astype(int) - 120).max() <= 1
    dark = np.zeros((32, 32, 3), np.uint8)
    dark[:, 16:] = 20
    lifted = decoding.lift_dark(dark)
    assert lifted[:, 16:].mean() > 30


# -- stand-in models: a known face in, its box and points out ---------------------


@pytest.mark.parametrize("name", ["scrfd", "retinaface"])
def test_an_anchor_detector_stand_in_gives_its_face_in_image_coordinates(name):
    detector = create_face_detector(name, _Model(detector_stand_in(name)))
    found = detector.detect(np.zeros((960, 1280, 3), np.uint8))
    assert len(found) == 1
    box = found[0].bbox
    assert (box.x1, box.y1, box.x2, box.y2) == (576, 224, 768, 480)
    np.testing.assert_allclose(found[0].keypoints[2], [640, 320])
    assert found[0].score == pytest.approx(0.9)


def test_the_yolo_and_yunet_stand_ins_give_their_faces():
    frame = np.zeros((480, 640, 3), np.uint8)
    yolo = create_face_detector("yolo_face", _Model(detector_stand_in("yolo_face"))).detect(frame)
    assert [(d.bbox.x1, d.bbox.y1, d.bbox.x2, d.bbox.y2) for d in yolo] == [(260, 150, 340, 250)]
    yunet = create_face_detector("yunet", _Model(detector_stand_in("yunet"))).detect(frame)
    # cell 420 of stride 16: row 10, column 20 -> (320, 160), shifted half a stride right and up
    cx, cy, w, h = 328.0, 152.0, np.exp(1.0) * 16, np.exp(1.2) * 16
    assert len(yunet) == 1 and yunet[0].score == pytest.approx(0.855)
    b = yunet[0].bbox
    np.testing.assert_allclose([b.x1, b.y1, b.x2, b.y2], [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], rtol=1e-6)


def test_the_detector_sees_the_frame_in_bgr():
    """A stand-in whose score is the input's first channel at (0, 0): a blue
    pixel there (BGR: first channel 1) is a face, a red one is not."""
    from onnx import TensorProto, helper
    from tests.onnx_fixtures import IR_VERSION, OPSET

    row = np.zeros((1, 20, 1), np.float32)
    row[0, :4, 0] = (50, 50, 20, 20)
    nodes = [
        helper.make_node("Slice", ["input", "_s", "_e"], ["_px"]),
        helper.make_node("Reshape", ["_px", "_shape"], ["_score"]),
        helper.make_node("Concat", ["_head", "_score", "_tail"], ["out"], axis=1),
    ]
    from onnx import numpy_helper

    inits = [
        numpy_helper.from_array(np.array([0, 0, 0, 0], np.int64), "_s"),
        numpy_helper.from_array(np.array([1, 1, 1, 1], np.int64), "_e"),
        numpy_helper.from_array(np.array([1, 1, 1], np.int64), "_shape"),
        numpy_helper.from_array(row[:, :4], "_head"),
        numpy_helper.from_array(row[:, 5:], "_tail"),
    ]
    graph = helper.make_graph(
        nodes,
        "bgr",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 640, 640])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 20, 1])],
        initializer=inits,
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    proto.ir_version = IR_VERSION
    detector = create_face_detector("yolo_face", _Model(proto))
    blue, red = np.zeros((100, 100, 3), np.uint8), np.zeros((100, 100, 3), np.uint8)
    blue[0, 0], red[0, 0] = (0, 0, 255), (255, 0, 0)
    assert len(detector.detect(blue)) == 1 and detector.detect(red) == []


def test_a_detector_with_the_wrong_outputs_or_size_is_refused():
    with pytest.raises(ModelSignatureError, match="scrfd: expected one input 'input' and 9 outputs"):
        create_face_detector("scrfd", _Model(constant_model([1, 3, 640, 640], [np.zeros((1, 20, 3))])))
    with pytest.raises(InvalidOptionError, match="yunet takes sizes 640, not 320"):
        create_face_detector("yunet", _Model(detector_stand_in("yunet")), size=320)
    with pytest.raises(InvalidOptionError, match="unknown face detector 'dlib'; one of mediapipe, yolo_face"):
        create_face_detector("dlib", _Model(detector_stand_in("yunet")))


def _landmarker(name: str, peak: float = 0.95):
    return create_face_landmarker(name, lambda n: _Model(landmarker_stand_in(n, peak=peak)))


def test_fan_68_5_maps_its_template_points_back_through_the_alignment():
    five = template_points("ffhq_512", 400) + (100.0, 50.0)
    found = _landmarker("fan_68_5").points(np.zeros((8, 8, 3), np.uint8), np.zeros(4), five)
    expected = fan_68_5_points() * 400 + (100.0, 50.0)
    np.testing.assert_allclose(found.points68, expected, atol=1e-3)
    np.testing.assert_allclose(found.five, five)
    assert found.score == 0.0


def test_2dfan4_points_go_back_to_the_frame_and_replace_the_five_when_confident():
    frame = np.full((600, 800, 3), 128, np.uint8)
    box = np.array([300.0, 200.0, 495.0, 395.0])  # 195 px: the crop is the box, shifted
    five = template_points("ffhq_512", 195) + (300.0, 200.0)
    found = _landmarker("2dfan4").points(frame, box, five)
    angles = np.linspace(0.0, 2 * np.pi, 68, endpoint=False)
    crop = np.stack([32 + 20 * np.cos(angles), 32 + 20 * np.sin(angles)], -1) * 4  # 64 -> 256 px
    np.testing.assert_allclose(found.points68, crop + (397.5 - 128, 297.5 - 128), atol=1e-6)
    assert found.score == 1.0
    np.testing.assert_allclose(found.five, decoding.five_from_68(found.points68))
    unsure = _landmarker("2dfan4", peak=0.3).points(frame, box, five)
    assert unsure.score == pytest.approx(1 / 3) and np.allclose(unsure.five, five)


def test_2dfan4_turns_the_crop_upright_by_the_face_angle(monkeypatch):
    lm = _landmarker("2dfan4")
    assert isinstance(lm, Fan2dLandmarker)
    seen: list[int] = []
    original = lm.run
    monkeypatch.setattr(lm, "run", lambda rgb, box, angle: (seen.append(angle), original(rgb, box, angle))[1])
    frame = np.zeros((300, 300, 3), np.uint8)
    upright = template_points("ffhq_512", 100) + 100.0
    turned = (upright - 150.0) @ np.array([[0.0, 1.0], [-1.0, 0.0]]) + 150.0  # a quarter turn
    lm.points(frame, np.array([100.0, 100.0, 200.0, 200.0]), upright)
    lm.points(frame, np.array([100.0, 100.0, 200.0, 200.0]), turned)
    assert seen[0] == 0 and seen[1] in (90, 270)


# -- options --------------------------------------------------------------------


def test_the_option_names_are_the_registered_ones():
    assert FACE_DETECTORS == ("mediapipe", "yolo_face", "scrfd", "retinaface", "yunet", "many")
    assert FACE_LANDMARKERS == ("mediapipe", "2dfan4", "peppa_wutz", "many", "fan_68_5")
    options = SwapOptions(analysis=AnalysisOptions(face_detector="scrfd", face_landmarker="2dfan4"))
    assert options.analysis.onnx_models() == ("scrfd", "2dfan4", "fan_68_5")
    assert AnalysisOptions().onnx_models() == ()


@pytest.mark.parametrize(
    "fields, message",
    [
        (
            {"face_detector": "mtcnn"},
            "unknown face detector 'mtcnn'; one of mediapipe, yolo_face, scrfd, retinaface, yunet, many",
        ),
        (
            {"face_landmarker": "hrnet"},
            "unknown face landmarker 'hrnet'; one of mediapipe, 2dfan4, peppa_wutz, many, fan_68_5",
        ),
        ({"face_detector": "yolo_face", "face_detector_size": 320}, "face detector size 320 for yolo_face; one of 640"),
        ({"face_detector": "scrfd", "face_detector_size": 300}, "one of 160, 320, 480, 512, 640"),
    ],
)
def test_bad_analysis_options_say_what_is_accepted(fields, message):
    with pytest.raises(ValueError, match=message):
        AnalysisOptions(**fields)


def test_catalog_facts_of_the_detectors_and_landmarkers():
    """Checked by hand against FaceFusion 3.8.1's face_detector.py and face_landmarker.py."""
    from faceweave.models import builtin_specs

    catalog = builtin_specs()
    facts = {
        "retinaface": ("retinaface_10g.onnx", "models-3.0.0", "Non-Commercial", "InsightFace", 9),
        "scrfd": ("scrfd_2.5g.onnx", "models-3.0.0", "Non-Commercial", "InsightFace", 9),
        "yolo_face": ("yoloface_8n.onnx", "models-3.0.0", "GPL-3.0", "derronqi", 1),
        "yunet": ("yunet_2023_mar.onnx", "models-3.4.0", "MIT", "OpenCV", 12),
        "2dfan4": ("2dfan4.onnx", "models-3.0.0", "MIT", "breadbread1984", 2),
        "fan_68_5": ("fan_68_5.onnx", "models-3.0.0", "OpenRAIL-M", "FaceFusion", 1),
    }
    for name, (file, tag, licence, vendor, outputs) in facts.items():
        spec = catalog[name]
        assert (spec.file_name, spec.licence, spec.vendor, len(spec.outputs)) == (file, licence, vendor, outputs)
        assert spec.urls[0].endswith(f"/{tag}/{file}") and [t.name for t in spec.inputs] == ["input"]
        assert spec.sha256 is None  # FaceFusion pins CRC32 (.hash), not sha256
    assert catalog["2dfan4"].requires == ("fan_68_5",)
    assert catalog["yolo_face"].outputs[0].shape == (None, 20, None)
    assert catalog["2dfan4"].outputs[1].shape == (None, 68, 64, 64)
