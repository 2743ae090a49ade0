"""Face detectors as components: the protocol, FaceFusion's ONNX detectors
(yolo_face, scrfd, retinaface, yunet), FaceFusion's way of running them on a
frame (:class:`FaceDetection`: ``many``, turned frames, a margin) and the
registry that makes one by name.

``mediapipe`` (BlazeFace, :mod:`faceweave.analysis.detector`) is the offline
default and needs no model file.  The ONNX detectors take the model from a
session pool (the catalog entry of the same name, see ``faceweave models
list``) and run FaceFusion's pre- and post-processing
(:mod:`faceweave.analysis.decoding`): the frame in BGR letterboxed into the
detector size, the heads decoded to boxes, scores and five points, a score
threshold, and non-maximum suppression at FaceFusion's 0.4 overlap.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import cv2
import numpy as np

from faceweave import names
from faceweave.analysis import decoding
from faceweave.analysis.decoding import Letterbox, RawDetections
from faceweave.errors import InvalidOptionError, ModelSignatureError
from faceweave.runtime.model import RunnableModel
from faceweave.types import BBox, Detection

#: FaceFusion's overlap above which a weaker hit is dropped (one detector, no extra angles)
NMS_IOU = 0.4


@runtime_checkable
class FaceDetector(Protocol):
    """Finds faces: boxes in image pixels, scores, five points each (eyes
    image-left / image-right, nose tip, mouth corners image-left / right)."""

    name: str

    def prepare(self) -> None:
        """Load and warm up what :meth:`detect` needs."""

    def detect(self, rgb: np.ndarray, *, small_faces: bool | None = None) -> list[Detection]:
        """Faces in an RGB ``(H, W, 3)`` uint8 image, best score first."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class DetectorSpec:
    """A registered detector: its name (also its catalog entry's), how its
    input is normalised, the sizes it takes (square sides) and its decoder
    class."""

    name: str
    normalisation: str
    sizes: tuple[int, ...]
    make: Callable[..., OnnxFaceDetector]
    outputs: int


class OnnxFaceDetector:
    """The part every ONNX detector shares: the letterbox, the run, the
    suppression.  Subclasses decode the heads (:meth:`decode`).

    ``model``: the loaded graph (a :class:`RunnableModel` with an ``input``);
    ``size``: the square side the frame is letterboxed into; ``score``: the
    lowest score kept.  Owns nothing: the session pool that gave the model
    closes it."""

    def __init__(self, spec: DetectorSpec, model: RunnableModel, *, size: int = 640, score: float = 0.5) -> None:
        if size not in spec.sizes:
            raise InvalidOptionError(
                f"face detector {spec.name} takes sizes {', '.join(map(str, spec.sizes))}, not {size}"
            )
        names = [t.name for t in model.inputs]
        if names != ["input"] or len(model.outputs) != spec.outputs:
            raise ModelSignatureError(
                f"face detector {spec.name}: expected one input 'input' and {spec.outputs} outputs, "
                f"found inputs {names} and {len(model.outputs)} outputs"
            )
        self.spec = spec
        self.name = spec.name
        self.model = model
        self.size = (size, size)
        self.score = score

    def prepare(self) -> None:
        """Nothing to do: the pool warmed the model up when it loaded it."""

    def raw(self, rgb: np.ndarray) -> RawDetections:
        """Every hit above the score threshold, before suppression."""
        boxed = decoding.letterbox(bgr(rgb), self.size, self.spec.normalisation)
        result = self.model.run({"input": boxed.tensor})
        return self.decode([np.asarray(result[t.name]) for t in self.model.outputs], boxed)

    def decode(self, outputs: list[np.ndarray], boxed: Letterbox) -> RawDetections:
        raise NotImplementedError

    def detect(self, rgb: np.ndarray, *, small_faces: bool | None = None) -> list[Detection]:
        """Faces in ``rgb``, best first; ``small_faces`` is ignored (the
        detector sees the whole frame at its size)."""
        raw = self.raw(rgb)
        kept = decoding.suppress(raw, score_threshold=self.score, iou_threshold=NMS_IOU)
        return [_detection(raw, index) for index in kept]

    def close(self) -> None:
        """Nothing to release: the model belongs to its pool."""


def _detection(raw: RawDetections, index: int) -> Detection:
    x1, y1, x2, y2 = decoding.ordered_box(raw.boxes[index])
    return Detection(bbox=BBox(x1, y1, x2, y2), score=float(raw.scores[index]), keypoints=raw.points[index])


class AnchorFaceDetector(OnnxFaceDetector):
    """scrfd and retinaface: score, box-distance and point heads per stride."""

    def decode(self, outputs: list[np.ndarray], boxed: Letterbox) -> RawDetections:
        return decoding.decode_anchor_heads(outputs, boxed, self.size, threshold=self.score, model=self.name)


class YunetFaceDetector(OnnxFaceDetector):
    """yunet: class, object, box and point heads per stride."""

    def decode(self, outputs: list[np.ndarray], boxed: Letterbox) -> RawDetections:
        return decoding.decode_yunet(outputs, boxed, self.size, threshold=self.score, model=self.name)


class YoloFaceDetector(OnnxFaceDetector):
    """yolo_face: one row per anchor with box, score and points."""

    def decode(self, outputs: list[np.ndarray], boxed: Letterbox) -> RawDetections:
        return decoding.decode_yolo(outputs[0], boxed, threshold=self.score, model=self.name)


#: the ONNX detectors, by name (each also names its catalog entry; sizes: :data:`faceweave.names.DETECTOR_SIZES`)
ONNX_DETECTORS: Mapping[str, DetectorSpec] = names.registered(
    "ONNX face detector",
    names.ONNX_FACE_DETECTORS,
    {
        s.name: s
        for s in (
            DetectorSpec("yolo_face", "unit", names.DETECTOR_SIZES["yolo_face"], YoloFaceDetector, 1),
            DetectorSpec("scrfd", "symmetric", names.DETECTOR_SIZES["scrfd"], AnchorFaceDetector, 9),
            DetectorSpec("retinaface", "symmetric", names.DETECTOR_SIZES["retinaface"], AnchorFaceDetector, 9),
            DetectorSpec("yunet", "raw", names.DETECTOR_SIZES["yunet"], YunetFaceDetector, 12),
        )
    },
)

#: the detectors FaceFusion's ``many`` runs on every frame, in its order
MANY_DETECTORS: tuple[str, ...] = names.MANY_DETECTORS

#: every name ``--face-detector`` takes, the default first
FACE_DETECTORS: tuple[str, ...] = names.FACE_DETECTORS


#: the ONNX detectors (catalog entries) a ``--face-detector`` choice runs
detector_models = names.detector_models


class FaceDetection:
    """FaceFusion's detection of a frame with its ONNX detectors: every
    detector (several for ``many``) at every angle (the frame turned, the
    hits turned back), each on the frame with the margin's zero border, all
    hits merged by one suppression at FaceFusion's overlap for that many
    detectors and angles (:func:`~faceweave.analysis.decoding.merge_iou`).
    One detector, angle 0 and no margin is that detector's own
    :meth:`OnnxFaceDetector.detect`."""

    def __init__(
        self,
        detectors: Sequence[OnnxFaceDetector],
        *,
        name: str,
        score: float = 0.5,
        angles: Sequence[int] = (0,),
        margin: Sequence[int] = (0, 0, 0, 0),
    ) -> None:
        if not detectors or not angles:
            raise InvalidOptionError("a face detection needs at least one detector and one angle")
        bad = [a for a in angles if a not in decoding.DETECTOR_ANGLES]
        if bad:
            raise InvalidOptionError(
                f"face detector angle {bad[0]}; one of {', '.join(map(str, decoding.DETECTOR_ANGLES))}"
            )
        self.detectors = tuple(detectors)
        self.name = name
        self.score = score
        self.angles = tuple(angles)
        self.margin = tuple(margin)
        self.iou = decoding.merge_iou(len(self.detectors) > 1, len(self.angles))

    def prepare(self) -> None:
        for detector in self.detectors:
            detector.prepare()

    def raw(self, rgb: np.ndarray) -> RawDetections:
        """Every hit of every detector and angle, in frame pixels, before suppression."""
        return RawDetections.join([self._turned(rgb, angle) for angle in self.angles])

    def _turned(self, rgb: np.ndarray, angle: int) -> RawDetections:
        if angle == 0:
            return self._bordered(rgb)
        height, width = rgb.shape[:2]
        matrix, size = decoding.turning(angle, width, height)
        turned = cv2.warpAffine(np.ascontiguousarray(rgb), matrix, size)
        return decoding.moved(self._bordered(turned), cv2.invertAffineTransform(matrix))

    def _bordered(self, rgb: np.ndarray) -> RawDetections:
        top, right, bottom, left = decoding.margin_pads(rgb.shape, self.margin)
        framed = rgb
        if top or right or bottom or left:
            framed = np.pad(rgb, ((top, bottom), (left, right), (0, 0)))
        found = RawDetections.join([detector.raw(framed) for detector in self.detectors])
        return decoding.shifted(decoding.ordered(found), -left, -top)

    def detect(self, rgb: np.ndarray, *, small_faces: bool | None = None) -> list[Detection]:
        """Faces in ``rgb``, best first; ``small_faces`` is ignored."""
        raw = self.raw(rgb)
        kept = decoding.suppress(raw, score_threshold=self.score, iou_threshold=self.iou)
        return [_detection(raw, index) for index in kept]

    def close(self) -> None:
        for detector in self.detectors:
            detector.close()


def check_face_detector(name: str) -> str:
    """``name`` when it is a registered detector, else :class:`InvalidOptionError`
    naming the accepted ones."""
    if name not in FACE_DETECTORS:
        raise InvalidOptionError(names.unknown("face detector", name, FACE_DETECTORS))
    return name


def create_face_detector(name: str, model: RunnableModel, *, size: int = 640, score: float = 0.5) -> FaceDetector:
    """The ONNX detector ``name`` on its loaded ``model`` (mediapipe's is made
    by :class:`~faceweave.analysis.FaceAnalyser`, which owns its graphs;
    ``many``, angles and margins by :func:`create_face_detection`)."""
    check_face_detector(name)
    if name not in ONNX_DETECTORS:
        raise InvalidOptionError(f"face detector {name!r} is not one ONNX model; see create_face_detection")
    spec = ONNX_DETECTORS[name]
    return spec.make(spec, model, size=size, score=score)


def create_face_detection(
    name: str,
    models: Callable[[str], RunnableModel],
    *,
    size: int = 640,
    score: float = 0.5,
    angles: Sequence[int] = (0,),
    margin: Sequence[int] = (0, 0, 0, 0),
) -> FaceDetection:
    """The ONNX detection ``name`` (one of :data:`ONNX_DETECTORS` or
    ``many``), each detector's model taken from ``models(catalog name)``."""
    check_face_detector(name)
    chosen = detector_models(name)
    if not chosen:
        raise InvalidOptionError(f"face detector {name!r} needs no model file; the analyser makes it")
    detectors = []
    for member in chosen:
        spec = ONNX_DETECTORS[member]
        detectors.append(spec.make(spec, models(member), size=size, score=score))
    return FaceDetection(detectors, name=name, score=score, angles=angles, margin=margin)


def bgr(rgb: np.ndarray) -> np.ndarray:
    """The BGR copy FaceFusion's models see (it reads frames with OpenCV)."""
    return cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2BGR)
