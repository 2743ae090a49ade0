"""The optional restoration after a swap: :class:`Enhancers`.

Which enhancers run, and how much of their result is kept, come from
:class:`~faceweave.options.EnhancerOptions`; their models come from the
owner's :class:`~faceweave.sessions.ModelSessions` (so the enhancers hold
nothing to close).  With none asked for, nothing is imported or loaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from faceweave.options import EnhancerOptions
from faceweave.sessions import ModelSessions
from faceweave.timing import timed
from faceweave.types import Face

if TYPE_CHECKING:
    from faceweave.enhancers import FaceEnhancer, FrameEnhancer


@dataclass(frozen=True)
class Enhancers:
    """The face and frame enhancers of a swap (``None``: not used)."""

    face: FaceEnhancer | None = None
    frame: FrameEnhancer | None = None
    face_blend: float = 0.8
    frame_blend: float = 1.0

    @classmethod
    def load(cls, options: EnhancerOptions, sessions: ModelSessions, *, facefusion: bool = False) -> Enhancers:
        """The enhancers ``options`` ask for, their models loaded from
        ``sessions`` (``facefusion``: the face enhancer cuts, pastes and
        blends as FaceFusion does)."""
        face = frame = None
        if options.face is not None or options.frame is not None:
            from faceweave.enhancers.factory import load_enhancers

            face, frame = load_enhancers(
                options, pool=sessions.open(), provider=sessions.provider, facefusion=facefusion
            )
        return cls(face=face, frame=frame, face_blend=options.face_blend, frame_blend=options.frame_blend)

    def apply(self, pixels: np.ndarray, faces: Sequence[Face], timings: dict[str, float] | None = None) -> np.ndarray:
        """The enhancers on a swapped ``(H, W, 3)`` frame: ``pixels`` itself
        when there are none, else a new frame (a frame enhancer may change
        its size)."""
        if self.face is None and self.frame is None:
            return pixels
        from faceweave.enhancers import enhance_result

        with timed({} if timings is None else timings, "enhance"):
            return enhance_result(
                pixels,
                list(faces),
                face_enhancer=self.face,
                frame_enhancer=self.frame,
                face_blend=self.face_blend,
                frame_blend=self.frame_blend,
            )
