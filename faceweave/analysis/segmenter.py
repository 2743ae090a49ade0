"""mediapipe's selfie segmentation as an occlusion mask: a non-person object
in front of the face (a ball, a microphone) stays in front of the swapped
face."""

from __future__ import annotations

import numpy as np

from faceweave.analysis.native_log import QuietGraph
from faceweave.errors import ModelError


class SelfieSegmenter:
    """mediapipe selfie segmentation: person (1) versus background (0).
    The graph is made on :meth:`prepare` or the first call; one image at a
    time (the caller serialises calls from several threads)."""

    name = "mediapipe_selfie_segmentation"

    def __init__(self) -> None:
        self._model: QuietGraph | None = None

    def prepare(self) -> QuietGraph:
        """Make the graph (once; its native log lines kept off stderr) and return it."""
        if self._model is None:
            try:
                from faceweave.mediapipe_import import load_mediapipe

                mp = load_mediapipe()

                self._model = QuietGraph(lambda: mp.solutions.selfie_segmentation.SelfieSegmentation(model_selection=0))
            except Exception as exc:  # pragma: no cover - broken install
                raise ModelError(f"cannot load mediapipe selfie segmentation: {exc}") from exc
        return self._model

    def person_mask(self, rgb: np.ndarray) -> np.ndarray:
        """``(H, W)`` float32 probability that each pixel of an ``(H, W, 3)``
        uint8 RGB image belongs to a person."""
        result = self.prepare().process(np.ascontiguousarray(rgb))
        return np.clip(result.segmentation_mask.astype(np.float32), 0.0, 1.0)

    def close(self) -> None:
        if self._model is not None:
            self._model.close()
            self._model = None
