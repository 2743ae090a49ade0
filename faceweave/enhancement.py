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
    from faceweave.enhancers import FaceEnhancer, FrameColorizer, FrameEnhancer


@dataclass(frozen=True)
class Enhancers:
    """The face enhancer, frame colorizer and frame enhancer of a swap
    (``None``: not used), applied in that order."""

    face: FaceEnhancer | None = None
    frame: FrameEnhancer | None = None
    face_blend: float = 0.8
    frame_blend: float = 1.0
    colorizer: FrameColorizer | None = None
    colorizer_blend: float = 1.0

    @classmethod
    def load(cls, options: EnhancerOptions, sessions: ModelSessions, *, facefusion: bool = False) -> Enhancers:
        """The enhancers ``options`` ask for, their models loaded from
        ``sessions`` (``facefusion``: the face enhancer cuts, pastes and
        blends as FaceFusion does)."""
        face = frame = colorizer = None
        if options.face is not None or options.frame is not None:
            from faceweave.enhancers.factory import load_enhancers

            face, frame = load_enhancers(
                options, pool=sessions.open(), provider=sessions.provider, facefusion=facefusion
            )
        if options.colorizer is not None:
            from faceweave.enhancers.colorizer import FrameColorizer

            model = sessions.open().get(options.colorizer, sessions.provider)
            colorizer = FrameColorizer(model, name=options.colorizer, size=options.colorizer_size)
        return cls(
            face=face,
            frame=frame,
            face_blend=options.face_blend,
            frame_blend=options.frame_blend,
            colorizer=colorizer,
            colorizer_blend=options.colorizer_blend,
        )

    def apply(self, pixels: np.ndarray, faces: Sequence[Face], timings: dict[str, float] | None = None) -> np.ndarray:
        """The enhancers on a swapped ``(H, W, 3)`` frame: ``pixels`` itself
        when there are none, else a new frame (a frame enhancer may change
        its size)."""
        if self.face is None and self.frame is None and self.colorizer is None:
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
                frame_colorizer=self.colorizer,
                colorizer_blend=self.colorizer_blend,
            )
