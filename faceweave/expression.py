"""The expression check of a photo's new face: :class:`ExpressionChecker`.

The new geometry has the target's mouth and eye ratios exactly, but the eye
reads them off the texture: a source's smile crease that continues the line
of the lips reads as a wider mouth, a moustache over the corners as a
narrower one, heavy lids as half-closed eyes.  The checker composites the
new face (without the occlusion test, a third of the cost; the lips and lids
read the same), measures it again with the face mesh, and while a ratio
(mouth width, mouth opening, eye opening, over the eye distance) reads more
than :data:`EXPRESSION_TOLERANCE` away from the target's, has the swapper
make the face again with its lips and lids changed to make up for it
(:func:`faceweave.geometry.expression.next_correction`).
"""

from __future__ import annotations

from faceweave.analysis import FaceAnalyser, mesh_box
from faceweave.compositing.colour import ColourMatch
from faceweave.compositing.composite import composite
from faceweave.compositing.skintone import skin_tone_steps
from faceweave.geometry.expression import ExpressionCorrection, ExpressionRatios, expression_ratios, next_correction
from faceweave.options import SwapOptions
from faceweave.swappers import AlignedCrop, SourceFace, SwapOutput, Swapper
from faceweave.timing import timed

#: a ratio (over the eye distance) read this far from the target's is
#: corrected, with this gain (the reading follows the geometry less than one
#: to one), in at most this many rounds; the eyes too
EXPRESSION_TOLERANCE = 0.01
EXPRESSION_GAIN = 1.7
EXPRESSION_ROUNDS = 2
#: the face is looked at again after a correction only when a ratio read
#: this far off before it (a wide smile crease on a closed mouth, heavy
#: lids): one correction brings a small miss within the tolerance, a large
#: one only part of the way.  On the judge's photo pairs about one face in
#: five reads this far off (at 0.02 two in three did, for little more gain
#: and a look and a swap more on most photos)
EXPRESSION_RECHECK = 0.045
EXPRESSION_EYES = True
#: faces smaller than this (pixels in the photo) are not checked: their mesh
#: reads too coarsely to correct by, and a correction could not be seen
EXPRESSION_MIN_FACE = 80


class ExpressionChecker:
    """Looks at a new face and corrects how its expression reads.

    ``analyser``: whose face mesh reads the result; ``options``: the masks
    and shading of the look composite.  A look costs a composite and a mesh
    inference, a correction one more swap."""

    def __init__(self, analyser: FaceAnalyser, options: SwapOptions) -> None:
        self.analyser = analyser
        self.options = options
        self._look_masks = options.masks.model_copy(update={"occlusion": False})
        self._skin_tone = skin_tone_steps(options.skin_tone)

    def wanted(self, face_size: float) -> bool:
        """Whether a photo's face of ``face_size`` pixels is checked at all."""
        return self.options.expression_check and face_size >= EXPRESSION_MIN_FACE

    def check(
        self,
        swapper: Swapper,
        crop: AlignedCrop,
        source: SourceFace,
        out: SwapOutput,
        timings: dict[str, float],
        colour: ColourMatch | None = None,
    ) -> SwapOutput:
        """The output to use: ``out``, or the face ``swapper`` made again with
        a correction, at most :data:`EXPRESSION_ROUNDS` times.  Only swappers
        that declare ``adjusts_expression`` (the mesh swapper) are checked."""
        if not swapper.adjusts_expression:
            return out
        try:
            want = expression_ratios(crop.mesh)
        except ValueError:  # a degenerate mesh: nothing to correct against
            return out
        correction = ExpressionCorrection()
        for _ in range(EXPRESSION_ROUNDS):
            with timed(timings, "expression"):
                got = self._read(crop, out, colour)
            if got is None:
                break
            step = next_correction(
                correction, want, got, tolerance=EXPRESSION_TOLERANCE, gain=EXPRESSION_GAIN, eyes=EXPRESSION_EYES
            )
            if step is None:
                break
            correction = step
            with timed(timings, "swap"):
                out = swapper.swap(source, crop, correction=correction)
            if _largest_gap(want, got) <= EXPRESSION_RECHECK:
                break
        return out

    def _read(self, crop: AlignedCrop, out: SwapOutput, colour: ColourMatch | None) -> ExpressionRatios | None:
        """The ratios the face mesh reads off ``out`` composited into the
        crop; ``None`` when it finds no face there or reads a degenerate one."""
        look = composite(
            crop,
            out,
            mask_options=self._look_masks,
            shading=self.options.shading,
            colour=colour,
            skin_tone=self._skin_tone,
        )
        seen = self.analyser.mesher.landmarks(look.pixels, mesh_box(out.mesh))
        try:
            return expression_ratios(seen) if seen is not None else None
        except ValueError:
            return None


def _largest_gap(want: ExpressionRatios, got: ExpressionRatios) -> float:
    """The largest difference between the wanted and the read ratios."""
    return max(abs(a - b) for a, b in zip(want.as_tuple(), got.as_tuple(), strict=True))
