"""``--swapper none``: :class:`KeepSwapper`, which keeps every face as it
is, for runs that only use the processors after the swap (a lip sync for a
dub, a face enhancer, an age modifier, a face editor, a deep swapper) on the
selected faces, with no source photo.

The pipeline does not render its faces (:attr:`FaceSwapper.keeps_faces
<faceweave.pipeline.FaceSwapper.keeps_faces>`): the frame goes to the
processors untouched.  Asked to swap, it gives the target crop back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from faceweave import names
from faceweave.swappers.base import AlignedCrop, SourceFace, SwapOutput, SwapperContext

if TYPE_CHECKING:
    from faceweave.geometry.expression import ExpressionCorrection


class KeepSwapper:
    """The swapper that swaps nothing (``name`` ``"none"``)."""

    name = names.NO_SWAPPER
    adjusts_expression = False
    batches = True

    def prepare(self) -> None:
        """Nothing to load."""

    def prepare_source(self, source: SourceFace) -> SourceFace:
        return source

    def swap(
        self, source: SourceFace, target: AlignedCrop, *, correction: ExpressionCorrection | None = None
    ) -> SwapOutput:
        """The target crop as it is: the face kept, nothing covered or changed."""
        side = target.pixels.shape[0]
        nothing = np.zeros((side, side), np.float32)
        return SwapOutput(
            face=target.pixels, background=target.pixels, coverage=nothing, mesh=target.mesh, changed=nothing
        )

    def swap_batch(self, source: SourceFace, targets: Sequence[AlignedCrop]) -> list[SwapOutput]:
        return [self.swap(source, target) for target in targets]

    def close(self) -> None:
        """Nothing to release."""


def keep_swapper(context: SwapperContext) -> KeepSwapper:
    """The factory of ``--swapper none``."""
    return KeepSwapper()
