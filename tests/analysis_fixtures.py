"""Stand-ins for FaceFusion's face detectors and landmarkers: graphs with
the real input (``input``) whose outputs are chosen constants (each plus
0 x the input's mean, so the graph reads its input), and the helpers that lay
out a known face in a detector's heads.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from tests.onnx_fixtures import IR_VERSION, OPSET

#: rows per stride of the anchor heads at 640 px: (640 / stride)^2 x anchors per cell
STRIDES = (8, 16, 32)


def constant_model(
    input_shape: Sequence[int | str | None], outputs: Sequence[np.ndarray], *, name: str = "stand_in"
) -> onnx.ModelProto:
    """A graph ``input`` (float32, ``input_shape``) -> ``outputs`` (float32
    constants, in order, named ``out_N``)."""
    nodes = [
        helper.make_node("ReduceMean", ["input"], ["_mean"], keepdims=0),
        helper.make_node("Mul", ["_mean", "_zero"], ["_nothing"]),
    ]
    inits = [numpy_helper.from_array(np.array(0.0, np.float32), "_zero")]
    infos = []
    for index, value in enumerate(outputs):
        value = np.asarray(value, np.float32)
        inits.append(numpy_helper.from_array(value, f"_c{index}"))
        nodes.append(helper.make_node("Add", [f"_c{index}", "_nothing"], [f"out_{index}"]))
        infos.append(helper.make_tensor_value_info(f"out_{index}", TensorProto.FLOAT, list(value.shape)))
    dims = [d if isinstance(d, (int, str)) else None for d in input_shape]
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("input", TensorProto.FLOAT, dims)], infos, initializer=inits
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="faceweave-tests")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def anchor_heads(size: int, per_cell: int, hits: Sequence[tuple[int, int, float, Sequence[float], Sequence[float]]]):
    """scrfd / retinaface heads (no batch axis) at ``size``: zero scores except
    ``hits``: ``(stride, row, score, box distances (4), point offsets (10))``
    at anchor ``row`` of that stride."""
    scores, boxes, points = [], [], []
    for stride in STRIDES:
        n = (size // stride) ** 2 * per_cell
        scores.append(np.zeros((n, 1), np.float32))
        boxes.append(np.zeros((n, 4), np.float32))
        points.append(np.zeros((n, 10), np.float32))
    for stride, row, score, dist, offs in hits:
        i = STRIDES.index(stride)
        scores[i][row, 0], boxes[i][row], points[i][row] = score, dist, offs
    return scores + boxes + points


def yunet_heads(size: int, hits: Sequence[tuple[int, int, float, float, Sequence[float], Sequence[float]]]):
    """yunet heads ``[1, N, C]``: ``hits`` ``(stride, row, class, object,
    box (dx, dy, log w, log h), points (10))``."""
    heads: list[list[np.ndarray]] = [[], [], [], []]
    for stride in STRIDES:
        n = (size // stride) ** 2
        for part, width in zip(heads, (1, 1, 4, 10), strict=True):
            part.append(np.zeros((1, n, width), np.float32))
    for stride, row, cls, obj, box, offs in hits:
        i = STRIDES.index(stride)
        heads[0][i][0, row, 0], heads[1][i][0, row, 0] = cls, obj
        heads[2][i][0, row], heads[3][i][0, row] = box, offs
    return [t for part in heads for t in part]


def yolo_head(anchors: int, hits: Sequence[tuple[int, Sequence[float]]]) -> np.ndarray:
    """yolo_face's ``[1, 20, anchors]``: zero except ``hits`` ``(anchor, 20 values)``."""
    out = np.zeros((1, 20, anchors), np.float32)
    for anchor, values in hits:
        out[0, :, anchor] = values
    return out


def detector_stand_in(name: str) -> onnx.ModelProto:
    """A stand-in for the catalogued detector ``name`` at 640 px with one
    confident face in its heads (the same hit for scrfd and retinaface)."""
    if name in ("scrfd", "retinaface"):
        heads = anchor_heads(640, 2, [(16, 840, 0.9, (2, 3, 4, 5), (-1, -1, 1, -1, 0, 0, -1, 1, 1, 1))])
        return constant_model([1, 3, "height", "width"], heads, name=name)
    if name == "yunet":
        heads = yunet_heads(640, [(16, 420, 0.95, 0.9, (0.5, -0.5, 1.0, 1.2), (0.0,) * 10)])
        return constant_model([1, 3, 640, 640], heads, name=name)
    row = [300, 200, 80, 100, 0.8] + [280, 180, 1, 320, 180, 1, 300, 200, 1, 285, 225, 1, 315, 225, 1]
    return constant_model([1, 3, 640, 640], [yolo_head(8400, [(5000, row)])], name=name)


def landmarker_stand_in(name: str, *, peak: float = 0.95) -> onnx.ModelProto:
    """``2dfan4``: 68 points on a circle of the 64 px grid and heatmaps
    peaking at ``peak``; ``peppa_wutz``: 68 points on an oval of the grid,
    each with the confidence ``peak``; ``fan_68_5``: :func:`fan_68_5_points`."""
    if name == "2dfan4":
        angles = np.linspace(0.0, 2 * np.pi, 68, endpoint=False)
        marks = np.zeros((1, 68, 3), np.float32)
        marks[0, :, 0], marks[0, :, 1], marks[0, :, 2] = 32 + 20 * np.cos(angles), 32 + 20 * np.sin(angles), 1
        heatmaps = np.zeros((1, 68, 64, 64), np.float32)
        heatmaps[0, :, 10, 10] = peak
        return constant_model([1, 3, 256, 256], [marks, heatmaps], name=name)
    if name == "peppa_wutz":
        angles = np.linspace(0.0, 2 * np.pi, 68, endpoint=False)
        rows = np.zeros((1, 68, 3), np.float32)
        rows[0, :, 0], rows[0, :, 1], rows[0, :, 2] = 32 + 18 * np.cos(angles), 32 + 22 * np.sin(angles), peak
        return constant_model([1, 3, 256, 256], [rows], name=name)
    return constant_model([1, 5, 2], [fan_68_5_points()[None].astype(np.float32)], name=name)


def fan_68_5_points() -> np.ndarray:
    """The ``fan_68_5`` stand-in's 68 points on the unit template: an oval,
    with the jaw's ends (0 and 16) level, left and right."""
    angles = np.linspace(0.0, 2 * np.pi, 68, endpoint=False)
    points = np.stack([0.5 + 0.2 * np.cos(angles), 0.6 + 0.25 * np.sin(angles)], axis=-1)
    points[0], points[16] = (0.3, 0.6), (0.7, 0.6)
    return points
