"""The swapper contract: the values it exchanges, the :class:`Swapper`
protocol with its capabilities, the :class:`SwapperContext` every factory
takes, and the registry by name.

A swapper takes a prepared source and an aligned target crop and returns a
crop; cutting the crop, masks, colour, blending and paste-back are done by
the pipeline with pure functions (see :mod:`faceweave.pipeline`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from faceweave.options import SwapOptions
from faceweave.types import MESH_POINTS, Face, Pose, checked_array

if TYPE_CHECKING:
    from faceweave.geometry.expression import ExpressionCorrection
    from faceweave.sessions import ModelSessions


def _square_side(pixels: np.ndarray, name: str) -> int:
    """The side ``S`` of an ``(S, S, ...)`` array."""
    if pixels.ndim < 2 or pixels.shape[0] != pixels.shape[1]:
        raise ValueError(f"{name}: expected a square (S, S, ...) array, got {pixels.shape}")
    return int(pixels.shape[0])


@dataclass(frozen=True, eq=False)
class AlignedCrop:
    """A square working crop around one face.

    ``pixels`` ``(S, S, 3)`` uint8 RGB; ``matrix`` ``(2, 3)`` float64
    image->crop; ``mesh`` ``(478, 3)`` float32 the face mesh in crop pixels;
    ``face_size`` the face's size in crop pixels (> 0).  Arrays are
    read-only views.  ``pose``: the face's head pose when the crop is
    known to keep it (an axis-aligned crop of a face whose pose is known),
    else ``None`` (then it is measured on ``mesh`` where needed)."""

    pixels: np.ndarray
    matrix: np.ndarray
    mesh: np.ndarray
    face_size: float
    pose: Pose | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "pixels", checked_array(self.pixels, shape=(None, None, 3), dtype=np.uint8, name="crop pixels"))
        _square_side(self.pixels, "crop pixels")
        set_(self, "matrix", checked_array(self.matrix, shape=(2, 3), dtype=np.float64, name="crop matrix"))
        set_(self, "mesh", checked_array(self.mesh, shape=(MESH_POINTS, 3), dtype=np.float32, name="crop mesh"))
        if not self.face_size > 0:
            raise ValueError(f"crop face_size must be positive; got {self.face_size}")

    @property
    def size(self) -> tuple[int, int]:
        return int(self.pixels.shape[1]), int(self.pixels.shape[0])


class Precomputed:
    """What a swapper precomputes about a source face, once per source: each
    swapper has its own frozen subclass (the mesh swapper's texture
    coordinates, a neural swapper's source tensor)."""

    __slots__ = ()


@dataclass(frozen=True, eq=False)
class SourceFace:
    """A source photo's face, cut into a working crop.

    ``index``: the photo's place in the list of sources; ``prepared``: what
    the swapper precomputed about it (:meth:`Swapper.prepare_source`), or
    ``None`` before that; ``clean`` ``(S, S)`` float32 in ``[0, 1]``: where
    the source crop shows bare face (low under hair, hands, glasses), or
    ``None`` when not computed; ``image`` ``(H, W, 3)`` uint8 RGB: the
    source photo itself, given to :meth:`Swapper.prepare_source` so that a
    neural swapper aligns the face from the photo at its own resolution (one
    warp, not a resample of the crop); the
    :class:`~faceweave.sources.SourceCache` drops it once prepared."""

    index: int
    path: str | None
    face: Face
    crop: AlignedCrop
    prepared: Precomputed | None = None
    clean: np.ndarray | None = None
    image: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.index < 0:
            raise ValueError(f"source index must be >= 0; got {self.index}")
        if self.clean is not None:
            side = self.crop.size[0]
            object.__setattr__(
                self, "clean", checked_array(self.clean, shape=(side, side), dtype=np.float32, name="source clean map")
            )


@dataclass(frozen=True, eq=False)
class SwapOutput:
    """What a swapper returns, all in the target crop's pixels ``(S, S)``.

    ``face``: ``(S, S, 3)`` uint8 RGB, the new face (source identity) where
    ``coverage`` > 0; ``background``: ``(S, S, 3)`` uint8 RGB, the target
    crop, possibly reshaped to the new face outline; ``coverage``: ``(S,
    S)`` float32 ``[0, 1]``; ``mesh``: ``(478, 3)`` float32, the face
    geometry of the output; ``changed``: ``(S, S)`` float32 ``[0, 1]``,
    where ``background`` differs from the target crop; ``source_clean``:
    ``(S, S)`` float32 ``[0, 1]`` or ``None``, the source's clean map carried
    onto the output (low where the source face was covered by hair, a hand
    or glasses); ``displacement``: ``(S, S, 2)`` float32 or ``None``, the
    reshaping warp as offsets in crop pixels (``background`` at ``q`` is the
    target crop at ``q + displacement[q]``), so the frame itself can be
    warped at its own resolution instead of pasting the crop's copy of it.
    Arrays are read-only views."""

    face: np.ndarray
    background: np.ndarray
    coverage: np.ndarray
    mesh: np.ndarray
    changed: np.ndarray
    source_clean: np.ndarray | None = None
    displacement: np.ndarray | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        s = _square_side(self.face, "swapped face")
        set_(self, "face", checked_array(self.face, shape=(s, s, 3), dtype=np.uint8, name="swapped face"))
        set_(self, "background", checked_array(self.background, shape=(s, s, 3), dtype=np.uint8, name="background"))
        set_(self, "coverage", checked_array(self.coverage, shape=(s, s), dtype=np.float32, name="coverage"))
        set_(self, "mesh", checked_array(self.mesh, shape=(MESH_POINTS, 3), dtype=np.float32, name="output mesh"))
        set_(self, "changed", checked_array(self.changed, shape=(s, s), dtype=np.float32, name="changed"))
        if self.source_clean is not None:
            clean = checked_array(self.source_clean, shape=(s, s), dtype=np.float32, name="source clean")
            set_(self, "source_clean", clean)
        if self.displacement is not None:
            moved = checked_array(self.displacement, shape=(s, s, 2), dtype=np.float32, name="displacement")
            set_(self, "displacement", moved)


@runtime_checkable
class Swapper(Protocol):
    """One kind of swapper.  Its capabilities are declared, not probed:

    - ``adjusts_expression``: :meth:`swap` honours ``correction`` (changes
      to the new lips and lids), so the pipeline's expression check can
      remake a face; a swapper without it raises on a correction.
    - ``batches``: :meth:`swap_batch` runs the faces of one frame in one
      inference, so the pipeline cuts every crop first and swaps them
      together; without it, the pipeline swaps face by face, each cut from
      the frame as swapped so far (:meth:`swap_batch` is then a loop)."""

    name: str
    adjusts_expression: bool
    batches: bool

    def prepare(self) -> None:
        """Load weights (if any) and warm up."""

    def prepare_source(self, source: SourceFace) -> SourceFace:
        """The source with what the swapper needs about it precomputed, once per run."""

    def swap(
        self, source: SourceFace, target: AlignedCrop, *, correction: ExpressionCorrection | None = None
    ) -> SwapOutput:
        """Put the source identity onto the target crop."""

    def swap_batch(self, source: SourceFace, targets: Sequence[AlignedCrop]) -> list[SwapOutput]:
        """:meth:`swap` for several crops of one frame, in order."""

    def close(self) -> None:
        """Release resources."""


@dataclass(frozen=True)
class SwapperContext:
    """What every swapper factory is given: the swap options (``swapper``,
    ``shape_transfer``, ``pixel_boost``, ...) and the owner's model
    sessions, opened only by a factory that loads a model."""

    options: SwapOptions
    sessions: ModelSessions


#: a registered swapper's factory
SwapperFactory = Callable[[SwapperContext], Swapper]
