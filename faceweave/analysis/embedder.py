"""dlib's 128-D face embedding (ResNet, LFW 99.38 %), from the
``face-recognition-models`` package: works offline."""

from __future__ import annotations

from typing import Any

import numpy as np

from faceweave.errors import ModelError
from faceweave.types import BBox

#: dlib's own same-person threshold on the L2 distance of two embeddings
SAME_PERSON_DISTANCE = 0.6


class DlibEmbedder:
    name = "dlib_resnet_v1"

    def __init__(self) -> None:
        self._predictor: Any = None  # dlib.shape_predictor (untyped)
        self._encoder: Any = None  # dlib.face_recognition_model_v1

    def prepare(self) -> None:
        if self._encoder is None:
            try:
                import dlib
                import face_recognition_models as frm

                self._predictor = dlib.shape_predictor(frm.pose_predictor_five_point_model_location())
                self._encoder = dlib.face_recognition_model_v1(frm.face_recognition_model_location())
            except Exception as exc:  # pragma: no cover - broken install
                raise ModelError(f"cannot load dlib face embedding models: {exc}") from exc

    def embed(self, rgb: np.ndarray, box: BBox) -> np.ndarray:
        """``(128,)`` float32 embedding of the face in ``box`` of an RGB image."""
        import dlib

        self.prepare()
        # dlib's detector boxes cover brows to chin; the mesh box reaches the
        # hairline, so drop its top sixth to match what the predictor expects
        top = box.y1 + box.height / 6.0
        rect = dlib.rectangle(int(round(box.x1)), int(round(top)), int(round(box.x2)), int(round(box.y2)))
        shape = self._predictor(np.ascontiguousarray(rgb), rect)
        vec = self._encoder.compute_face_descriptor(np.ascontiguousarray(rgb), shape)
        return np.asarray(vec, dtype=np.float32)

    def close(self) -> None:
        self._predictor = None
        self._encoder = None


def embedding_distance(a: np.ndarray, b: np.ndarray) -> float:
    """dlib's L2 distance between two embeddings (same person below 0.6)."""
    return float(np.linalg.norm(np.asarray(a, np.float32) - np.asarray(b, np.float32)))
