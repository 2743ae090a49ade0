"""The mask models one swap asked for: :class:`FaceMaskModels`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from faceweave.compositing.facefusion import smooth_occlusion
from faceweave.maskers.base import FaceOccluder, FaceParser, check_regions, create_face_occluder, create_face_parser
from faceweave.timing import timed

if TYPE_CHECKING:
    from faceweave.options import MaskOptions
    from faceweave.sessions import ModelSessions


class FaceMaskModels:
    """An occluder and a face parser (either may be off) and the parser's
    regions.  The models are owned by the caller's sessions."""

    def __init__(
        self,
        occluder: FaceOccluder | None = None,
        parser: FaceParser | None = None,
        regions: Sequence[str] = (),
    ) -> None:
        self.occluder = occluder
        self.parser = parser
        self.regions = check_regions(regions) if parser is not None else tuple(regions)

    @classmethod
    def load(cls, masks: MaskOptions, sessions: ModelSessions) -> FaceMaskModels:
        """The models ``masks.face_occluder`` and ``masks.face_parser`` name,
        loaded from ``sessions`` (none opened when both are off).  A missing
        file (looked for before either is loaded) raises :class:`~faceweave.errors.ModelNotFoundError` saying how
        to get it; the sessions' owner closes what was loaded."""
        if masks.face_occluder is None and masks.face_parser is None:
            return cls()
        pool = sessions.open()
        provider = sessions.provider
        for name in (masks.face_occluder, masks.face_parser):  # both files there before either loads
            if name is not None and pool.store.locate(pool.store.spec(name)) is None:
                pool.store.resolve(name)  # raises, saying how to get it
        occluder = parser = None
        if masks.face_occluder is not None:
            occluder = create_face_occluder(masks.face_occluder, pool.get(masks.face_occluder, provider))
        if masks.face_parser is not None:
            parser = create_face_parser(masks.face_parser, pool.get(masks.face_parser, provider))
        return cls(occluder, parser, masks.face_parser_regions)

    @property
    def active(self) -> bool:
        """Whether any model is on."""
        return self.occluder is not None or self.parser is not None

    def occluded(self, target: np.ndarray, timings: dict[str, float]) -> np.ndarray | None:
        """The occluder's raw ``(S, S)`` mask of the target template crop
        (1: the face shows; not smoothed), or ``None`` when it is off."""
        if self.occluder is None:
            return None
        with timed(timings, "occluder"):
            return self.occluder.mask(target)

    def region(self, face: np.ndarray, timings: dict[str, float]) -> np.ndarray | None:
        """The parser's regions of the swapped template face, smoothed as
        FaceFusion smooths its region mask, or ``None`` when it is off."""
        if self.parser is None:
            return None
        with timed(timings, "parser"):
            return smooth_occlusion(self.parser.mask(face, self.regions))
