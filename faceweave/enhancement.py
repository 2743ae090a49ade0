"""The optional steps after a swap: :class:`Enhancers`.

Which enhancers run, and how much of their result is kept, come from
:class:`~faceweave.options.EnhancerOptions`; their models come from the
owner's :class:`~faceweave.sessions.ModelSessions` (so the enhancers hold
nothing to close).  With none asked for, nothing is imported or loaded.

The order: the face enhancer, the background remover, the frame colorizer,
the frame enhancer.  The background remover's mask comes back beside the
pixels (:meth:`Enhancers.finish`), for a photo's alpha.
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
    from faceweave.enhancers import BackgroundRemover, FaceEnhancer, FrameColorizer, FrameEnhancer


@dataclass(frozen=True)
class Finished:
    """A swapped frame after the enhancers: ``pixels`` (a frame enhancer
    may have scaled them) and the background remover's foreground ``mask``
    (uint8, at the size the remover saw the frame; ``None`` without one)."""

    pixels: np.ndarray
    mask: np.ndarray | None = None


@dataclass(frozen=True)
class Enhancers:
    """The face enhancer, background remover, frame colorizer and frame
    enhancer of a swap (``None``: not used), applied in that order."""

    face: FaceEnhancer | None = None
    frame: FrameEnhancer | None = None
    face_blend: float = 0.8
    frame_blend: float = 1.0
    colorizer: FrameColorizer | None = None
    colorizer_blend: float = 1.0
    background: BackgroundRemover | None = None

    @classmethod
    def load(cls, options: EnhancerOptions, sessions: ModelSessions, *, facefusion: bool = False) -> Enhancers:
        """The enhancers ``options`` ask for, their models loaded from
        ``sessions`` (``facefusion``: the face enhancer cuts, pastes and
        blends as FaceFusion does)."""
        face = frame = colorizer = background = None
        if options.face is not None or options.frame is not None:
            from faceweave.enhancers.factory import load_enhancers

            face, frame = load_enhancers(
                options, pool=sessions.open(), provider=sessions.provider, facefusion=facefusion
            )
        if options.background is not None:
            from faceweave.enhancers.background import BackgroundRemover

            model = sessions.open().get(options.background, sessions.provider)
            background = BackgroundRemover(
                model, name=options.background, fill=options.background_fill, despill=options.background_despill
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
            background=background,
        )

    @property
    def any(self) -> bool:
        """Whether any step runs."""
        return any(step is not None for step in (self.face, self.frame, self.colorizer, self.background))

    def apply(self, pixels: np.ndarray, faces: Sequence[Face], timings: dict[str, float] | None = None) -> np.ndarray:
        """The steps on a swapped ``(H, W, 3)`` frame (the background
        remover's mask left out: a video frame has no alpha): ``pixels``
        itself when there are none, else a new frame (a frame enhancer may
        change its size)."""
        return self.finish(pixels, faces, timings).pixels

    def finish(self, pixels: np.ndarray, faces: Sequence[Face], timings: dict[str, float] | None = None) -> Finished:
        """The steps on a swapped frame, and the background remover's mask."""
        if not self.any:
            return Finished(pixels)
        mask = None
        with timed({} if timings is None else timings, "enhance"):
            out = pixels
            if self.face is not None and len(faces) > 0:
                out = self.face.enhance(out, list(faces), blend=self.face_blend)
            if self.background is not None:
                removed = self.background.remove(out)
                out, mask = removed.pixels, removed.mask
            if self.colorizer is not None:
                out = self.colorizer.colorize(out, blend=self.colorizer_blend)
            if self.frame is not None:
                out = self.frame.enhance(out, blend=self.frame_blend)
        return Finished(out, mask)
