"""NudeNet's ONNX detector (the 320n YOLOv8 model shipped in the ``nudenet`` wheel).

The ``nudenet`` package itself is never imported (it imports an OpenCV
package faceweave does not install); its model file is found through the
import system and run with ONNX Runtime, with the same pre- and
post-processing as ``nudenet.NudeDetector.detect`` (nudenet 3.4): pad the
image to a square at the bottom and right, resize to 320, BGR / 255; the
output ``output0`` ``(1, 22, N)`` holds ``cx, cy, w, h`` and 18 class scores
per candidate; candidates under 0.2 are dropped and the rest pass
non-maximum suppression (score 0.25, IoU 0.45).

The model is licensed by its authors, not by faceweave: NudeNet's repository
is AGPL-3.0, so screening is an optional extra, off by default.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import cv2
import numpy as np

from faceweave.errors import InputError, ModelError, ModelFormatError, ModelNotFoundError, ModelSignatureError

#: nudenet 3.4's class names, in the model's output order
LABELS = (
    "FEMALE_GENITALIA_COVERED",
    "FACE_FEMALE",
    "BUTTOCKS_EXPOSED",
    "FEMALE_BREAST_EXPOSED",
    "FEMALE_GENITALIA_EXPOSED",
    "MALE_BREAST_EXPOSED",
    "ANUS_EXPOSED",
    "FEET_EXPOSED",
    "BELLY_COVERED",
    "FEET_COVERED",
    "ARMPITS_COVERED",
    "ARMPITS_EXPOSED",
    "FACE_MALE",
    "BELLY_EXPOSED",
    "MALE_GENITALIA_EXPOSED",
    "ANUS_COVERED",
    "FEMALE_BREAST_COVERED",
    "BUTTOCKS_COVERED",
)
MODEL_FILE = "320n.onnx"
INPUT_SIZE = 320
#: candidates below this class score are dropped before NMS (as nudenet does)
CANDIDATE_SCORE = 0.2
NMS_SCORE = 0.25
NMS_IOU = 0.45


@dataclass(frozen=True)
class ContentDetection:
    """One detected region: a NudeNet label, its score in ``[0, 1]`` and its
    box ``(x, y, w, h)`` in pixels of the screened image (clipped to it)."""

    label: str
    score: float
    box: tuple[int, int, int, int]


def find_model() -> Path:
    """The ``320n.onnx`` inside the installed ``nudenet`` package (not imported).

    Raises:
        ModelNotFoundError: ``nudenet`` is not installed, or its model file is missing.
    """
    spec = importlib.util.find_spec("nudenet")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        candidate = Path(folder) / MODEL_FILE
        if candidate.is_file():
            return candidate
    if not folders:
        raise ModelNotFoundError("content screening needs the 'nudenet' package: pip install 'faceweave[screening]'")
    raise ModelNotFoundError(f"the nudenet package has no {MODEL_FILE} in {', '.join(folders)}")


def letterbox(pixels: np.ndarray, size: int = INPUT_SIZE) -> tuple[np.ndarray, float]:
    """``(H, W, 3)`` uint8 RGB -> ``(1, 3, size, size)`` float32 BGR in ``[0, 1]`` and
    the scale from model pixels back to image pixels (``max(H, W) / size``).

    The image is padded with black at the bottom or right to a square, then resized.
    """
    px = np.asarray(pixels)
    if px.dtype != np.uint8 or px.ndim != 3 or px.shape[2] != 3 or min(px.shape[:2]) < 1:
        raise InputError(f"screening needs uint8 (H, W, 3) RGB pixels; got {px.dtype} {px.shape}")
    height, width = px.shape[:2]
    side = max(height, width)
    square = np.zeros((side, side, 3), np.uint8)
    square[:height, :width] = px
    resized = cv2.resize(square, (size, size), interpolation=cv2.INTER_LINEAR)
    # nudenet's reader turns cv2's BGR into RGB (COLOR_RGBA2BGR on 3 channels swaps
    # R and B) and blobFromImage(swapRB=True) swaps them back: the model gets BGR
    blob = resized[..., ::-1].astype(np.float32).transpose(2, 0, 1)[None] / np.float32(255.0)
    return np.ascontiguousarray(blob), side / size


def decode(output: np.ndarray, *, scale: float, width: int, height: int) -> list[ContentDetection]:
    """Raw ``(1, 4 + C, N)`` YOLOv8 output -> detections in image pixels, after NMS.

    Pure: ``scale`` is :func:`letterbox`'s, ``width`` / ``height`` the image size.
    """
    out = np.asarray(output, np.float32)
    if out.ndim != 3 or out.shape[0] != 1 or out.shape[1] != 4 + len(LABELS):
        raise ModelSignatureError(f"nudenet output must be (1, {4 + len(LABELS)}, N); got {out.shape}")
    rows = out[0].T  # (N, 22)
    scores_all = rows[:, 4:]
    classes = scores_all.argmax(axis=1)
    scores = scores_all[np.arange(len(rows)), classes]
    keep = scores >= CANDIDATE_SCORE
    rows, classes, scores = rows[keep], classes[keep], scores[keep]
    if len(rows) == 0:
        return []
    cx, cy, w, h = (rows[:, i] * scale for i in range(4))
    x = np.clip(cx - w / 2, 0, width)
    y = np.clip(cy - h / 2, 0, height)
    w = np.minimum(w, width - x)
    h = np.minimum(h, height - y)
    boxes = np.stack([x, y, w, h], axis=1)
    picked = cv2.dnn.NMSBoxes(boxes.tolist(), scores.tolist(), NMS_SCORE, NMS_IOU)
    return [
        ContentDetection(
            label=LABELS[int(classes[i])],
            score=float(scores[i]),
            box=tuple(int(v) for v in boxes[i]),  # type: ignore[arg-type]
        )
        for i in np.asarray(picked, dtype=int).reshape(-1)
    ]


class NudeNetDetector:
    """NudeNet's detector on ONNX Runtime (CPU unless ``providers`` say otherwise).

    ``with NudeNetDetector() as d: d.detect(pixels)``; the session is created
    by :meth:`prepare` (or the first :meth:`detect`) and released by :meth:`close`.
    """

    def __init__(
        self, model_path: str | Path | None = None, *, providers: tuple[str, ...] = ("CPUExecutionProvider",)
    ) -> None:
        self.model_path = Path(model_path) if model_path is not None else None
        self.providers = tuple(providers)
        self._session: Any = None  # an onnxruntime.InferenceSession once prepared
        self._input = ""

    def prepare(self) -> Self:
        if self._session is not None:
            return self
        import onnxruntime as ort

        path = self.model_path or find_model()
        if not path.is_file():
            raise ModelNotFoundError(f"screening model '{path}' does not exist")
        options = ort.SessionOptions()
        options.log_severity_level = 3
        try:
            session = ort.InferenceSession(str(path), sess_options=options, providers=list(self.providers))
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own untyped errors
            raise ModelFormatError(f"cannot load screening model '{path}': {' '.join(str(exc).split())}") from exc
        self._session, self._input = session, session.get_inputs()[0].name
        return self

    def detect(self, pixels: np.ndarray) -> list[ContentDetection]:
        """Detections in ``(H, W, 3)`` uint8 RGB ``pixels``, best first."""
        self.prepare()
        blob, scale = letterbox(pixels)
        try:
            (output,) = self._session.run(["output0"], {self._input: blob})
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"screening model failed: {' '.join(str(exc).split())}") from exc
        found = decode(output, scale=scale, width=pixels.shape[1], height=pixels.shape[0])
        return sorted(found, key=lambda d: -d.score)

    def close(self) -> None:
        self._session = None

    def __enter__(self) -> Self:
        return self.prepare()

    def __exit__(self, *exc: object) -> None:
        self.close()
