"""The pre- and post-processing of FaceFusion's face detectors and landmarkers,
as pure numpy functions (no model, no state), so each step can be checked with
known inputs.

Detectors see the frame *letterboxed*: scaled down (never up) to fit the
detector size, kept at its aspect, placed at the top-left of a zero canvas.
Anchor-based heads (scrfd, retinaface, yunet) predict per cell of a stride-8,
16 and 32 grid; yolo_face predicts one row per anchor with the box's centre
and size.  Overlapping hits are merged by greedy non-maximum suppression.
The 68-point landmarker sees a 256 px square in which the face box's longer
side is 195 px.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from faceweave import names
from faceweave.errors import InvalidOptionError, ModelSignatureError

#: the strides of the anchor grids of scrfd, retinaface and yunet
STRIDES = (8, 16, 32)
#: FaceFusion's 2dfan4 crop: the box's longer side in pixels, the crop side, the heatmap side
FAN_BOX_SIDE = 195.0
FAN_CROP = 256
FAN_HEATMAP = 64
#: how the pixels are scaled before a detector sees them
NORMALISATIONS = ("symmetric", "unit", "raw")


@dataclass(frozen=True)
class Letterbox:
    """A frame fitted into a detector's ``(width, height)``: the ``(1, 3, H, W)``
    float32 input, and the factors that take detector pixels back to the frame."""

    tensor: np.ndarray
    ratio_x: float
    ratio_y: float


@dataclass(frozen=True)
class RawDetections:
    """Decoded hits before suppression, in frame pixels: ``boxes`` ``(N, 4)``
    as x1, y1, x2, y2, ``scores`` ``(N,)``, ``points`` ``(N, 5, 2)``."""

    boxes: np.ndarray
    scores: np.ndarray
    points: np.ndarray

    @staticmethod
    def empty() -> RawDetections:
        return RawDetections(np.zeros((0, 4)), np.zeros((0,)), np.zeros((0, 5, 2)))

    @staticmethod
    def join(parts: Sequence[RawDetections]) -> RawDetections:
        if not parts:
            return RawDetections.empty()
        return RawDetections(
            np.concatenate([p.boxes for p in parts]),
            np.concatenate([p.scores for p in parts]),
            np.concatenate([p.points for p in parts]),
        )


def letterbox(bgr: np.ndarray, size: tuple[int, int], normalisation: str) -> Letterbox:
    """``bgr`` ``(H, W, 3)`` uint8 scaled down (bilinear) to fit ``size``
    ``(width, height)`` when larger, on a zero canvas of that size, as a
    ``(1, 3, height, width)`` float32 tensor normalised by ``normalisation``:
    ``symmetric`` ``(x - 127.5) / 128``, ``unit`` ``x / 255``, ``raw`` ``x``."""
    if normalisation not in NORMALISATIONS:
        raise InvalidOptionError(f"unknown normalisation {normalisation!r}; one of {', '.join(NORMALISATIONS)}")
    width, height = size
    h, w = bgr.shape[:2]
    fitted = bgr
    if h > height or w > width:
        scale = min(height / h, width / w)
        fitted = cv2.resize(bgr, (max(1, int(w * scale)), max(1, int(h * scale))))
    canvas = np.zeros((height, width, 3), np.float32)
    canvas[: fitted.shape[0], : fitted.shape[1]] = fitted
    if normalisation == "symmetric":
        canvas = (canvas - 127.5) / 128.0
    elif normalisation == "unit":
        canvas = canvas / 255.0
    tensor = np.ascontiguousarray(canvas.transpose(2, 0, 1)[None], np.float32)
    return Letterbox(tensor=tensor, ratio_x=w / fitted.shape[1], ratio_y=h / fitted.shape[0])


def anchor_centres(stride: int, per_cell: int, size: tuple[int, int]) -> np.ndarray:
    """``(cells * per_cell, 2)`` x, y of the anchors of a ``stride`` grid over
    ``size`` ``(width, height)``: row by row, each cell's point repeated
    ``per_cell`` times (the order the heads' rows come in)."""
    cols, rows = size[0] // stride, size[1] // stride
    ys, xs = np.mgrid[:rows, :cols]
    centres = np.stack([xs.ravel(), ys.ravel()], axis=-1).astype(np.float64) * stride
    return np.repeat(centres, per_cell, axis=0)


def distance_boxes(anchors: np.ndarray, distances: np.ndarray) -> np.ndarray:
    """``(N, 4)`` boxes from anchor points and ``(N, 4)`` distances to the
    left, top, right and bottom edges."""
    return np.column_stack(
        [
            anchors[:, 0] - distances[:, 0],
            anchors[:, 1] - distances[:, 1],
            anchors[:, 0] + distances[:, 2],
            anchors[:, 1] + distances[:, 3],
        ]
    )


def distance_points(anchors: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``(N, K, 2)`` points from anchor points and ``(N, 2K)`` x, y offsets."""
    n = offsets.shape[0]
    return anchors[:, None, :] + offsets.reshape(n, -1, 2)


def _rows(array: np.ndarray, rows: int, width: int, what: str) -> np.ndarray:
    """``array`` as ``(rows, width)`` (a leading batch axis of 1 dropped), or
    :class:`ModelSignatureError` saying what the head gave."""
    out = np.asarray(array)
    if out.ndim == 3 and out.shape[0] == 1:
        out = out[0]
    if out.shape != (rows, width):
        raise ModelSignatureError(
            f"{what}: output of shape {list(np.shape(array))}, expected {rows} rows of {width} for this detector size"
        )
    return out


def _scaled(boxes: np.ndarray, points: np.ndarray, box: Letterbox) -> tuple[np.ndarray, np.ndarray]:
    ratio = np.array([box.ratio_x, box.ratio_y])
    return boxes * np.tile(ratio, 2), points * ratio


def decode_anchor_heads(
    outputs: Sequence[np.ndarray], box: Letterbox, size: tuple[int, int], *, threshold: float, model: str
) -> RawDetections:
    """scrfd / retinaface: outputs ``score_8, score_16, score_32, box_8 ... ,
    points_8 ...``; two anchors per cell; distances in strides; a hit where
    its score is at least ``threshold``."""
    parts = []
    for index, stride in enumerate(STRIDES):
        anchors = anchor_centres(stride, 2, size)
        n = len(anchors)
        scores = _rows(outputs[index], n, 1, f"{model} scores at stride {stride}")[:, 0]
        keep = scores >= threshold
        if not keep.any():
            continue
        dist = _rows(outputs[index + 3], n, 4, f"{model} boxes at stride {stride}")[keep] * stride
        offs = _rows(outputs[index + 6], n, 10, f"{model} points at stride {stride}")[keep] * stride
        boxes, points = _scaled(distance_boxes(anchors[keep], dist), distance_points(anchors[keep], offs), box)
        parts.append(RawDetections(boxes, scores[keep], points))
    return RawDetections.join(parts)


def decode_yunet(
    outputs: Sequence[np.ndarray], box: Letterbox, size: tuple[int, int], *, threshold: float, model: str = "yunet"
) -> RawDetections:
    """yunet: outputs ``class_8 .., object_8 .., box_8 .., points_8 ..``; one
    anchor per cell; score = class x object; box centre offset and log size
    in strides; a hit where its score is at least ``threshold``."""
    parts = []
    for index, stride in enumerate(STRIDES):
        anchors = anchor_centres(stride, 1, size)
        n = len(anchors)
        cls = _rows(outputs[index], n, 1, f"{model} class scores at stride {stride}")[:, 0]
        obj = _rows(outputs[index + 3], n, 1, f"{model} object scores at stride {stride}")[:, 0]
        # multiplied at the model's precision, so that near-equal scores order as FaceFusion's do
        scores = (cls.astype(np.float32) * obj.astype(np.float32)).astype(np.float64)
        keep = scores >= threshold
        if not keep.any():
            continue
        raw = _rows(outputs[index + 6], n, 4, f"{model} boxes at stride {stride}")[keep]
        offs = _rows(outputs[index + 9], n, 10, f"{model} points at stride {stride}")[keep] * stride
        centres = raw[:, :2] * stride + anchors[keep]
        half = np.exp(raw[:, 2:4]) * stride / 2.0
        boxes = np.concatenate([centres - half, centres + half], axis=1)
        boxes, points = _scaled(boxes, distance_points(anchors[keep], offs), box)
        parts.append(RawDetections(boxes, scores[keep], points))
    return RawDetections.join(parts)


def decode_yolo(output: np.ndarray, box: Letterbox, *, threshold: float, model: str = "yolo_face") -> RawDetections:
    """yolo_face: one ``(1, 20, N)`` output, per anchor centre x, y, width,
    height, score and five points as x, y, visibility; a hit where its score
    is above ``threshold``."""
    rows = np.asarray(output, np.float64)
    rows = rows.reshape(rows.shape[-2], rows.shape[-1]).T if rows.ndim in (2, 3) else rows
    if rows.ndim != 2 or rows.shape[1] != 20:
        raise ModelSignatureError(f"{model}: output of shape {list(np.shape(output))}, expected [1, 20, anchors]")
    keep = rows[:, 4] > threshold
    if not keep.any():
        return RawDetections.empty()
    hits = rows[keep]
    half = hits[:, 2:4] / 2.0
    boxes = np.concatenate([hits[:, :2] - half, hits[:, :2] + half], axis=1)
    points = hits[:, 5:20].reshape(-1, 5, 3)[:, :, :2]
    boxes, points = _scaled(boxes, points, box)
    return RawDetections(boxes, hits[:, 4], points)


def box_iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Intersection over union of one x1, y1, x2, y2 box with ``(N, 4)`` others."""
    w = np.clip(np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0]), 0.0, None)
    h = np.clip(np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1]), 0.0, None)
    inter = w * h
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    union = area + areas - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)


def suppress(raw: RawDetections, *, score_threshold: float, iou_threshold: float) -> list[int]:
    """Indices of the hits kept by greedy non-maximum suppression, best score
    first (ties in input order): a hit needs a score above ``score_threshold``
    and at most ``iou_threshold`` overlap with every better hit kept."""
    order = [i for i in np.argsort(-raw.scores, kind="stable") if raw.scores[i] > score_threshold]
    kept: list[int] = []
    for index in order:
        if kept and float(box_iou(raw.boxes[index], raw.boxes[kept]).max()) > iou_threshold:
            continue
        kept.append(int(index))
    return kept


# -- several detectors, turned frames, margins ----------------------------------

#: the angles (degrees, counter-clockwise) a frame may be turned by before detection
DETECTOR_ANGLES = names.DETECTOR_ANGLES


def merge_iou(several: bool, angles: int) -> float:
    """FaceFusion's suppression overlap for the hits of one frame: 0.1 when
    several detectors run (``many``), else 0.4, 0.3, 0.2, 0.1 for 1-4 angles."""
    if several:
        return 0.1
    return {1: 0.4, 2: 0.3, 3: 0.2}.get(angles, 0.1)


def margin_pads(shape: tuple[int, ...], margin: Sequence[int]) -> tuple[int, int, int, int]:
    """The zero border ``(top, right, bottom, left)`` in pixels that a
    detector margin of percentages ``(top, right, bottom, left)`` adds to a
    frame of ``shape``: 100 % is half the frame's height (top, bottom) or
    width (right, left), cut to whole pixels."""
    height, width = shape[:2]
    sides = (height, width, height, width)
    top, right, bottom, left = (
        int(side * float(np.interp(m, [0, 100], [0.0, 0.5]))) for side, m in zip(sides, margin, strict=True)
    )
    return top, right, bottom, left


def turning(angle: int, width: int, height: int) -> tuple[np.ndarray, tuple[int, int]]:
    """``(matrix, (width, height))``: the ``(2, 3)`` rotation by ``angle``
    degrees about the frame's centre, shifted so the whole turned frame fits
    the returned size (its bounding box, cut to whole pixels)."""
    matrix = np.asarray(cv2.getRotationMatrix2D((width / 2, height / 2), angle, 1), np.float64)
    size = np.abs(matrix[:, :2]) @ np.array([width, height], np.float64)
    matrix[:, 2] = matrix[:, 2] + (size - np.array([width, height], np.float64)) * 0.5
    return matrix, (int(size[0]), int(size[1]))


def ordered(raw: RawDetections) -> RawDetections:
    """``raw`` with every box's corners ordered (x1 <= x2, y1 <= y2)."""
    boxes = np.asarray(raw.boxes, np.float64).reshape(-1, 4)
    xs, ys = np.sort(boxes[:, 0::2], axis=1), np.sort(boxes[:, 1::2], axis=1)
    return RawDetections(np.column_stack([xs[:, 0], ys[:, 0], xs[:, 1], ys[:, 1]]), raw.scores, raw.points)


def shifted(raw: RawDetections, dx: float, dy: float) -> RawDetections:
    """``raw`` moved by ``(dx, dy)`` pixels."""
    offset = np.array([dx, dy], np.float64)
    return RawDetections(raw.boxes + np.tile(offset, 2), raw.scores, raw.points + offset)


def moved(raw: RawDetections, matrix: np.ndarray) -> RawDetections:
    """``raw`` taken through the affine ``matrix``: each box becomes the
    ordered bounding box of its four moved corners, the points move."""
    m = np.asarray(matrix, np.float64)
    boxes = np.asarray(raw.boxes, np.float64).reshape(-1, 4)
    corners = boxes[:, [[0, 1], [2, 1], [2, 3], [0, 3]]] @ m[:, :2].T + m[:, 2]
    lows, highs = corners.min(axis=1), corners.max(axis=1)
    points = np.asarray(raw.points, np.float64) @ m[:, :2].T + m[:, 2]
    return RawDetections(np.hstack([lows, highs]), raw.scores, points)


def ordered_box(box: np.ndarray) -> np.ndarray:
    """The box with x1 <= x2 and y1 <= y2."""
    x1, x2 = sorted((float(box[0]), float(box[2])))
    y1, y2 = sorted((float(box[1]), float(box[3])))
    return np.array([x1, y1, x2, y2])


# -- 68 points ------------------------------------------------------------------


def fan_crop_matrix(box: np.ndarray) -> np.ndarray:
    """``(2, 3)`` frame -> crop: the box's longer side to 195 px, its centre
    to the centre of the 256 px square."""
    side = float(np.clip(max(box[2] - box[0], box[3] - box[1]), 1.0, None))
    scale = FAN_BOX_SIDE / side
    tx = (FAN_CROP - (box[0] + box[2]) * scale) * 0.5
    ty = (FAN_CROP - (box[1] + box[3]) * scale) * 0.5
    return np.array([[scale, 0.0, tx], [0.0, scale, ty]])


def rotation_about_centre(angle: int, side: int) -> np.ndarray:
    """``(2, 3)`` rotation by ``angle`` degrees about a ``side`` square's centre
    (a multiple of 90 keeps the square)."""
    return cv2.getRotationMatrix2D((side / 2.0, side / 2.0), float(angle), 1.0)


def transform(points: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """``(N, 2)`` points through a ``(2, 3)`` affine matrix."""
    pts = np.asarray(points, np.float64).reshape(-1, 2)
    return pts @ np.asarray(matrix, np.float64)[:, :2].T + np.asarray(matrix, np.float64)[:, 2]


def heatmap_score(heatmaps: np.ndarray) -> float:
    """The landmarker's confidence: the mean over the points of each
    heatmap's peak, stretched so a mean peak of 0.9 or more is 1."""
    peaks = np.asarray(heatmaps, np.float64).reshape(-1, heatmaps.shape[-2] * heatmaps.shape[-1]).max(axis=1)
    return float(np.interp(peaks.mean(), [0.0, 0.9], [0.0, 1.0]))


def five_from_68(points: np.ndarray) -> np.ndarray:
    """``(5, 2)`` alignment points from 68: the eyes' centres (image left,
    image right), the nose tip, the mouth corners."""
    pts = np.asarray(points, np.float64)
    return np.array([pts[36:42].mean(axis=0), pts[42:48].mean(axis=0), pts[30], pts[48], pts[54]])


def face_angle(points68: np.ndarray) -> int:
    """The face's roll rounded to 0, 90, 180 or 270 degrees, from the jaw's
    ends (points 0 and 16)."""
    (x1, y1), (x2, y2) = points68[0], points68[16]
    theta = np.degrees(np.arctan2(y2 - y1, x2 - x1)) % 360.0
    angles = np.linspace(0.0, 360.0, 5)
    return int(angles[int(np.argmin(np.abs(angles - theta)))] % 360)


def lift_dark(bgr_crop: np.ndarray) -> np.ndarray:
    """The crop through the Lab round trip FaceFusion gives every landmarker
    crop (on the BGR crop read as RGB, as it does), its lightness equalised
    (CLAHE, clip 2) when its mean is below 30."""
    lab = cv2.cvtColor(bgr_crop, cv2.COLOR_RGB2Lab)
    if float(np.mean(lab[:, :, 0])) < 30.0:
        lab[:, :, 0] = cv2.createCLAHE(clipLimit=2).apply(lab[:, :, 0])
    return cv2.cvtColor(lab, cv2.COLOR_Lab2RGB)
