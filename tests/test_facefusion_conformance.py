"""faceweave's ``facefusion`` modes against FaceFusion's formulation.

FaceFusion is not a dependency, so the steps of FaceFusion 3.8.1 that the
modes must reproduce are written out here from its source
(``face_helper.estimate_matrix_by_face_landmark_5`` /
``warp_face_by_face_landmark_5`` / ``calculate_paste_area`` /
``paste_back``, ``face_masker.create_box_mask``, the face swapper's
pre- and post-processing), and faceweave's pipeline is run beside them on
real photos with stand-in models (``tests/neural_fixtures.py``).  The
side-by-side run against FaceFusion's own functions is a scratch script
outside the repository; its figures are in docs/MODELS.md.
"""

from __future__ import annotations

import cv2
import numpy as np
import onnx
import pytest
from tests.neural_fixtures import OrtModel, arcface_model, swapper_model

from faceweave.compositing.facefusion import paste_face
from faceweave.geometry.templates import template_points
from faceweave.options import SwapOptions
from faceweave.pipeline import FaceSwapper
from faceweave.provenance.stamp import Provenance

UNMARKED = Provenance.new(watermark=False)
ARC_W = np.random.default_rng(4).normal(0, 1, (3, 512)).astype(np.float32)
#: the stand-in swapper's output: its target crop times GAIN plus OFFSET
GAIN, OFFSET = 0.8, 0.1
SOURCE = "single/biden2.jpg"


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 10.0 * np.log10(255.0**2 / max(mse, 1e-12))


# --- FaceFusion 3.8.1's formulation, written out --------------------------------


def ff_matrix(points: np.ndarray, template: str, size: int) -> np.ndarray:
    """``estimate_matrix_by_face_landmark_5``: RANSAC, a 100 px threshold."""
    dst = template_points(template, size)
    return cv2.estimateAffinePartial2D(
        np.asarray(points, np.float64), dst, method=cv2.RANSAC, ransacReprojThreshold=100
    )[0]


def ff_box_mask(size: int, blur: float) -> np.ndarray:
    """``create_box_mask`` without padding."""
    amount = int(size * 0.5 * blur)
    area = max(amount // 2, 1)
    mask = np.ones((size, size), np.float32)
    mask[:area, :] = 0
    mask[-area:, :] = 0
    mask[:, :area] = 0
    mask[:, -area:] = 0
    return cv2.GaussianBlur(mask, (0, 0), amount * 0.25) if amount > 0 else mask


def ff_paste_back(
    frame: np.ndarray, crop: np.ndarray, mask: np.ndarray, matrix: np.ndarray, *, rounded: bool = False
) -> np.ndarray:
    """``calculate_paste_area`` + ``paste_back``: the blend is cut to uint8 by
    ``astype`` (truncation); ``rounded``: rounded instead (not FaceFusion's)."""
    h, w = frame.shape[:2]
    side = crop.shape[0]
    inv = cv2.invertAffineTransform(matrix)
    corners = np.array([[0, 0], [side, 0], [side, side], [0, side]]) @ inv[:, :2].T + inv[:, 2]
    x1, y1 = np.clip(np.floor(corners.min(axis=0)).astype(int), 0, [w, h])
    x2, y2 = np.clip(np.ceil(corners.max(axis=0)).astype(int), 0, [w, h])
    paste = inv.copy()
    paste[0, 2] -= x1
    paste[1, 2] -= y1
    size = (x2 - x1, y2 - y1)
    back_mask = cv2.warpAffine(mask, paste, size).clip(0, 1)[..., None]
    back = cv2.warpAffine(crop, paste, size, borderMode=cv2.BORDER_REPLICATE)
    out = frame.copy()
    region = out[y1:y2, x1:x2]
    mixed = region * (1 - back_mask) + back * back_mask
    out[y1:y2, x1:x2] = (np.rint(mixed) if rounded else mixed).astype(out.dtype)
    return out


def ff_swap_face(frame: np.ndarray, points: np.ndarray, model: OrtModel, latent: np.ndarray) -> np.ndarray:
    """``face_swapper.core.swap_face`` for inswapper_128 (box mask only, no
    pixel boost); the stand-in treats the channels alike, so the frame's
    channel order does not matter."""
    matrix = ff_matrix(points, "arcface_128", 128)
    crop = cv2.warpAffine(frame, matrix, (128, 128), borderMode=cv2.BORDER_REPLICATE, flags=cv2.INTER_AREA)
    mask = ff_box_mask(128, 0.3)
    x = np.expand_dims((crop[:, :, ::-1] / 255.0).transpose(2, 0, 1), 0).astype(np.float32)
    y = model.run({"target": x, "source": latent})["output"][0]
    face = y.transpose(1, 2, 0).clip(0, 1)[:, :, ::-1] * 255
    return ff_paste_back(frame, np.ascontiguousarray(face), mask.clip(0, 1), matrix)


# --- the paste ------------------------------------------------------------------


def test_facefusion_paste_truncates_as_facefusion_does():
    """:func:`paste_face` is FaceFusion's paste-back to the level: a float
    face turned and shrunk into a frame, truncated, not rounded (rounding
    alone puts the two about 51 dB apart)."""
    rng = np.random.default_rng(1)
    frame = rng.integers(0, 256, (300, 280, 3), dtype=np.uint8)
    face = rng.uniform(0, 255, (128, 128, 3)).astype(np.float32)
    mask = ff_box_mask(128, 0.3)
    angle, scale = np.deg2rad(12.0), 0.6
    matrix = np.array(
        [[scale * np.cos(angle), -scale * np.sin(angle), -40.0], [scale * np.sin(angle), scale * np.cos(angle), -30.0]]
    )
    out = frame.copy()
    paste_face(frame, face, mask, matrix, out=out)
    expected = ff_paste_back(frame, face, mask, matrix)
    assert psnr(out, expected) >= 60.0
    assert np.abs(out.astype(int) - expected.astype(int)).max() <= 1
    box = np.s_[30:250, 30:230]  # within the paste, where rounding and truncation differ
    assert psnr(out[box], ff_paste_back(frame, face, mask, matrix, rounded=True)[box]) < 55.0


# --- the whole swap -------------------------------------------------------------


@pytest.fixture(scope="module")
def swapper_file(tmp_path_factory):
    return swapper_model(128, [512], gain=GAIN, offset=OFFSET, emap=np.eye(512, dtype=np.float32))


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory, swapper_file):
    from faceweave.models import ModelStore, import_model

    folder = tmp_path_factory.mktemp("models")
    files = tmp_path_factory.mktemp("files")
    onnx.save(swapper_file, files / "inswapper.onnx")
    onnx.save(arcface_model(ARC_W, input_name="input"), files / "arcface.onnx")
    store = ModelStore(folder)
    import_model(store, "inswapper_128", files / "inswapper.onnx")
    import_model(store, "arcface_w600k_r50", files / "arcface.onnx")
    return folder


@pytest.mark.slow
@pytest.mark.parametrize(
    "target",
    [
        "single/astronaut_eileen_collins.png",  # a face of about 107 px
        "single/paul_rudd.jpg",  # a face of about 1000 px
    ],
)
def test_facefusion_compositing_is_facefusions_swap(models_dir, swapper_file, faces_dir, target):
    """``--compositing facefusion`` on a real photo against FaceFusion's
    swap written out, on the same five points: at least 60 dB over the part
    of the frame the paste can touch."""
    opts = SwapOptions.model_validate(
        {"swapper": "inswapper_128", "compositing": "facefusion", "runtime": {"models_dir": str(models_dir)}}
    )
    with FaceSwapper(opts, provenance=UNMARKED) as swapper:
        result = swapper.swap([faces_dir / SOURCE], faces_dir / target)
        frame = swapper.read(faces_dir / target, role="target").pixels
    points = result.faces[result.swapped[0].target_index].kps5
    expected = ff_swap_face(frame, points, OrtModel(swapper_file), np.zeros((1, 512), np.float32))
    changed = np.argwhere(np.any(expected != frame, axis=-1) | np.any(result.image != frame, axis=-1))
    (y1, x1), (y2, x2) = changed.min(axis=0), changed.max(axis=0) + 1
    assert psnr(result.image[y1:y2, x1:x2], frame[y1:y2, x1:x2]) < 40.0  # the stand-in changes the face
    assert psnr(result.image[y1:y2, x1:x2], expected[y1:y2, x1:x2]) >= 60.0


# --- the face enhancer ----------------------------------------------------------


def enhancer_stand_in(size: int = 512) -> onnx.ModelProto:
    """GFPGAN's signature, ``output = input * GAIN + OFFSET`` (it keeps the
    face it is given, so the crop's cut shows)."""
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, size, size])
    inits = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("g", GAIN), ("o", OFFSET))]
    nodes = [helper.make_node("Mul", ["input", "g"], ["m"]), helper.make_node("Add", ["m", "o"], ["output"])]
    model = helper.make_model(
        helper.make_graph(nodes, "enhancer", [x], [y], initializer=inits), opset_imports=[helper.make_opsetid("", 13)]
    )
    model.ir_version = 8
    return model


def ff_enhance_face(frame: np.ndarray, points: np.ndarray, model: OrtModel, blend: float) -> np.ndarray:
    """``face_enhancer.core.enhance_face`` for gfpgan_1.4 (box mask only): one
    warp, the model, rounded to uint8, pasted and truncated, then the whole
    frame mixed with the pasted one by ``blend`` (``blend_frame``)."""
    matrix = ff_matrix(points, "ffhq_512", 512)
    crop = cv2.warpAffine(frame, matrix, (512, 512), borderMode=cv2.BORDER_REPLICATE, flags=cv2.INTER_AREA)
    mask = ff_box_mask(512, 0.3)
    x = np.expand_dims(((crop[:, :, ::-1] / 255.0 - 0.5) / 0.5).transpose(2, 0, 1), 0).astype(np.float32)
    y = np.clip(model.run({"input": x})["output"][0], -1, 1)
    face = np.ascontiguousarray((((y + 1) / 2).transpose(1, 2, 0) * 255.0).round().astype(np.uint8)[:, :, ::-1])
    pasted = ff_paste_back(frame, face, mask.clip(0, 1), matrix)
    return cv2.addWeighted(frame, 1 - blend, pasted, blend, 0)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["single/astronaut_eileen_collins.png", "single/paul_rudd.jpg"])
def test_a_face_enhancer_in_facefusion_mode_is_facefusions(faces_dir, target):
    """The face enhancer in ``facefusion`` mode against FaceFusion's
    enhance_face written out: at least 50 dB where either changes the frame,
    on a 107-px and a 1331-px face (faceweave's own route halves a large face
    with ``pyrDown`` before the shrink, which FaceFusion does not)."""
    from faceweave.analysis import FaceAnalyser
    from faceweave.enhancers import create_face_enhancer
    from faceweave.io.images import read_image

    frame = read_image(faces_dir / target).pixels
    with FaceAnalyser() as analyser:
        face = max(analyser.analyse(frame), key=lambda f: f.bbox.x2 - f.bbox.x1)
    model = OrtModel(enhancer_stand_in())
    ours = create_face_enhancer("gfpgan_1.4", model, facefusion=True).enhance(frame, [face.kps5], blend=0.8)
    expected = ff_enhance_face(frame, face.kps5, model, 0.8)
    changed = np.argwhere(np.any(expected != frame, axis=-1) | np.any(ours != frame, axis=-1))
    (y1, x1), (y2, x2) = changed.min(axis=0), changed.max(axis=0) + 1
    assert psnr(ours[y1:y2, x1:x2], frame[y1:y2, x1:x2]) < 40.0  # the stand-in changes the face
    assert psnr(ours[y1:y2, x1:x2], expected[y1:y2, x1:x2]) >= 50.0
