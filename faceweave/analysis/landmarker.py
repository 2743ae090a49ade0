"""The 478-point face mesh (mediapipe, with iris refinement), run on a crop
around each detected face rather than on the whole frame."""

from __future__ import annotations

import cv2
import numpy as np

from faceweave.errors import ModelError
from faceweave.types import BBox, MESH_POINTS

#: side of the square crop the mesh model sees (it works at 192 px inside)
CROP_SIZE = 256
#: crop side relative to the detected box side
CROP_SCALE = 2.0


def crop_square(rgb: np.ndarray, box: BBox, *, scale: float, size: int) -> tuple[np.ndarray, float, float, float]:
    """A ``(size, size, 3)`` crop centred on ``box`` with side ``scale * max(w, h)``,
    padded with edge pixels; returns ``(crop, x0, y0, factor)`` such that
    image point = ``(x0, y0) + crop point / factor``."""
    cx, cy = box.center
    side = max(box.width, box.height) * scale
    factor = size / side
    x0, y0 = cx - side / 2.0, cy - side / 2.0
    m = np.array([[factor, 0.0, -x0 * factor], [0.0, factor, -y0 * factor]], np.float32)
    interp = cv2.INTER_AREA if factor < 1.0 else cv2.INTER_LINEAR
    crop = cv2.warpAffine(rgb, m, (size, size), flags=interp, borderMode=cv2.BORDER_REPLICATE)
    return crop, x0, y0, factor


class MediapipeFaceMesh:
    """mediapipe FaceMesh with ``refine_landmarks`` (iris), single face per crop."""

    name = "mediapipe_face_mesh"

    def __init__(self, *, min_confidence: float = 0.3) -> None:
        self.min_confidence = min_confidence
        self._model = None

    def prepare(self) -> None:
        if self._model is None:
            try:
                import mediapipe as mp

                self._model = mp.solutions.face_mesh.FaceMesh(
                    static_image_mode=True,
                    max_num_faces=1,
                    refine_landmarks=True,
                    min_detection_confidence=self.min_confidence,
                )
            except Exception as exc:  # pragma: no cover - broken install
                raise ModelError(f"cannot load mediapipe face mesh: {exc}") from exc

    def landmarks(self, rgb: np.ndarray, box: BBox) -> np.ndarray | None:
        """``(478, 3)`` mesh in image pixels for the face in ``box``, or ``None``
        when the mesh model finds no face there."""
        self.prepare()
        for scale in (CROP_SCALE, 1.5, 2.8):
            crop, x0, y0, factor = crop_square(rgb, box, scale=scale, size=CROP_SIZE)
            result = self._model.process(crop)
            if result.multi_face_landmarks:
                lm = result.multi_face_landmarks[0].landmark
                pts = np.array([[p.x, p.y, p.z] for p in lm], np.float32) * CROP_SIZE
                if pts.shape[0] != MESH_POINTS:
                    raise ModelError(f"face mesh returned {pts.shape[0]} points, expected {MESH_POINTS}")
                pts[:, 0] = pts[:, 0] / factor + x0
                pts[:, 1] = pts[:, 1] / factor + y0
                pts[:, 2] = pts[:, 2] / factor
                return pts
        return None

    def close(self) -> None:
        if self._model is not None:
            self._model.close()
            self._model = None
