"""ONNX stand-ins for FaceFusion's mask models with the real signatures
(``xseg_*``: ``input`` ``[N, 256, 256, 3]`` -> ``[N, 256, 256, 1]``;
``bisenet_*``: ``input`` ``[N, 3, 512, 512]`` -> ``[N, 19, 512, 512]``) and
outputs known by construction."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper
from tests.neural_fixtures import _model, _value


def occluder_model(
    mask: np.ndarray | None = None, *, weights: tuple[float, float, float] = (0.0, 0.0, 0.0)
) -> onnx.ModelProto:
    """An XSeg stand-in: ``output = sum_c weights[c] * input[..., c] + mask``
    (``mask`` ``(256, 256)``, default zeros; the channels in the order fed,
    BGR)."""
    base = np.zeros((256, 256), np.float32) if mask is None else np.asarray(mask, np.float32)
    inits = [
        numpy_helper.from_array(np.asarray(weights, np.float32).reshape(3, 1), "w"),
        numpy_helper.from_array(base.reshape(1, 256, 256, 1), "base"),
    ]
    nodes = [
        helper.make_node("MatMul", ["input", "w"], ["summed"]),
        helper.make_node("Add", ["summed", "base"], ["output"]),
    ]
    return _model(nodes, [_value("input", ["N", 256, 256, 3])], [_value("output", ["N", 256, 256, 1])], inits)


def parser_model(
    labels: np.ndarray | None = None, *, weights: np.ndarray | None = None, scale: int = 8, extra: bool = False
) -> onnx.ModelProto:
    """A BiSeNet stand-in: ``output = onehot(labels) * 10 upsampled x scale
    (nearest) + conv1x1(input, weights)`` (``labels`` ``(512 / scale, 512 /
    scale)`` class numbers, default all 0; ``weights`` ``(19, 3)``, default 0).
    ``extra``: two more outputs after it, ``feat16`` and ``feat32`` (the
    negated logits), as BiSeNet exported by yakhyo/face-parsing's own script."""
    small = 512 // scale
    lab = np.zeros((small, small), np.int64) if labels is None else np.asarray(labels, np.int64)
    onehot = (np.arange(19)[:, None, None] == lab[None]).astype(np.float32)[None] * 10.0
    w = np.zeros((19, 3), np.float32) if weights is None else np.asarray(weights, np.float32)
    inits = [
        numpy_helper.from_array(onehot, "onehot"),
        numpy_helper.from_array(np.array([1, 1, scale, scale], np.float32), "scales"),
        numpy_helper.from_array(np.zeros(0, np.float32), "roi"),
        numpy_helper.from_array(w.reshape(19, 3, 1, 1), "w"),
    ]
    nodes = [
        helper.make_node("Resize", ["onehot", "roi", "scales"], ["up"], mode="nearest"),
        helper.make_node("Conv", ["input", "w"], ["mixed"]),
        helper.make_node("Add", ["mixed", "up"], ["output"]),
    ]
    names = ["output", "feat16", "feat32"] if extra else ["output"]
    nodes += [helper.make_node("Neg", ["output"], [name]) for name in names[1:]]
    outputs = [_value(name, ["N", 19, 512, 512]) for name in names]
    return _model(nodes, [_value("input", ["N", 3, 512, 512])], outputs, inits)
