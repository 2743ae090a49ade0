"""Face detection with mediapipe's full-range detector, plus a tiled second
pass so that small faces in large or crowded pictures are found too."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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


class MediapipeFaceDetector:
    """mediapipe full-range BlazeFace detector (``model_selection=1``).

    Life cycle: construct, :meth:`detect` many times, :meth:`close`.
    """

    name = "mediapipe_full_range"

    def __init__(self, *, min_confidence: float = 0.5, small_faces: bool = True) -> None:
        self.min_confidence = min_confidence
        self.small_faces = small_faces
        self._model = None

    def prepare(self) -> None:
        if self._model is None:
            try:
                import mediapipe as mp

                self._model = mp.solutions.face_detection.FaceDetection(
                    model_selection=1, min_detection_confidence=self.min_confidence
                )
            except Exception as exc:  # pragma: no cover - broken install
                raise ModelError(f"cannot load mediapipe face detector: {exc}") from exc

    def _run(self, rgb: np.ndarray, ox: int, oy: int) -> list[Detection]:
        h, w = rgb.shape[:2]
        result = self._model.process(np.ascontiguousarray(rgb))
        out = []
        for det in result.detections or []:
            rel = det.location_data.relative_bounding_box
            x1, y1 = rel.xmin * w + ox, rel.ymin * h + oy
            x2, y2 = x1 + rel.width * w, y1 + rel.height * h
            if x2 <= x1 or y2 <= y1:
                continue
            kps = np.array([[k.x * w + ox, k.y * h + oy] for k in det.location_data.relative_keypoints], np.float32)
            out.append(Detection(bbox=BBox(x1, y1, x2, y2), score=float(det.score[0]), keypoints=kps))
        return out

    def detect(self, rgb: np.ndarray) -> list[Detection]:
        """Faces in an RGB ``(H, W, 3)`` uint8 image, best first, boxes in pixels."""
        self.prepare()
        h, w = rgb.shape[:2]
        found = self._run(rgb, 0, 0)
        if self.small_faces and min(h, w) >= 160:
            grid = tile_grid(w, h, tiles_per_side=2 if max(h, w) < 1600 else 3)
            for x, y, side in grid.tiles:
                for det in self._run(rgb[y : y + side, x : x + side], x, y):
                    # a tile detection touching a tile border is probably a cut face
                    found.append(det)
        inside = [d for d in found if d.bbox.clipped(w, h).area > 0.5 * d.bbox.area]
        return nms(inside)

    def close(self) -> None:
        if self._model is not None:
            self._model.close()
            self._model = None
