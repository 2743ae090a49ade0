"""FaceFusion's mask models as components: the occluders (XSeg) that say
where something is in front of a face, and the face parsers (BiSeNet) that
label a face's regions (skin, brows, eyes, glasses, nose, mouth, lips).

:mod:`~faceweave.maskers.base` holds the protocols and the registry,
:mod:`~faceweave.maskers.processing` FaceFusion's pre/post-processing as
pure functions, :mod:`~faceweave.maskers.xseg` and
:mod:`~faceweave.maskers.bisenet` one class per model kind, and
:mod:`~faceweave.maskers.models` the models one swap asked for.
"""

from faceweave.maskers.base import (
    FACE_OCCLUDERS,
    FACE_PARSERS,
    OCCLUDER_CHOICES,
    REGIONS,
    FaceOccluder,
    FaceParser,
    MaskerSpec,
    available_face_occluders,
    available_face_parsers,
    check_regions,
    create_face_occluder,
    create_face_parser,
    occluder_models,
)
from faceweave.maskers.models import FaceMaskModels

__all__ = [
    "FACE_OCCLUDERS",
    "FACE_PARSERS",
    "OCCLUDER_CHOICES",
    "REGIONS",
    "FaceMaskModels",
    "FaceOccluder",
    "FaceParser",
    "MaskerSpec",
    "available_face_occluders",
    "available_face_parsers",
    "check_regions",
    "create_face_occluder",
    "create_face_parser",
    "occluder_models",
]
