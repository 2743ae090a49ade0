"""Tiny ONNX models with the input/output names and shapes of the real
enhancer models, each computing something a test can work out by hand, and
an adapter that gives an onnxruntime session the enhancers' model protocol."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 9


@dataclass(frozen=True)
class Info:
    """A tensor described as ``faceweave.runtime`` does: numpy ``dtype`` name,
    ``None`` for dynamic dimensions."""

    name: str
    shape: tuple
    dtype: str


_NUMPY = {
    "tensor(float)": "float32",
    "tensor(double)": "float64",
    "tensor(float16)": "float16",
    "tensor(int64)": "int64",
}


def runtime_style(args) -> tuple[Info, ...]:
    return tuple(Info(a.name, tuple(d if isinstance(d, int) else None for d in a.shape), _NUMPY[a.type]) for a in args)


class OrtModel:
    """``inputs`` / ``outputs`` / ``run(feeds) -> dict`` over an in-memory ONNX
    graph.  ``runtime=True``: tensors described as :class:`Info`, and feeds
    checked for the exact dtype (as ``faceweave.runtime`` does), instead of
    onnxruntime's own ``NodeArg``."""

    def __init__(self, graph: onnx.ModelProto, *, runtime: bool = False) -> None:
        onnx.checker.check_model(graph)
        self.proto = graph
        self.session = ort.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
        self.inputs = runtime_style(self.session.get_inputs()) if runtime else self.session.get_inputs()
        self.outputs = runtime_style(self.session.get_outputs()) if runtime else self.session.get_outputs()
        self.runtime = runtime
        self.calls: list[dict[str, tuple[int, ...]]] = []

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.calls.append({k: tuple(v.shape) for k, v in feeds.items()})
        if self.runtime:
            for info in self.inputs:
                assert feeds[info.name].dtype.name == info.dtype, (info.name, feeds[info.name].dtype)
        names = [o.name for o in self.outputs]
        return dict(zip(names, self.session.run(names, feeds), strict=False))


def _model(nodes, inputs, outputs, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "tiny", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)


def _const(name: str, value: Any, dtype=np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def face_model(
    *,
    size: int = 512,
    batch: int | str = 1,
    op: str = "identity",
    value: float = 0.0,
    input_name: str = "input",
    out_size: int | None = None,
) -> OrtModel:
    """GFPGAN-like ``input [batch, 3, size, size] -> output [batch, 3, size, size]``.

    ``op``: ``identity``; ``add`` (``input + value``); ``red`` (every channel
    becomes channel 0, to see which colour order the model gets); ``resize``
    (output of side ``out_size``, to provoke a shape error)."""
    o = out_size or size
    x = helper.make_tensor_value_info(input_name, TensorProto.FLOAT, [batch, 3, size, size])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, [batch, 3, o, o])
    inits = []
    if op == "identity":
        nodes = [helper.make_node("Identity", [input_name], ["output"])]
    elif op == "add":
        nodes = [helper.make_node("Add", [input_name, "c"], ["output"])]
        inits = [_const("c", [value])]
    elif op == "red":
        nodes = [helper.make_node("Gather", [input_name, "idx"], ["output"], axis=1)]
        inits = [_const("idx", [0, 0, 0], np.int64)]
    elif op == "resize":
        nodes = [helper.make_node("Resize", [input_name, "", "", "sizes"], ["output"], mode="nearest")]
        inits = [_const("sizes", [1, 3, o, o], np.int64)]
    else:
        raise ValueError(op)
    return OrtModel(_model(nodes, [x], [y], inits))


def codeformer_model(*, size: int = 512, runtime: bool = False) -> OrtModel:
    """CodeFormer-like: ``input [1, 3, S, S]`` float and ``weight [1]`` double;
    ``output = input * weight``."""
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])
    w = helper.make_tensor_value_info("weight", TensorProto.DOUBLE, [1])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, size, size])
    nodes = [
        helper.make_node("Cast", ["weight"], ["wf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["input", "wf"], ["output"]),
    ]
    return OrtModel(_model(nodes, [x, w], [y]), runtime=runtime)


def frame_model(*, op: str = "nearest", scale: int = 2, batch: int | str = 1, tile: int | None = None) -> OrtModel:
    """Real-ESRGAN-like ``input [batch, 3, H, W] -> output [batch, 3, H*s, W*s]``
    (``tile``: fixed ``H = W = tile``; otherwise dynamic).

    ``op``: ``nearest`` (each pixel repeated ``scale`` x ``scale`` times),
    ``square`` (``input * input``, scale 1: no rounding ties), ``blur`` (3x3 mean with zero padding,
    scale 1: wrong at a tile's edge, as a real network is)."""
    h, w = (tile, tile) if tile else ("height", "width")
    oh, ow = (tile * scale, tile * scale) if tile else ("out_height", "out_width")
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, h, w])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, [batch, 3, oh, ow])
    if op == "nearest":
        nodes = [
            helper.make_node(
                "Resize",
                ["input", "", "scales"],
                ["output"],
                mode="nearest",
                coordinate_transformation_mode="asymmetric",
                nearest_mode="floor",
            )
        ]
        inits = [_const("scales", [1, 1, scale, scale])]
    elif op == "square":
        nodes = [helper.make_node("Mul", ["input", "input"], ["output"])]
        inits = []
    elif op == "blur":
        nodes = [helper.make_node("Conv", ["input", "k"], ["output"], group=3, pads=[1, 1, 1, 1])]
        inits = [_const("k", np.full((3, 1, 3, 3), 1.0 / 9.0))]
    else:
        raise ValueError(op)
    return OrtModel(_model(nodes, [x], [y], inits))


#: the stand-ins: ddcolor's a, b = A @ rgb + B (rgb in [0, 1]); deoldify's rgb = G * grey + O (0-255)
DD_W, DD_B = [[40.0, 0.0, 0.0], [0.0, -30.0, 0.0]], [-10.0, 15.0]
OLD_W, OLD_B = [[0.9, 0.0, 0.0], [0.0, 0.8, 0.0], [0.0, 0.0, 0.5]], [20.0, 10.0, 5.0]


def colorizer_model(family: str, *, side: int | str = "height") -> OrtModel:
    """``input [1, 3, H, W] -> output [1, C, H, W]``: a 1x1 convolution (C = 2 for ddcolor, 3 for deoldify)."""
    weights, bias = (DD_W, DD_B) if family == "ddcolor" else (OLD_W, OLD_B)
    c = len(weights)
    w = side if isinstance(side, int) else "width"
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, side, w])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, c, side, w])
    node = helper.make_node("Conv", ["input", "k", "b"], ["output"])
    inits = [_const("k", np.asarray(weights).reshape(c, 3, 1, 1)), _const("b", bias)]
    return OrtModel(_model([node], [x], [y], inits))


def remover_model(family: str, *, size: int | str = "height") -> OrtModel:
    """A background remover stand-in, ``input [1, C, H, W]`` (C = 4 for corridor_key) -> a 1x1 convolution:
    the mask ``2 * x0 - 0.5 * x1 + 0.1`` (running past [0, 1], so the clipping shows); u2net_cloth: four class
    scores; corridor_key: the mask and a keyed frame ``[1, 3, H, W]``."""
    c = 4 if family == "corridor_key" else 3
    w = size if isinstance(size, int) else "width"
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, c, size, w])
    rows = {"u2net_cloth": [[0.2, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [0.5, 0.5, 0]]}.get(family, [[2.0, -0.5, 0.0]])
    rows = [r + [0.3] * (c - 3) for r in rows]
    bias = [0.1] * len(rows)
    out = helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, len(rows), size, w])
    nodes = [helper.make_node("Conv", ["input", "k", "b"], ["mask"])]
    inits = [_const("k", np.asarray(rows).reshape(len(rows), c, 1, 1)), _const("b", bias)]
    outputs = [out]
    if family == "corridor_key":
        keyed = [[0.2, 0.0, 0.0, 0.1], [0.0, 0.25, 0.0, 0.1], [0.0, 0.0, 0.2, 0.1]]
        nodes.append(helper.make_node("Conv", ["input", "k2", "b2"], ["frame"]))
        inits += [_const("k2", np.asarray(keyed).reshape(3, 4, 1, 1)), _const("b2", [0.4, 0.5, 0.45])]
        outputs.append(helper.make_tensor_value_info("frame", TensorProto.FLOAT, [1, 3, size, w]))
    return OrtModel(_model(nodes, [x], outputs, inits))


def lip_syncer_model(family: str, *, target_channels: int | None = None, weight: bool = True) -> OrtModel:
    """A lip syncer stand-in with FaceFusion's names and shapes: ``source [1, 1, 80, 16]`` and ``target``
    (wav2lip: ``[1, 6, 96, 96]``; edtalk: ``[1, 3, 256, 256]`` and ``weight [1]``) -> ``[1, 3, S, S]``: a 1x1
    convolution of the target plus the mean of the source over ten (times the weight for edtalk), so both
    the picture and the speech show in the output (``weight=False``: an edtalk without its weight input)."""
    size, channels = (96, 6) if family == "wav2lip" else (256, 3)
    channels = target_channels or channels
    source = helper.make_tensor_value_info("source", TensorProto.FLOAT, [1, 1, 80, 16])
    target = helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, channels, size, size])
    out = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, size, size])
    rows = np.zeros((3, channels), np.float32)
    rows[:, channels - 3 :] = np.eye(3) * 0.9  # the whole face (wav2lip's last three channels), darkened
    rows[:, 0] += 0.05
    nodes = [
        helper.make_node("Conv", ["target", "k", "b"], ["face"]),
        helper.make_node("ReduceMean", ["source"], ["level"], keepdims=1),
        helper.make_node("Mul", ["level", "tenth"], ["speech"]),
    ]
    inits = [_const("k", rows.reshape(3, channels, 1, 1)), _const("b", [0.02] * 3), _const("tenth", [0.1])]
    inputs = [source, target]
    if family == "edtalk" and weight:
        inputs.append(helper.make_tensor_value_info("weight", TensorProto.FLOAT, [1]))
        nodes += [
            helper.make_node("Mul", ["speech", "weight"], ["said"]),
            helper.make_node("Add", ["face", "said"], ["output"]),
        ]
    else:
        nodes.append(helper.make_node("Add", ["face", "speech"], ["output"]))
    return OrtModel(_model(nodes, inputs, [out], inits))


def voice_extractor_model(*, scale: float = 1.0, columns: int | str = 256) -> OrtModel:
    """A voice extractor stand-in: ``input [N, 4, 3072, 256]`` -> the same times ``scale`` (1: every sound is voice)."""
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 4, 3072, columns])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 4, 3072, columns])
    node = helper.make_node("Mul", ["input", "s"], ["output"])
    return OrtModel(_model([node], [x], [y], [_const("s", [scale])]))


def age_modifier_model(family: str) -> OrtModel:
    """An age modifier stand-in with FaceFusion's names and shapes: fran ``target [1, 3, 1024, 1024]``,
    ``direction [2]`` -> ``[1, 3, 1024, 1024]``: 0.9 x the target + the mean direction / 5 + 0.02;
    styleganex ``target [1, 3, 256, 256]``, ``target_with_background [1, 3, 384, 384]``, ``direction []`` ->
    ``[1, 3, 768, 768]``: the surroundings doubled (nearest), times 0.9, + the direction / 10 + the target's mean."""
    direction = helper.make_tensor_value_info("direction", TensorProto.FLOAT, [2] if family == "fran" else [])
    if family == "fran":
        target = helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 3, 1024, 1024])
        out = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, 1024, 1024])
        nodes = [
            helper.make_node("Mul", ["target", "k"], ["face"]),
            helper.make_node("ReduceMean", ["direction"], ["mean"], keepdims=1),
            helper.make_node("Mul", ["mean", "fifth"], ["older"]),
            helper.make_node("Add", ["face", "older"], ["shifted"]),
            helper.make_node("Add", ["shifted", "b"], ["output"]),
        ]
        inits = [_const("k", [0.9]), _const("fifth", [0.2]), _const("b", [0.02])]
        return OrtModel(_model(nodes, [target, direction], [out], inits))
    target = helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 3, 256, 256])
    wide = helper.make_tensor_value_info("target_with_background", TensorProto.FLOAT, [1, 3, 384, 384])
    out = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, 768, 768])
    nodes = [
        helper.make_node("Resize", ["target_with_background", "", "scales"], ["grown"], mode="nearest"),
        helper.make_node("Mul", ["grown", "k"], ["kept"]),
        helper.make_node("Mul", ["direction", "tenth"], ["older"]),
        helper.make_node("Add", ["kept", "older"], ["shifted"]),
        helper.make_node("ReduceMean", ["target"], ["level"], keepdims=1),
        helper.make_node("Add", ["shifted", "level"], ["output"]),
    ]
    inits = [_const("scales", [1.0, 1.0, 2.0, 2.0]), _const("k", [0.9]), _const("tenth", [0.1])]
    return OrtModel(_model(nodes, [target, wide, direction], [out], inits))


def face_classifier_model() -> OrtModel:
    """A FairFace stand-in: ``input [1, 3, 224, 224]`` -> race ``[1]`` (0), gender ``[1]`` (1) and age ``[1]``
    int64: the age class ``floor(2 x the mean input + 4)`` within 0-8 (a brighter face: older)."""
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 224, 224])
    outs = [helper.make_tensor_value_info(n, TensorProto.INT64, [1]) for n in ("race_id", "gender_id", "age_id")]
    nodes = [
        helper.make_node("ReduceMean", ["input"], ["mean"], keepdims=0),
        helper.make_node("Mul", ["mean", "two"], ["double"]),
        helper.make_node("Add", ["double", "four"], ["shifted"]),
        helper.make_node("Floor", ["shifted"], ["whole"]),
        helper.make_node("Clip", ["whole", "low", "high"], ["clipped"]),
        helper.make_node("Cast", ["clipped"], ["age"], to=TensorProto.INT64),
        helper.make_node("Reshape", ["age", "one"], ["age_id"]),
        helper.make_node("Identity", ["race"], ["race_id"]),
        helper.make_node("Identity", ["gender"], ["gender_id"]),
    ]
    inits = [
        _const("two", 2.0),
        _const("four", 4.0),
        _const("low", 0.0),
        _const("high", 8.0),
        _const("one", [1], np.int64),
        _const("race", [0], np.int64),
        _const("gender", [1], np.int64),
    ]
    return OrtModel(_model(nodes, [x], outs, inits))


def live_portrait_models() -> dict[str, OrtModel]:
    """LivePortrait stand-ins with FaceFusion's names and shapes, by part: the feature extractor
    ``input [1, 3, 256, 256]`` -> ``[1, 32, 16, 64, 64]`` (pooled, a 1x1 convolution); the motion extractor
    ``input`` -> pitch, yaw, roll (scalars, from the picture's mean), scale ``[1, 1]``, translation ``[1, 3]``,
    expression ``[1, 21, 3]`` (a linear map of the picture's mean colour less mid-grey) and key points
    ``[1, 21, 3]``; the generator ``feature_volume``, ``source``, ``target`` -> ``[1, 3, 512, 512]``: the
    volume's mean over depth through a 1x1 convolution, grown 8x, plus 5 x a linear map of source - target
    (one shift per colour), through a sigmoid."""
    rng = np.random.default_rng(7)
    image = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 256, 256])
    volume = helper.make_tensor_value_info("feature_volume", TensorProto.FLOAT, [1, 32, 16, 64, 64])
    features = _model(
        [
            helper.make_node("AveragePool", ["input"], ["pooled"], kernel_shape=[4, 4], strides=[4, 4]),
            helper.make_node("Conv", ["pooled", "k"], ["wide"]),
            helper.make_node("Reshape", ["wide", "shape"], ["feature_volume"]),
        ],
        [image],
        [volume],
        [_const("k", rng.normal(0, 0.3, (512, 3, 1, 1))), _const("shape", [1, 32, 16, 64, 64], np.int64)],
    )
    scalar = [helper.make_tensor_value_info(n, TensorProto.FLOAT, []) for n in ("pitch", "yaw", "roll")]
    motion_outputs = [
        *scalar,
        helper.make_tensor_value_info("scale", TensorProto.FLOAT, [1, 1]),
        helper.make_tensor_value_info("translation", TensorProto.FLOAT, [1, 3]),
        helper.make_tensor_value_info("expression", TensorProto.FLOAT, [1, 21, 3]),
        helper.make_tensor_value_info("motion_points", TensorProto.FLOAT, [1, 21, 3]),
    ]
    motion = _model(
        [
            helper.make_node("ReduceMean", ["input"], ["mean"], keepdims=0),
            helper.make_node("Mul", ["mean", "twenty"], ["p20"]),
            helper.make_node("Sub", ["p20", "ten"], ["pitch"]),
            helper.make_node("Mul", ["mean", "ten"], ["yaw"]),
            helper.make_node("Mul", ["mean", "four"], ["roll"]),
            helper.make_node("Identity", ["scale_value"], ["scale"]),
            helper.make_node("Identity", ["translation_value"], ["translation"]),
            helper.make_node("GlobalAveragePool", ["input"], ["colour"]),
            helper.make_node("Flatten", ["colour"], ["flat"]),
            helper.make_node("Sub", ["flat", "grey"], ["centred"]),
            helper.make_node("MatMul", ["centred", "w"], ["offsets"]),
            helper.make_node("Reshape", ["offsets", "points_shape"], ["expression"]),
            helper.make_node("Identity", ["points"], ["motion_points"]),
        ],
        [image],
        motion_outputs,
        [
            _const("twenty", 20.0),
            _const("ten", 10.0),
            _const("four", 4.0),
            _const("scale_value", [[1.5]]),
            _const("translation_value", [[0.01, -0.02, 0.0]]),
            _const("grey", [[0.45, 0.45, 0.45]]),
            _const("w", rng.normal(0, 0.5, (3, 63))),
            _const("points_shape", [1, 21, 3], np.int64),
            _const("points", rng.normal(0, 0.3, (1, 21, 3))),
        ],
    )
    source = helper.make_tensor_value_info("source", TensorProto.FLOAT, [1, 21, 3])
    target = helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 21, 3])
    out = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, 512, 512])
    generator = _model(
        [
            helper.make_node("ReduceMean", ["feature_volume"], ["flat"], axes=[2], keepdims=0),
            helper.make_node("Conv", ["flat", "k"], ["small"]),
            helper.make_node("Resize", ["small", "", "scales"], ["grown"], mode="nearest"),
            helper.make_node("Sub", ["source", "target"], ["moved"]),
            helper.make_node("Reshape", ["moved", "row"], ["flat_moved"]),
            helper.make_node("MatMul", ["flat_moved", "mix"], ["shift"]),
            helper.make_node("Mul", ["shift", "gain"], ["scaled"]),
            helper.make_node("Reshape", ["scaled", "colour_shape"], ["push"]),
            helper.make_node("Add", ["grown", "push"], ["raw"]),
            helper.make_node("Sigmoid", ["raw"], ["output"]),
        ],
        [volume, source, target],
        [out],
        [
            _const("k", rng.normal(0, 0.2, (3, 32, 1, 1))),
            _const("scales", [1.0, 1.0, 8.0, 8.0]),
            _const("gain", 5.0),
            _const("row", [1, 63], np.int64),
            _const("mix", rng.normal(0, 1.0, (63, 3))),
            _const("colour_shape", [1, 3, 1, 1], np.int64),
        ],
    )
    return {
        "feature_extractor": OrtModel(features),
        "motion_extractor": OrtModel(motion),
        "generator": OrtModel(generator),
    }


def live_portrait_editor_models() -> dict[str, OrtModel]:
    """:func:`live_portrait_models` and the face editor's other three stand-ins: the eye retargeter
    ``input [1, 66]`` and the lip retargeter ``input [1, 65]`` -> ``[1, 63]`` (a linear map: the opening
    ratios weigh), and the stitcher ``source``, ``target`` ``[1, 21, 3]`` -> ``[1, 21, 3]``: 0.8 source +
    0.2 target."""
    rng = np.random.default_rng(11)
    models = live_portrait_models()
    for part, width in (("eye_retargeter", 66), ("lip_retargeter", 65)):
        x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, width])
        y = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 63])
        weights = rng.normal(0, 0.01, (width, 63))
        weights[63:] = rng.normal(0, 0.2, (width - 63, 63))  # the ratios and the wanted opening show
        node = helper.make_node("MatMul", ["input", "w"], ["output"])
        models[part] = OrtModel(_model([node], [x], [y], [_const("w", weights)]))
    source = helper.make_tensor_value_info("source", TensorProto.FLOAT, [1, 21, 3])
    target = helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 21, 3])
    out = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 21, 3])
    nodes = [
        helper.make_node("Mul", ["source", "most"], ["a"]),
        helper.make_node("Mul", ["target", "rest"], ["b"]),
        helper.make_node("Add", ["a", "b"], ["output"]),
    ]
    models["stitcher"] = OrtModel(_model(nodes, [source, target], [out], [_const("most", 0.8), _const("rest", 0.2)]))
    return models


def deep_swapper_model(side: int = 224, *, morph: bool = True) -> OrtModel:
    """A DFM stand-in with DeepFaceLive's names and shapes: ``in_face:0`` ``[1, S, S, 3]`` (and ``morph_value:0``
    ``[1]``) -> the target's mask ``[1, S, S, 1]`` (twice the picture's grey, clipped later), the face
    ``[1, S, S, 3]`` (0.8 x the picture, its channels turned round, + 0.1 x the morph) and the source's mask
    (a sigmoid of the grey)."""
    x = helper.make_tensor_value_info("in_face:0", TensorProto.FLOAT, [1, side, side, 3])
    inputs = [x]
    outs = [
        helper.make_tensor_value_info("out_celeb_face_mask:0", TensorProto.FLOAT, [1, side, side, 1]),
        helper.make_tensor_value_info("out_celeb_face:0", TensorProto.FLOAT, [1, side, side, 3]),
        helper.make_tensor_value_info("out_face_mask:0", TensorProto.FLOAT, [1, side, side, 1]),
    ]
    nodes = [
        helper.make_node("ReduceMean", ["in_face:0"], ["grey"], axes=[3], keepdims=1),
        helper.make_node("Mul", ["grey", "two"], ["out_celeb_face_mask:0"]),
        helper.make_node("Sub", ["grey", "mid"], ["centred"]),
        helper.make_node("Mul", ["centred", "ten"], ["raw"]),
        helper.make_node("Sigmoid", ["raw"], ["out_face_mask:0"]),
    ]
    inits = [
        _const("two", 2.0),
        _const("mid", 0.3),
        _const("ten", 10.0),
    ]
    # the face: each output channel 0.8 x the input channel two places on, as a 1x1 map over the last axis
    nodes.append(helper.make_node("MatMul", ["in_face:0", "rotate"], ["face"]))
    inits.append(_const("rotate", 0.8 * np.roll(np.eye(3), 1, axis=1)))
    if morph:
        inputs.append(helper.make_tensor_value_info("morph_value:0", TensorProto.FLOAT, [1]))
        nodes += [
            helper.make_node("Mul", ["morph_value:0", "tenth"], ["push"]),
            helper.make_node("Add", ["face", "push"], ["out_celeb_face:0"]),
        ]
        inits.append(_const("tenth", 0.1))
    else:
        nodes.append(helper.make_node("Identity", ["face"], ["out_celeb_face:0"]))
    return OrtModel(_model(nodes, inputs, outs, inits))


def stand_in_folder(folder, files, models: dict[str, OrtModel]):
    """``folder`` (a models folder) with each of ``models`` (catalog name -> stand-in) saved under ``files``
    and imported by name, as users import model files; returns ``folder``."""
    from faceweave.models import ModelStore, import_model

    for name, model in models.items():
        onnx.save(model.proto, files / f"{name}.onnx")
        import_model(ModelStore(folder), name, files / f"{name}.onnx")
    return folder


def analysed_astronaut() -> tuple[np.ndarray, list]:
    """The public-domain astronaut photo and the faces faceweave's analyser
    finds on it (the processors' tests run on them)."""
    from skimage import data

    from faceweave.analysis import FaceAnalyser

    pixels = np.ascontiguousarray(data.astronaut())
    return pixels, FaceAnalyser().analyse(pixels)
