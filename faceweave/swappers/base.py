"""The swapper protocol, the values it exchanges, and the registry.

A swapper takes a prepared source and an aligned target crop and returns a
crop; cutting the crop, masks, colour, blending and paste-back are done by
the pipeline with pure functions (see :mod:`faceweave.pipeline`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from faceweave.errors import InvalidOptionError
from faceweave.types import Face


@dataclass(frozen=True, eq=False)
class AlignedCrop:
    """A square working crop around one face.

    ``pixels`` ``(S, S, 3)`` uint8 RGB; ``matrix`` ``(2, 3)`` image->crop;
    ``mesh`` ``(478, 3)`` the face mesh in crop pixels; ``face_size`` the
    face's size in crop pixels."""

    pixels: np.ndarray
    matrix: np.ndarray
    mesh: np.ndarray
    face_size: float

    @property
    def size(self) -> tuple[int, int]:
        return int(self.pixels.shape[1]), int(self.pixels.shape[0])


@dataclass(frozen=True, eq=False)
class SourceFace:
    """A source photo's face, cut into a working crop, plus what the swapper
    precomputed about it (``prepared``, swapper-specific)."""

    index: int
    path: str | None
    face: Face
    crop: AlignedCrop
    prepared: Any = None
    #: ``(S, S)`` float32 in ``[0, 1]``: where the source crop shows bare face
    #: (low under hair, hands, glasses); ``None`` when not computed
    clean: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class SwapOutput:
    """What a swapper returns, all in the target crop's pixels ``(S, S)``.

    ``face``: uint8 RGB, the new face (source identity) where ``coverage`` > 0;
    ``background``: uint8 RGB, the target crop, possibly reshaped to the new
    face outline; ``coverage``: float32 ``[0, 1]``; ``mesh``: ``(478, 3)``
    the face geometry of the output; ``changed``: float32 ``[0, 1]``, where
    ``background`` differs from the target crop; ``source_clean``: float32
    ``[0, 1]`` or ``None``, the source's clean map carried onto the output
    (low where the source face was covered by hair, a hand or glasses)."""

    face: np.ndarray
    background: np.ndarray
    coverage: np.ndarray
    mesh: np.ndarray
    changed: np.ndarray
    source_clean: np.ndarray | None = None


@runtime_checkable
class Swapper(Protocol):
    name: str

    def prepare(self) -> None:
        """Load weights (if any) and warm up."""

    def prepare_source(self, source: SourceFace) -> SourceFace:
        """Precompute what the swapper needs about a source, once per run."""

    def swap(self, source: SourceFace, target: AlignedCrop) -> SwapOutput:
        """Put the source identity onto the target crop."""

    def close(self) -> None:
        """Release resources."""


def _registry() -> dict[str, Callable[..., Swapper]]:
    """Swapper factories by name.  ``mesh`` takes ``shape_transfer``; the
    neural ones take ``pool`` (a :class:`~faceweave.runtime.SessionPool`),
    ``provider`` and ``pixel_boost`` (see
    :func:`faceweave.swappers.neural.factory.load_neural_swapper`)."""
    from functools import partial

    from faceweave.swappers.mesh import MeshSwapper
    from faceweave.swappers.neural import NEURAL_SWAPPERS
    from faceweave.swappers.neural.factory import load_neural_swapper

    factories: dict[str, Callable[..., Swapper]] = {"mesh": MeshSwapper}
    factories.update({name: partial(load_neural_swapper, name) for name in NEURAL_SWAPPERS})
    return factories


def available_swappers() -> list[str]:
    return sorted(_registry())


def create_swapper(name: str, **kwargs: Any) -> Swapper:
    """Build a registered swapper by name."""
    factories = _registry()
    if name not in factories:
        raise InvalidOptionError(f"unknown swapper {name!r}; available: {', '.join(sorted(factories))}")
    return factories[name](**kwargs)
