"""The names a user chooses from: detectors, landmarkers, mask models and
areas, enhancers, swappers and execution providers.

A leaf: it imports nothing of faceweave, so :mod:`faceweave.options` can
validate a choice without importing the code that implements it (which
would pull the whole model stack into every option check), and every
implementation registers against it with :func:`registered`, which refuses
a registry whose names differ from the ones here (at import, so a name
added to one side only fails every test at once).  The facts of each model
(template, size, normalisation, tensors) are the catalog's
(:mod:`faceweave.models.catalog`); only the names and the choices that
option validation needs are here.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TypeVar

# -- face analysis ------------------------------------------------------------
#: the ONNX face detectors (FaceFusion's), each also its catalog entry
ONNX_FACE_DETECTORS: tuple[str, ...] = ("yolo_face", "scrfd", "retinaface", "yunet")
#: the detectors FaceFusion's ``many`` runs on every frame, in its order
MANY_DETECTORS: tuple[str, ...] = ("retinaface", "scrfd", "yolo_face")
#: every name ``--face-detector`` takes, the default first
FACE_DETECTORS: tuple[str, ...] = ("mediapipe", *ONNX_FACE_DETECTORS, "many")
_ANCHOR_SIZES = (160, 320, 480, 512, 640)
#: the square sides each ONNX detector's graph takes (``--face-detector-size``)
DETECTOR_SIZES: Mapping[str, tuple[int, ...]] = MappingProxyType(
    {"yolo_face": (640,), "scrfd": _ANCHOR_SIZES, "retinaface": _ANCHOR_SIZES, "yunet": (640,), "many": (640,)}
)
#: every side some ONNX detector takes (what an unknown detector is told)
ANY_DETECTOR_SIZE: tuple[int, ...] = _ANCHOR_SIZES
#: the angles a frame may also be turned by to look for faces (``--face-detector-angles``)
DETECTOR_ANGLES: tuple[int, ...] = (0, 90, 180, 270)
#: every name ``--face-landmarker`` takes, the default first
FACE_LANDMARKERS: tuple[str, ...] = ("mediapipe", "2dfan4", "peppa_wutz", "many", "fan_68_5")
#: the catalog entries each landmarker loads
LANDMARKER_MODELS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "mediapipe": (),
        "2dfan4": ("2dfan4", "fan_68_5"),
        "peppa_wutz": ("peppa_wutz", "fan_68_5"),
        "many": ("2dfan4", "peppa_wutz", "fan_68_5"),
        "fan_68_5": ("fan_68_5",),
    }
)

# -- masks --------------------------------------------------------------------
#: FaceFusion's occluder models (XSeg)
FACE_OCCLUDERS: tuple[str, ...] = ("xseg_1", "xseg_2", "xseg_3")
#: what ``--face-occluder`` takes: one occluder, or ``many``: all three, their minimum
OCCLUDER_CHOICES: tuple[str, ...] = ("many", *FACE_OCCLUDERS)
#: FaceFusion's face parser models (BiSeNet)
FACE_PARSERS: tuple[str, ...] = ("bisenet_resnet_18", "bisenet_resnet_34")
#: FaceFusion's face parser regions (``facefusion.choices.face_mask_region_set``)
PARSER_REGIONS: tuple[str, ...] = (
    "skin",
    "left-eyebrow",
    "right-eyebrow",
    "left-eye",
    "right-eye",
    "glasses",
    "nose",
    "mouth",
    "upper-lip",
    "lower-lip",
)
#: FaceFusion's face mask areas (hulls of the 68 landmarks)
FACE_MASK_AREAS: tuple[str, ...] = ("upper-face", "lower-face", "mouth")

# -- enhancers ------------------------------------------------------------------
FACE_ENHANCERS: tuple[str, ...] = (
    "gfpgan_1.2",
    "gfpgan_1.3",
    "gfpgan_1.4",
    "codeformer",
    "gpen_bfr_256",
    "gpen_bfr_512",
    "gpen_bfr_1024",
    "gpen_bfr_2048",
    "restoreformer_plus_plus",
)
#: Real-ESRGAN (faceweave's tiling), each also as ``_fp16``
REAL_ESRGAN: tuple[str, ...] = tuple(f"real_esrgan_x{s}{fp}" for s in (2, 4, 8) for fp in ("", "_fp16"))
#: FaceFusion 3.x's frame enhancers beyond Real-ESRGAN
FACEFUSION_FRAME_ENHANCERS: tuple[str, ...] = (
    "clear_reality_x4",
    "face_dat_x4",
    "nomos8k_sc_x4",
    "real_hatgan_x4",
    "real_web_photo_x4",
    "realistic_rescaler_x4",
    "remacri_x4",
    "siax_x4",
    "span_kendata_x4",
    "swin2_sr_x4",
    "tghq_face_x8",
    "ultra_sharp_x4",
    "ultra_sharp_2_x4",
)
FRAME_ENHANCERS: tuple[str, ...] = (*REAL_ESRGAN, *FACEFUSION_FRAME_ENHANCERS)
#: FaceFusion's frame colorizers: name -> its family (``ddcolor``: the model gives the a, b of CIELAB;
#: ``deoldify``: RGB)
FRAME_COLORIZERS: Mapping[str, str] = MappingProxyType(
    {
        "ddcolor": "ddcolor",
        "ddcolor_artistic": "ddcolor",
        "deoldify": "deoldify",
        "deoldify_artistic": "deoldify",
        "deoldify_stable": "deoldify",
    }
)
#: FaceFusion's background removers: name -> its family (how its input is made and its output read)
BACKGROUND_REMOVERS: Mapping[str, str] = MappingProxyType(
    {
        "ben_2": "ben",
        "birefnet_general": "birefnet",
        "birefnet_portrait": "birefnet",
        "corridor_key_1024": "corridor_key",
        "corridor_key_2048": "corridor_key",
        "isnet_general": "isnet",
        "modnet": "modnet",
        "ormbg": "ormbg",
        "rmbg_1.4": "rmbg",
        "rmbg_2.0": "rmbg",
        "silueta": "silueta",
        "u2net_cloth": "u2net_cloth",
        "u2net_general": "u2net",
        "u2net_human": "u2net",
        "u2netp": "u2netp",
    }
)
#: FaceFusion's lip syncers: name -> its family (``wav2lip``: the lower face at 96 px and the mel window in;
#: ``edtalk``: the aligned face at 256 px, the window and a weight in)
LIP_SYNCERS: Mapping[str, str] = MappingProxyType(
    {"wav2lip_gan_96": "wav2lip", "wav2lip_96": "wav2lip", "edtalk_256": "edtalk"}
)
#: FaceFusion's expression restorers (LivePortrait: a feature extractor, a motion extractor and a generator)
EXPRESSION_RESTORERS: tuple[str, ...] = ("live_portrait",)
#: the parts of the face whose expression the restorer brings back
EXPRESSION_RESTORER_AREAS: tuple[str, ...] = ("upper-face", "lower-face")
#: LivePortrait's models, by part (catalog names: FaceFusion's file names)
LIVE_PORTRAIT: Mapping[str, str] = MappingProxyType(
    {
        "feature_extractor": "live_portrait_feature_extractor",
        "motion_extractor": "live_portrait_motion_extractor",
        "eye_retargeter": "live_portrait_eye_retargeter",
        "lip_retargeter": "live_portrait_lip_retargeter",
        "stitcher": "live_portrait_stitcher",
        "generator": "live_portrait_generator",
    }
)
#: the LivePortrait parts the expression restorer runs (the face editor runs them all)
RESTORER_PARTS: tuple[str, ...] = ("feature_extractor", "motion_extractor", "generator")
#: FaceFusion's face editors
FACE_EDITORS: tuple[str, ...] = ("live_portrait",)
#: FaceFusion's age modifiers: name -> its family (``fran``: the face at 1024 px and its age from the face
#: classifier in; ``styleganex``: the face at 256 px and the head with its surroundings at 384 px in)
AGE_MODIFIERS: Mapping[str, str] = MappingProxyType({"fran": "fran", "styleganex_age": "styleganex"})
#: FaceFusion's face classifier (gender, age and race of a face), which FRAN's age comes from
FACE_CLASSIFIER = "fairface"
#: FaceFusion's voice extractors, which keep the speech of the lip syncer's audio (the first is the default)
VOICE_EXTRACTORS: tuple[str, ...] = ("kim_vocal_2", "kim_vocal_1", "uvr_mdxnet")
#: the square sides a frame colorizer may run at (FaceFusion's ``frame_colorizer_sizes``)
FRAME_COLORIZER_SIZES: tuple[int, ...] = (192, 256, 384, 512)

# -- swappers -------------------------------------------------------------------
#: the classical swapper (offline, no model file)
MESH_SWAPPER = "mesh"
#: FaceFusion-compatible neural swappers that take the source as an identity embedding
EMBEDDING_SWAPPERS: tuple[str, ...] = (
    "inswapper_128",
    "inswapper_128_fp16",
    "simswap_256",
    "simswap_unofficial_512",
    "hyperswap_1a_256",
    "hyperswap_1b_256",
    "hyperswap_1c_256",
    "hififace_unofficial_256",
    "ghost_1_256",
    "ghost_2_256",
    "ghost_3_256",
)
#: neural swappers that take the source as an image crop
IMAGE_SWAPPERS: tuple[str, ...] = ("blendswap_256", "uniface_256")
NEURAL_SWAPPERS: tuple[str, ...] = (*EMBEDDING_SWAPPERS, *IMAGE_SWAPPERS)
#: the swapper that keeps every face (the processors after the swap run alone, with no source photo)
NO_SWAPPER = "none"
#: every registered swapper, sorted (as the options' messages list them)
SWAPPERS: tuple[str, ...] = tuple(sorted((MESH_SWAPPER, NO_SWAPPER, *NEURAL_SWAPPERS)))

# -- runtime --------------------------------------------------------------------
#: ``--execution-provider``: faceweave's names (ONNX Runtime's are the runtime's)
EXECUTION_PROVIDERS: tuple[str, ...] = (
    "cpu",
    "cuda",
    "tensorrt",
    "cann",
    "openvino",
    "coreml",
    "directml",
    "rocm",
    "migraphx",
)

_V = TypeVar("_V")


def unknown(what: str, value: object, choices: tuple[str, ...], *, listed: str = "one of") -> str:
    """The one-line message for an unknown choice: ``unknown face detector
    'x'; one of mediapipe, ...`` (``listed``: the words before the list)."""
    return f"unknown {what} {value!r}; {listed} {', '.join(choices)}"


def detector_models(name: str) -> tuple[str, ...]:
    """The ONNX detectors (catalog entries) the choice ``name`` runs: none
    for mediapipe, the three of :data:`MANY_DETECTORS` for ``many``."""
    if name == "many":
        return MANY_DETECTORS
    return (name,) if name in ONNX_FACE_DETECTORS else ()


def region_problem(regions: tuple[str, ...]) -> str | None:
    """What is wrong with a choice of face parser ``regions`` (none, or the
    first unknown one, with the accepted names); ``None`` when nothing is."""
    if not regions:
        return f"face parser regions: choose at least one of {', '.join(PARSER_REGIONS)}"
    for name in regions:
        if name not in PARSER_REGIONS:
            return f"unknown face parser region {name!r}; one of {', '.join(PARSER_REGIONS)}"
    return None


def registered(group: str, names: tuple[str, ...], registry: Mapping[str, _V]) -> Mapping[str, _V]:
    """``registry`` made read-only, when its keys are exactly ``names`` (the
    ``group`` of this module); else :class:`LookupError` saying which name
    one side lacks.  Implementations build their registries through it."""
    missing = [n for n in names if n not in registry]
    extra = [n for n in registry if n not in names]
    if missing or extra:
        raise LookupError(
            f"the {group} registry and faceweave.names disagree: "
            f"not registered {missing}, registered but not named {extra}"
        )
    return MappingProxyType(dict(registry))
