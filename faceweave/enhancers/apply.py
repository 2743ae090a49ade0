"""The step the image and video pipelines run after swapping."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from faceweave.enhancers.base import FaceEnhancer, FaceLike, FrameEnhancer
from faceweave.enhancers.colorizer import FrameColorizer


def enhance_result(
    frame: np.ndarray,
    faces: Sequence[FaceLike],
    *,
    face_enhancer: FaceEnhancer | None = None,
    frame_enhancer: FrameEnhancer | None = None,
    face_blend: float = 0.8,
    frame_blend: float = 1.0,
    frame_colorizer: FrameColorizer | None = None,
    colorizer_blend: float = 1.0,
) -> np.ndarray:
    """Restore ``faces`` of a swapped ``(H, W, 3)`` uint8 RGB frame with
    ``face_enhancer`` (when given), colour it with ``frame_colorizer`` (when
    given), then enhance the whole frame with ``frame_enhancer`` (when given;
    the result is ``scale`` times larger unless it was built with
    ``restore_size``).  Returns ``frame`` itself when there is nothing to do,
    otherwise a new array."""
    out = frame
    if face_enhancer is not None and len(faces) > 0:
        out = face_enhancer.enhance(out, faces, blend=face_blend)
    if frame_colorizer is not None:
        out = frame_colorizer.colorize(out, blend=colorizer_blend)
    if frame_enhancer is not None:
        out = frame_enhancer.enhance(out, blend=frame_blend)
    return out
