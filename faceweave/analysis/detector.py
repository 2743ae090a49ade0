"""Face detection with mediapipe's full-range detector, plus a tiled second
pass so that small faces in large or crowded pictures are found too."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from faceweave.analysis.native_log import QuietGraph
from faceweave.errors import ModelError
from faceweave.types import BBox, Detection


@dataclass(frozen=True)
class TileGrid:
    """Overlapping square tiles covering an image, as ``(x, y, side)``."""

    tiles: tuple[tuple[int, int, int], ...]


def tile_grid(width: int, height: int, *, tiles_per_side: int = 2, overlap: float = 0.25) -> TileGrid:
    """Square tiles of side ``~min(W, H) / tiles_per_side * (1 + overlap)`` that
    cover the whole image with overlap.  Pure geometry."""
    side = int(round(min(width, height) / tiles_per_side * (1.0 + overlap)))
    side = max(1, min(side, width, height))
    step = max(1, int(side * (1.0 - overlap)))

    def starts(extent: int) -> list[int]:
        xs = list(range(0, max(extent - side, 0) + 1, step))
        if xs[-1] + side < extent:
            xs.append(extent - side)
        return xs

    return TileGrid(tuple((x, y, side) for y in starts(height) for x in starts(width)))


def nms(detections: list[Detection], iou_threshold: float = 0.35) -> list[Detection]:
    """Greedy non-maximum suppression, best score first; also drops a box
    mostly contained in a kept one (tiles cut faces)."""
    kept: list[Detection] = []
    for det in sorted(detections, key=lambda d: -d.score):
        ok = True
        for k in kept:
            inter_w = max(0.0, min(det.bbox.x2, k.bbox.x2) - max(det.bbox.x1, k.bbox.x1))
            inter_h = max(0.0, min(det.bbox.y2, k.bbox.y2) - max(det.bbox.y1, k.bbox.y1))
            inter = inter_w * inter_h
            if det.bbox.iou(k.bbox) > iou_threshold or inter > 0.6 * min(det.bbox.area, k.bbox.area):
                ok = False
                break
        if ok:
            kept.append(det)
    return kept


def _fit(rgb: np.ndarray, max_side: int) -> tuple[np.ndarray, float]:
    """The image scaled down (area filter) so its longer side is at most
    ``max_side``; returns ``(image, scale)``."""
    h, w = rgb.shape[:2]
    scale = min(1.0, max_side / max(h, w))
    if scale >= 1.0:
        return np.ascontiguousarray(rgb), 1.0
    size = (max(1, int(round(w * scale))), max(1, int(round(h * scale))))
    return cv2.resize(rgb, size, interpolation=cv2.INTER_AREA), scale


class MediapipeFaceDetector:
    """mediapipe BlazeFace detectors: the full-range model (``model_selection=1``)
    on the whole picture and on overlapping tiles (small faces), and the
    short-range model on the whole picture (large, near faces, which the
    full-range model sometimes misses).  Hits are merged by NMS.

    Life cycle: construct, :meth:`detect` many times, :meth:`close`.
    """

    name = "mediapipe_blazeface"
    #: the models work at 128/192 px; larger inputs only cost conversion time
    _MAX_SIDE = 640
    _TILE_SIDE = 384
    _SHORT_MIN_CONFIDENCE = 0.8

    def __init__(self, *, min_confidence: float = 0.5, small_faces: bool = True) -> None:
        self.min_confidence = min_confidence
        self.small_faces = small_faces
        self._full: QuietGraph | None = None
        self._short: QuietGraph | None = None

    def prepare(self) -> None:
        if self._full is None:
            try:
                from faceweave.mediapipe_import import load_mediapipe

                mp = load_mediapipe()

                fd = mp.solutions.face_detection
                # made and first run with their native log lines kept off stderr
                self._full = QuietGraph(
                    lambda: fd.FaceDetection(model_selection=1, min_detection_confidence=self.min_confidence)
                )
                # the short-range model fires on animal faces at lower scores
                short_min = max(self.min_confidence, self._SHORT_MIN_CONFIDENCE)
                self._short = QuietGraph(
                    lambda: fd.FaceDetection(model_selection=0, min_detection_confidence=short_min)
                )
            except Exception as exc:  # pragma: no cover - broken install
                raise ModelError(f"cannot load mediapipe face detector: {exc}") from exc

    @staticmethod
    def _run(model, small: np.ndarray, scale: float, ox: int, oy: int, min_score: float) -> list[Detection]:
        """Detections of ``model`` on ``small`` (an image scaled by ``scale``
        whose origin sits at ``(ox, oy)`` in the full picture)."""
        h, w = small.shape[:2]
        result = model.process(small)
        out = []
        for det in result.detections or []:
            if det.score[0] < min_score:
                continue
            rel = det.location_data.relative_bounding_box
            x1, y1 = rel.xmin * w / scale + ox, rel.ymin * h / scale + oy
            x2, y2 = x1 + rel.width * w / scale, y1 + rel.height * h / scale
            if x2 <= x1 or y2 <= y1:
                continue
            kps = np.array(
                [[k.x * w / scale + ox, k.y * h / scale + oy] for k in det.location_data.relative_keypoints], np.float32
            )
            out.append(Detection(bbox=BBox(x1, y1, x2, y2), score=float(det.score[0]), keypoints=kps))
        return out

    def detect(self, rgb: np.ndarray, *, small_faces: bool | None = None) -> list[Detection]:
        """Faces in an RGB ``(H, W, 3)`` uint8 image, best first, boxes in
        pixels.  ``small_faces`` overrides the constructor's choice of the
        tiled pass (which costs several model runs) for this call."""
        self.prepare()
        small_faces = self.small_faces if small_faces is None else small_faces
        h, w = rgb.shape[:2]
        small, scale = _fit(rgb, self._MAX_SIDE)
        short_min = max(self.min_confidence, self._SHORT_MIN_CONFIDENCE)
        found = self._run(self._full, small, scale, 0, 0, self.min_confidence)
        found += self._run(self._short, small, scale, 0, 0, short_min)
        if small_faces and min(h, w) >= 160:
            grid = tile_grid(w, h, tiles_per_side=2 if max(h, w) < 1600 else 3)
            for x, y, side in grid.tiles:
                tile, tile_scale = _fit(rgb[y : y + side, x : x + side], self._TILE_SIDE)
                found += self._run(self._full, tile, tile_scale, x, y, self.min_confidence)
        inside = [d for d in found if d.bbox.clipped(w, h).area > 0.5 * d.bbox.area]
        return nms(inside)

    def close(self) -> None:
        for model in (self._full, self._short):
            if model is not None:
                model.close()
        self._full = self._short = None
