"""A target picture's faces, and which of them are swapped: :class:`TargetFaces`.

Finding is the analyser's work and choosing the pure functions'
(:mod:`faceweave.selection`); this component puts them in order for the
options of one swapper, and skips work the options make needless (the tiled
small-face pass when only the largest face is swapped, embeddings unless a
reference face decides).
"""

from __future__ import annotations

import numpy as np

from faceweave.analysis import FaceAnalyser
from faceweave.errors import NoFaceError
from faceweave.options import SwapOptions
from faceweave.selection import order_faces, select_faces
from faceweave.timing import timed
from faceweave.types import Face, Image


class TargetFaces:
    """Finds and selects the faces of target pictures with ``analyser``."""

    def __init__(self, analyser: FaceAnalyser, options: SwapOptions) -> None:
        self.analyser = analyser
        self.options = options

    def find(self, pixels: np.ndarray, timings: dict[str, float] | None = None) -> list[Face]:
        """The target's faces.  When only the largest face will be swapped the
        tiled small-face pass is skipped, unless the quick pass finds nothing."""
        sel = self.options.selection
        only_largest = sel.mode == "one" and sel.order == "large-small" and sel.min_face_size == 0
        if only_largest and self.options.analysis.small_faces:
            found = self.analyser.analyse(pixels, small_faces=False, timings=timings)
            if found:
                return found
        return self.analyser.analyse(pixels, timings=timings)

    def select(
        self, image: Image, timings: dict[str, float], *, reference: np.ndarray | None = None
    ) -> tuple[list[Face], list[int]]:
        """``(faces, indices)``: the faces of ``image`` in the selection order
        (with embeddings when a ``reference`` embedding is given) and the
        indices into them of the faces to swap.

        Raises:
            NoFaceError: no face in the target (``role="target"``).
            NoMatchingFaceError: no face meets the selection.
        """
        found = self.find(image.pixels, timings)
        if not found:
            raise NoFaceError(f"no face found in target image {image.label}", role="target", path=image.path)
        faces = [found[i] for i in order_faces(found, self.options.selection.order)]
        if reference is not None:
            with timed(timings, "embed"):
                faces = [self.analyser.embed(image.pixels, f) for f in faces]
        return faces, select_faces(faces, self.options.selection, reference=reference)
