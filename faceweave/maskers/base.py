"""The mask model protocols, their constants and the registry.

An occluder (:class:`FaceOccluder`) looks at the target face on the
swapper's template crop and says where the face itself shows (1) and where
something is in front of it (0); a face parser (:class:`FaceParser`) looks
at the swapped face and says which pixels belong to the chosen regions.
Both take a loaded model (the caller owns its session) and return a mask
of the crop's side, before FaceFusion's smoothing
(:func:`faceweave.compositing.facefusion.smooth_occlusion`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from faceweave import names
from faceweave.errors import InvalidOptionError
from faceweave.models.catalog import find_spec
from faceweave.runtime.model import RunnableModel

#: FaceFusion's region names (``facefusion.choices.face_mask_region_set``) ->
#: the CelebAMask-HQ class a BiSeNet parser labels them with
REGIONS: Mapping[str, int] = names.registered(
    "face parser region",
    names.PARSER_REGIONS,
    {
        "skin": 1,
        "left-eyebrow": 2,
        "right-eyebrow": 3,
        "left-eye": 4,
        "right-eye": 5,
        "glasses": 6,
        "nose": 10,
        "mouth": 11,
        "upper-lip": 12,
        "lower-lip": 13,
    },
)


@dataclass(frozen=True)
class MaskerSpec:
    """A mask model: its name (the catalog's), the side its input is resized
    to, and the per-channel mean/std of its input on ``[0, 1]`` pixels."""

    name: str
    size: int
    mean: tuple[float, float, float] = (0.0, 0.0, 0.0)
    std: tuple[float, float, float] = (1.0, 1.0, 1.0)


def _masker(name: str) -> MaskerSpec:
    """The mask model ``name`` as the catalog describes it (its one source)."""
    model = find_spec(name)
    return MaskerSpec(name, int(model.crop_size or 0), model.mean or (0.0, 0.0, 0.0), model.std or (1.0, 1.0, 1.0))


FACE_OCCLUDERS: Mapping[str, MaskerSpec] = names.registered(
    "face occluder", names.FACE_OCCLUDERS, {name: _masker(name) for name in names.FACE_OCCLUDERS}
)
#: what ``--face-occluder`` takes: one occluder, or ``many``: all three, their minimum (FaceFusion's choices)
OCCLUDER_CHOICES: tuple[str, ...] = names.OCCLUDER_CHOICES
FACE_PARSERS: Mapping[str, MaskerSpec] = names.registered(
    "face parser", names.FACE_PARSERS, {name: _masker(name) for name in names.FACE_PARSERS}
)


@runtime_checkable
class FaceOccluder(Protocol):
    name: str

    def mask(self, crop: np.ndarray) -> np.ndarray:
        """``(S, S)`` float32 in ``[0, 1]`` (1: the face shows) for an
        ``(S, S, 3)`` uint8 RGB template crop of the target face."""
        ...


@runtime_checkable
class FaceParser(Protocol):
    name: str

    def mask(self, face: np.ndarray, regions: Sequence[str]) -> np.ndarray:
        """``(S, S)`` float32, 1 where an ``(S, S, 3)`` RGB face (uint8 or
        float in ``[0, 255]``) is one of ``regions`` (names of :data:`REGIONS`)."""
        ...


def available_face_occluders() -> list[str]:
    return sorted(FACE_OCCLUDERS)


def occluder_models(choice: str) -> tuple[str, ...]:
    """The occluder models an ``--face-occluder`` choice runs: ``many`` is
    every registered one (their masks combined by minimum, as FaceFusion)."""
    if choice == "many":
        return tuple(sorted(FACE_OCCLUDERS))
    _spec(FACE_OCCLUDERS, choice, "face occluder")
    return (choice,)


def available_face_parsers() -> list[str]:
    return sorted(FACE_PARSERS)


def check_regions(regions: Iterable[str]) -> tuple[str, ...]:
    """``regions`` as a tuple, each a name of :data:`REGIONS`; raises
    :class:`InvalidOptionError` naming the first unknown one and the accepted."""
    chosen = tuple(regions)
    problem = names.region_problem(chosen)
    if problem is not None:
        raise InvalidOptionError(problem)
    return chosen


def _spec(registry: Mapping[str, MaskerSpec], name: str, what: str) -> MaskerSpec:
    if name not in registry:
        raise InvalidOptionError(f"unknown {what} {name!r}; available: {', '.join(sorted(registry))}")
    return registry[name]


def create_face_occluder(name: str, model: RunnableModel) -> FaceOccluder:
    """The registered occluder ``name`` around a loaded ``model`` (raises
    :class:`InvalidOptionError` for an unknown name, :class:`ModelSignatureError`
    for a model without the input it needs)."""
    from faceweave.maskers.xseg import XsegOccluder

    factory: Callable[..., FaceOccluder] = XsegOccluder
    return factory(model, spec=_spec(FACE_OCCLUDERS, name, "face occluder"))


def create_face_parser(name: str, model: RunnableModel) -> FaceParser:
    """The registered face parser ``name`` around a loaded ``model``."""
    from faceweave.maskers.bisenet import BiSeNetParser

    factory: Callable[..., FaceParser] = BiSeNetParser
    return factory(model, spec=_spec(FACE_PARSERS, name, "face parser"))
