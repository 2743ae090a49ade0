"""mediapipe's hand landmarks as an occlusion mask: a hand in front of the
face has the colour of skin, so it passes the skin-colour test as face; the
hand model finds it, and :func:`hand_mask` draws it."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from faceweave.analysis.native_log import QuietGraph
from faceweave.errors import ModelError

#: a hand's fingers are drawn this thick, and the whole hand grown by this
#: much, as fractions of the length from the wrist to the middle finger's knuckle
HAND_FINGER_WIDTH = 0.3
HAND_MARGIN = 0.08
#: hand landmarks (mediapipe's 21-point hand): the wrist and the knuckles, the palm's outline
PALM = (0, 1, 2, 5, 9, 13, 17)


def _draw_hand(out: np.ndarray, p: np.ndarray, palm: float) -> np.ndarray:
    """``out`` (uint8, 255 = hand) with one hand's ``(21, 2)`` points drawn:
    the palm polygon, thick lines along the finger bones, grown by
    :data:`HAND_MARGIN`."""
    from faceweave.mediapipe_import import load_mediapipe

    HAND_CONNECTIONS = load_mediapipe().solutions.hands_connections.HAND_CONNECTIONS

    width = max(2, int(round(HAND_FINGER_WIDTH * palm)))
    q = np.round(p * 16.0).astype(np.int32)  # 4 bits of sub-pixel precision
    cv2.fillPoly(out, [q[list(PALM)]], (255,), lineType=cv2.LINE_8, shift=4)
    for a, b in HAND_CONNECTIONS:
        cv2.line(out, (int(q[a, 0]), int(q[a, 1])), (int(q[b, 0]), int(q[b, 1])), (255,), width, cv2.LINE_8, 4)
    for k in range(21):
        cv2.circle(out, (int(q[k, 0]), int(q[k, 1])), width * 8, (255,), -1, lineType=cv2.LINE_8, shift=4)
    grow = int(round(HAND_MARGIN * palm))
    if grow > 0:
        kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * grow + 1, 2 * grow + 1))
        out = np.asarray(cv2.dilate(out, kernel))
    return out


def hand_mask(size: tuple[int, int], hands: Sequence[np.ndarray]) -> np.ndarray:
    """``(H, W)`` float32 in ``[0, 1]``: 1 over the hands drawn from their
    ``(21, 2)`` landmark pixel coordinates (mediapipe's hand model: palm
    polygon, thick lines along the finger bones), grown by
    :data:`HAND_MARGIN` and softened at the edge.  ``size`` is ``(W, H)``."""
    w, h = size
    out = np.zeros((h, w), np.uint8)
    soft = 1.0
    for points in hands:
        p = np.asarray(points, np.float32).reshape(21, 2)
        palm = float(np.linalg.norm(p[9] - p[0]))
        if not np.isfinite(palm) or palm < 1.0:
            continue
        out = _draw_hand(out, p, palm)
        soft = max(soft, 0.05 * palm)
    mask = out.astype(np.float32) / 255.0
    return np.asarray(cv2.GaussianBlur(mask, (0, 0), soft)) if mask.any() else mask


class HandDetector:
    """mediapipe's hand landmarks (palm detector + 21-point hand model) on
    still images.  The graph is made on :meth:`prepare` or the first call;
    one image at a time (the caller serialises calls from several threads)."""

    name = "mediapipe_hands"

    def __init__(self, *, max_hands: int = 2, min_confidence: float = 0.5) -> None:
        self.max_hands = max_hands
        self.min_confidence = min_confidence
        self._model: QuietGraph | None = None

    def prepare(self) -> QuietGraph:
        """Make the graph (once; its native log lines kept off stderr) and return it."""
        if self._model is None:
            try:
                from faceweave.mediapipe_import import load_mediapipe

                mp = load_mediapipe()

                self._model = QuietGraph(
                    lambda: mp.solutions.hands.Hands(
                        static_image_mode=True,
                        max_num_hands=self.max_hands,
                        model_complexity=1,
                        min_detection_confidence=self.min_confidence,
                    )
                )
            except Exception as exc:  # pragma: no cover - broken install
                raise ModelError(f"cannot load mediapipe hand landmarks: {exc}") from exc
        return self._model

    def hands(self, rgb: np.ndarray) -> list[np.ndarray]:
        """``(21, 2)`` float32 pixel coordinates of each hand found in an
        ``(H, W, 3)`` uint8 RGB image."""
        h, w = rgb.shape[:2]
        result = self.prepare().process(np.ascontiguousarray(rgb))
        return [
            np.array([(p.x * w, p.y * h) for p in lm.landmark], np.float32) for lm in result.multi_hand_landmarks or ()
        ]

    def hand_mask(self, rgb: np.ndarray) -> np.ndarray | None:
        """``(H, W)`` float32 in ``[0, 1]``, 1 over the hands, or ``None`` when
        there is no hand."""
        found = self.hands(rgb)
        if not found:
            return None
        return hand_mask((rgb.shape[1], rgb.shape[0]), found)

    def close(self) -> None:
        if self._model is not None:
            self._model.close()
            self._model = None
