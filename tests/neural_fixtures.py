"""Tiny ONNX stand-ins for the neural swappers and ArcFace, with the real
models' input/output names, ranks and initializer layout, and outputs that
are easy to compute by hand; plus a small adapter that makes an
``onnxruntime.InferenceSession`` look like the ``InferenceModel`` the
swappers take, recording every call."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13


def _dim(batch):
    return batch if isinstance(batch, str) else int(batch)


def _value(name: str, shape: list) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _model(nodes, inputs, outputs, initializers) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "tiny", inputs, outputs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def swapper_model(
    size: int,
    source_shape: list[int],
    *,
    batch: int | str = "N",
    gain: float = 1.0,
    offset: float = 0.0,
    source_gain: float = 0.0,
    emap: np.ndarray | None = None,
    mask_output: bool = False,
    source_first: bool = False,
) -> onnx.ModelProto:
    """A swapper with inputs ``target`` ``[batch, 3, size, size]`` and
    ``source`` ``[batch, *source_shape]``, and output ``output`` (same shape
    as ``target``) ``= target * gain + offset + source_gain * mean(source row)``.
    ``emap``: an unused ``(512, 512)`` initializer placed last (as in
    inswapper_128); ``mask_output``: a second output ``mask`` ``[batch, 1,
    size, size]`` (as hyperswap)."""
    b = _dim(batch)
    target = _value("target", [b, 3, size, size])
    source = _value("source", [b, *source_shape])
    inits = [
        numpy_helper.from_array(np.array(gain, np.float32), "gain"),
        numpy_helper.from_array(np.array(offset, np.float32), "offset"),
        numpy_helper.from_array(np.array(source_gain, np.float32), "source_gain"),
        numpy_helper.from_array(np.array([-1, 1, 1, 1], np.int64), "row_shape"),
    ]
    axes = list(range(1, 1 + len(source_shape)))
    nodes = [
        helper.make_node("Mul", ["target", "gain"], ["scaled"]),
        helper.make_node("Add", ["scaled", "offset"], ["shifted"]),
        helper.make_node("ReduceMean", ["source"], ["source_mean"], axes=axes, keepdims=0),
        helper.make_node("Reshape", ["source_mean", "row_shape"], ["source_rows"]),
        helper.make_node("Mul", ["source_rows", "source_gain"], ["source_term"]),
        helper.make_node("Add", ["shifted", "source_term"], ["output"]),
    ]
    outputs = [_value("output", [b, 3, size, size])]
    if mask_output:
        nodes.append(helper.make_node("ReduceMean", ["target"], ["mask"], axes=[1], keepdims=1))
        outputs.append(_value("mask", [b, 1, size, size]))
    if emap is not None:
        inits.append(numpy_helper.from_array(np.asarray(emap, np.float32), "emap"))
    inputs = [source, target] if source_first else [target, source]
    return _model(nodes, inputs, outputs, inits)


def arcface_model(weights: np.ndarray, *, batch: int | str = "None", input_name: str = "input.1") -> onnx.ModelProto:
    """An ArcFace stand-in: input ``[batch, 3, 112, 112]``, output ``(batch,
    512)`` ``= channel means (batch, 3) @ weights (3, 512)``."""
    b = _dim(batch)
    inits = [numpy_helper.from_array(np.asarray(weights, np.float32), "w")]
    nodes = [
        helper.make_node("GlobalAveragePool", [input_name], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "w"], ["683"]),
    ]
    return _model(nodes, [_value(input_name, [b, 3, 112, 112])], [_value("683", [b, 512])], inits)


def converter_model(*, scale: float = 2.0, shift: float = 1.0) -> onnx.ModelProto:
    """A ``crossface_*`` stand-in: ``input`` ``[N, 512]`` -> ``output`` ``= input * scale + shift``."""
    inits = [
        numpy_helper.from_array(np.array(scale, np.float32), "scale"),
        numpy_helper.from_array(np.array(shift, np.float32), "shift"),
    ]
    nodes = [helper.make_node("Mul", ["input", "scale"], ["m"]), helper.make_node("Add", ["m", "shift"], ["output"])]
    return _model(nodes, [_value("input", ["N", 512])], [_value("output", ["N", 512])], inits)


@dataclass(frozen=True)
class Info:
    name: str
    shape: tuple


class OrtModel:
    """An ``onnxruntime`` session behind the swappers' ``InferenceModel``
    protocol; ``calls`` records the feeds of every run."""

    def __init__(self, model: onnx.ModelProto) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        opts.intra_op_num_threads = 1
        self.session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        self.inputs = [Info(i.name, tuple(i.shape)) for i in self.session.get_inputs()]
        self.outputs = [Info(o.name, tuple(o.shape)) for o in self.session.get_outputs()]
        self.calls: list[dict[str, np.ndarray]] = []

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.calls.append({k: np.array(v) for k, v in feeds.items()})
        names = [o.name for o in self.outputs]
        return dict(zip(names, self.session.run(names, feeds), strict=False))


def catalog_stand_in(spec) -> onnx.ModelProto:
    """A stand-in for any catalogued model (a ``ModelSpec``): exactly its
    input/output names, shapes and dtypes (see ``onnx_fixtures.model_for_spec``),
    plus, for inswapper, the ``(512, 512)`` ``emap`` initializer placed last.
    A frame enhancer's stand-in upscales (nearest) by its registered scale,
    since its output size follows its input; a detector's or landmarker's
    gives constant heads with one face (``tests/analysis_fixtures.py``)."""
    from tests.onnx_fixtures import model_for_spec

    if spec.kind == "frame_enhancer":
        return upscaler_model(spec)
    if spec.kind in ("face_detector", "face_landmarker"):
        from tests.analysis_fixtures import detector_stand_in, landmarker_stand_in

        return detector_stand_in(spec.name) if spec.kind == "face_detector" else landmarker_stand_in(spec.name)
    extra = {"emap": np.eye(512, dtype=np.float32)} if spec.name.startswith("inswapper") else None
    return model_for_spec(spec, initializers=extra)


def textured(side: int, seed: int) -> np.ndarray:
    """A smooth, colourful ``(side, side, 3)`` uint8 picture (channels differ)."""
    yy, xx = np.mgrid[0:side, 0:side].astype(np.float32) / side
    rng = np.random.default_rng(seed)
    chans = []
    for c in range(3):
        fx, fy, ph = rng.uniform(1.0, 3.0, 3)
        chans.append(0.5 + 0.35 * np.sin(2 * np.pi * (fx * xx + fy * yy) + ph * 3) + 0.1 * (c - 1) * xx)
    return np.clip(np.stack(chans, -1) * 255, 0, 255).astype(np.uint8)


def face_crop(side: int = 200, *, seed: int = 1, degrees: float = 8.0):
    """An ``AlignedCrop`` whose mesh puts the five alignment points on a
    rotated ``arcface_128`` face (the other mesh points at the centre)."""
    from faceweave.geometry.templates import template_points
    from faceweave.swappers import AlignedCrop

    ref = template_points("arcface_128", 1) - 0.5
    a = np.radians(degrees)
    rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    five = (ref @ rot.T) * side * 0.55 + side / 2.0
    mesh = np.zeros((478, 3), np.float32)
    mesh[:, :2] = side / 2.0
    for i, p in zip([468, 473, 1, 61, 291], five, strict=False):
        mesh[i, :2] = p
    return AlignedCrop(pixels=textured(side, seed), matrix=np.eye(2, 3), mesh=mesh, face_size=side / 1.8)


def source_face(seed: int = 5):
    """A ``SourceFace`` on a :func:`face_crop`."""
    from faceweave.swappers import SourceFace
    from faceweave.types import BBox, Face, Pose

    crop = face_crop(220, seed=seed, degrees=-5.0)
    face = Face(bbox=BBox(0, 0, 220, 220), score=1.0, mesh=crop.mesh, pose=Pose(0.0, 0.0, 0.0))
    return SourceFace(index=0, path=None, face=face, crop=crop)


class FolderServer:
    """A flat folder served over HTTP on the loopback (``url``/FILE), as a
    models mirror; ``requests`` lists the paths asked for.  Use as a context."""

    def __init__(self, folder) -> None:
        import functools
        import threading
        from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

        requests: list[str] = []
        self.requests = requests

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, *args):  # keep the test output clean
                pass

            def do_GET(self):
                requests.append(self.path)
                super().do_GET()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FolderServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def upscaler_model(spec) -> onnx.ModelProto:
    """A frame enhancer's stand-in: ``[N, 3, H, W]`` float32 -> nearest
    upscale by the enhancer's scale, with the spec's tensor names."""
    from faceweave.enhancers.base import FRAME_ENHANCERS

    scale = float(FRAME_ENHANCERS[spec.name].scale)
    source, output = spec.inputs[0].name or "input", spec.outputs[0].name or "output"
    inits = [numpy_helper.from_array(np.array([1, 1, scale, scale], np.float32), "scales")]
    node = helper.make_node(
        "Resize", [source, "", "scales"], [output], mode="nearest", coordinate_transformation_mode="asymmetric"
    )
    inputs = [_value(source, ["N", 3, "height", "width"])]
    return _model([node], inputs, [_value(output, ["N", 3, "out_height", "out_width"])], inits)


def facefusion_folder(folder, specs):
    """Stand-ins (:func:`catalog_stand_in`) for ``specs`` laid out as FaceFusion
    keeps them: ``NAME.onnx`` and its CRC32 in ``NAME.hash`` (8 hex digits)."""
    import zlib
    from pathlib import Path

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for spec in specs:
        data = catalog_stand_in(spec).SerializeToString()
        (folder / spec.file_name).write_bytes(data)
        (folder / spec.file_name).with_suffix(".hash").write_text(format(zlib.crc32(data), "08x"))
    return folder
