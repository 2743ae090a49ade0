"""The mask models one swap asked for: :class:`FaceMaskModels`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from faceweave.compositing.facefusion import smooth_occlusion
from faceweave.maskers.base import (
    FaceOccluder,
    FaceParser,
    check_regions,
    create_face_occluder,
    create_face_parser,
    occluder_models,
)
from faceweave.models.needed import NeededModel, check_present
from faceweave.timing import timed

if TYPE_CHECKING:
    from faceweave.options import MaskOptions
    from faceweave.sessions import ModelSessions


class FaceMaskModels:
    """The occluders (none, one, or several whose masks combine by minimum:
    FaceFusion's ``many``), a face parser (or none) and the parser's
    regions.  The models are owned by the caller's sessions."""

    def __init__(
        self,
        occluders: Sequence[FaceOccluder] = (),
        parser: FaceParser | None = None,
        regions: Sequence[str] = (),
    ) -> None:
        self.occluders = tuple(occluders)
        self.parser = parser
        self.regions = check_regions(regions) if parser is not None else tuple(regions)

    @classmethod
    def load(cls, masks: MaskOptions, sessions: ModelSessions) -> FaceMaskModels:
        """The models ``masks.face_occluder`` (``many``: the three XSeg) and
        ``masks.face_parser`` name,
        loaded from ``sessions`` (none opened when both are off).  A missing
        file (looked for before either is loaded) raises :class:`~faceweave.errors.ChosenModelMissingError` saying how
        to get it; the sessions' owner closes what was loaded."""
        if masks.face_occluder is None and masks.face_parser is None:
            return cls()
        pool = sessions.open()
        provider = sessions.provider
        names = occluder_models(masks.face_occluder) if masks.face_occluder is not None else ()
        parser_names = (masks.face_parser,) if masks.face_parser is not None else ()
        roles = [NeededModel(name, f"face occluder {masks.face_occluder}") for name in names]
        roles += [NeededModel(name, f"face parser {name}") for name in parser_names]
        check_present(pool.store, roles)  # every file there before any loads
        occluders = [create_face_occluder(name, pool.get(name, provider)) for name in names]
        parser = None
        if masks.face_parser is not None:
            parser = create_face_parser(masks.face_parser, pool.get(masks.face_parser, provider))
        return cls(occluders, parser, masks.face_parser_regions)

    @property
    def active(self) -> bool:
        """Whether any model is on."""
        return bool(self.occluders) or self.parser is not None

    def occluded(self, target: np.ndarray, timings: dict[str, float]) -> np.ndarray | None:
        """The occluders' raw ``(S, S)`` mask of the target template crop
        (1: the face shows; the minimum over the occluders, not smoothed), or
        ``None`` when none is on."""
        if not self.occluders:
            return None
        with timed(timings, "occluder"):
            return np.minimum.reduce([occluder.mask(target) for occluder in self.occluders])

    def region(self, face: np.ndarray, timings: dict[str, float]) -> np.ndarray | None:
        """The parser's regions of the swapped template face, smoothed as
        FaceFusion smooths its region mask, or ``None`` when it is off."""
        if self.parser is None:
            return None
        with timed(timings, "parser"):
            return smooth_occlusion(self.parser.mask(face, self.regions))
