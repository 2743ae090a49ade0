"""Options, validated with pydantic at the boundary.

Every option object is frozen and serialisable (``model_dump_json``), so a
saved job reproduces a run exactly.  Unknown fields are rejected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from faceweave import names
from faceweave.errors import InvalidOptionError
from faceweave.models.catalog import find_spec, takes_embedding

SelectionMode = Literal["one", "many", "reference", "index"]
FaceOrder = Literal["left-right", "right-left", "top-bottom", "bottom-top", "large-small", "small-large", "best-score"]
FACE_ORDERS: tuple[str, ...] = FaceOrder.__args__  # type: ignore[attr-defined]
SELECTION_MODES: tuple[str, ...] = SelectionMode.__args__  # type: ignore[attr-defined]
#: the face size in the working crop of video swaps unless one is given (``faceweave swap``
#: and the service's ``video_working_size``): smaller than a photo's, as every frame pays for it
VIDEO_WORKING_SIZE = 192


#: what ``SwapOptions.compositing="auto"`` means for a neural swapper: faceweave's
#: compositing measured better on tone, sharpness, blotches and the picture
#: outside the face, FaceFusion's on identity and seams (``faceweave evaluate``,
#: 20 pairs, three stand-in swappers: docs/MODELS.md, "Compositing")
AUTO_COMPOSITING: Literal["facefusion", "faceweave"] = "faceweave"


@dataclass(frozen=True)
class SelectionWords:
    """How one surface (the command line, the HTTP form) names the
    selection choices in its messages: ``mode`` is formatted with a mode."""

    reference: str
    index: str
    mode: str
    reference_file: str


CLI_WORDS = SelectionWords("--reference-face", "--face-index", "--faces {}", "--reference-face PHOTO")
FORM_WORDS = SelectionWords("a reference face", "face_index", "faces={}", "a 'reference' file")


def selection_mode(faces: str | None, *, has_reference: bool, has_indices: bool, words: SelectionWords) -> str:
    """The selection mode: ``faces`` as given, or implied by a reference face
    (``reference``) or face indices (``index``); the one rule the CLI and the
    service share.  An unknown mode is returned for :class:`SelectionOptions`
    to refuse with the list of modes."""
    if faces is None:
        if has_reference and has_indices:
            raise InvalidOptionError(f"give either {words.reference} or {words.index}, not both")
        return "reference" if has_reference else "index" if has_indices else "one"
    if faces not in SELECTION_MODES:
        return faces
    if has_reference and faces != "reference":
        raise InvalidOptionError(
            f"{words.reference} is only used with {words.mode.format('reference')}, not {words.mode.format(faces)}"
        )
    if has_indices and faces != "index":
        raise InvalidOptionError(
            f"{words.index} is only used with {words.mode.format('index')}, not {words.mode.format(faces)}"
        )
    if faces == "reference" and not has_reference:
        raise InvalidOptionError(
            f"{words.mode.format('reference')} needs {words.reference_file} of the person to replace"
        )
    return faces


class _Options(BaseModel):
    # NaN and infinity are refused: they slip past every ge/le bound
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class AnalysisOptions(_Options):
    """How faces are found and described."""

    min_confidence: float = Field(0.5, ge=0.05, le=1.0, description="detector score threshold")
    small_faces: bool = Field(True, description="tiled, upscaled second detection pass for small faces")
    max_faces: int = Field(64, ge=1, le=1000, description="at most this many faces per image")
    face_detector: str = Field(
        "mediapipe",
        description="face detector: mediapipe (offline, no model file) or FaceFusion's yolo_face, scrfd, "
        "retinaface, yunet, many (retinaface, scrfd and yolo_face together) (ONNX files, see `faceweave "
        "models list`); min_confidence is its score threshold",
    )
    face_detector_angles: tuple[int, ...] = Field(
        (0,),
        description="ONNX detectors: the angles (0, 90, 180, 270) the frame is also turned by to look for "
        "faces, as FaceFusion's face_detector_angles",
    )
    face_detector_margin: tuple[int, int, int, int] = Field(
        (0, 0, 0, 0),
        description="ONNX detectors: a zero border added to the frame before detection, percent (100: half the "
        "frame): top, right, bottom, left, as FaceFusion's face_detector_margin",
    )
    face_detector_size: int = Field(
        640,
        description="side of the square the frame is fitted into for an ONNX detector (scrfd, retinaface: "
        "160, 320, 480, 512 or 640; yolo_face, yunet: 640)",
    )
    face_landmarker: str = Field(
        "mediapipe",
        description="where the five alignment points of the neural swappers come from: mediapipe (the detector's "
        "points with an ONNX detector, else the mesh's), 2dfan4 or peppa_wutz (FaceFusion's 68 points, with "
        "fan_68_5), many (both, FaceFusion's choice) or fan_68_5 (68 points from the detector's five)",
    )
    face_landmarker_score: float = Field(
        0.5, ge=0.0, le=1.0, description="2dfan4: the confidence above which its points replace the detector's"
    )

    @field_validator("face_detector")
    @classmethod
    def _known_detector(cls, value: str) -> str:
        if value not in names.FACE_DETECTORS:
            raise ValueError(names.unknown("face detector", value, names.FACE_DETECTORS))
        return value

    @field_validator("face_landmarker")
    @classmethod
    def _known_landmarker(cls, value: str) -> str:
        if value not in names.FACE_LANDMARKERS:
            raise ValueError(names.unknown("face landmarker", value, names.FACE_LANDMARKERS))
        return value

    @field_validator("face_detector_size")
    @classmethod
    def _detector_size(cls, value: int, info: ValidationInfo) -> int:
        chosen = info.data.get("face_detector", "")
        sizes = names.DETECTOR_SIZES.get(chosen, names.ANY_DETECTOR_SIZE)
        if value not in sizes:
            name = chosen if chosen in names.DETECTOR_SIZES else "an ONNX face detector"
            raise ValueError(f"face detector size {value} for {name}; one of {', '.join(map(str, sizes))}")
        return value

    @field_validator("face_detector_angles")
    @classmethod
    def _detector_angles(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        angles = names.DETECTOR_ANGLES
        bad = [a for a in value if a not in angles]
        if bad or not value:
            got = f"{bad[0]}" if bad else "none"
            raise ValueError(f"face detector angles: {got}; one or more of {', '.join(map(str, angles))}")
        return tuple(dict.fromkeys(value))

    @field_validator("face_detector_margin")
    @classmethod
    def _detector_margin(cls, value: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        if any(not 0 <= m <= 100 for m in value):
            raise ValueError(f"face detector margin is 4 percentages in [0, 100] (top right bottom left); got {value}")
        return value

    @model_validator(mode="after")
    def _turning_needs_onnx(self) -> AnalysisOptions:
        if self.face_detector == "mediapipe" and (self.face_detector_angles != (0,) or any(self.face_detector_margin)):
            raise ValueError(
                "face detector angles and margin are for FaceFusion's detectors (--face-detector yolo_face, scrfd, "
                "retinaface, yunet or many)"
            )
        return self

    def onnx_models(self) -> tuple[str, ...]:
        """The catalog entries the chosen detector and landmarker load (none for mediapipe's)."""
        return names.detector_models(self.face_detector) + names.LANDMARKER_MODELS[self.face_landmarker]


class SelectionOptions(_Options):
    """Which target faces are swapped (FaceFusion's face selector modes)."""

    mode: SelectionMode = "one"
    order: FaceOrder = "large-small"
    indices: tuple[int, ...] = Field((0,), description="face indices (after ordering) for mode 'index'")
    reference_distance: float = Field(0.6, gt=0.0, le=2.0, description="max dlib distance to the reference face")
    min_face_size: int = Field(0, ge=0, description="ignore faces smaller than this many pixels")


class MaskOptions(_Options):
    """Masks combined by minimum; each can be switched off."""

    box: bool = True
    box_blur: float = Field(0.25, ge=0.0, le=1.0, description="feather of the box mask, fraction of the crop")
    region: bool = True
    mouth: bool = True
    occlusion: bool = Field(
        True,
        description="keep hair, glasses and other things not coloured like skin in front of the face "
        "(skin-colour test; see hands for hands)",
    )
    segmentation: bool = Field(
        False, description="also keep non-person objects in front of the face (selfie segmentation model)"
    )
    hands: bool = Field(
        False, description="also keep hands in front of the face (mediapipe hand landmarks; about 6-10 ms per face)"
    )
    face_occluder: str | None = Field(
        None,
        description="neural swappers: FaceFusion's occluder model (xseg_1, xseg_2, xseg_3, or many: all three, "
        "their minimum): where something is in front of the target face, from its template crop",
    )
    face_parser: str | None = Field(
        None,
        description="neural swappers: FaceFusion's face parser (bisenet_resnet_18, bisenet_resnet_34): the new "
        "face shows only on face_parser_regions",
    )
    face_parser_regions: tuple[str, ...] = Field(
        names.PARSER_REGIONS,
        description="the face parser's regions the new face shows on (FaceFusion's names; default all)",
    )
    face_mask_areas: tuple[str, ...] = Field(
        (),
        description="neural swappers: FaceFusion's face mask areas (upper-face, lower-face, mouth): the new face "
        "shows only inside the hull of the target's 68 landmarks of these areas (needs a 68-point face "
        "landmarker: 2dfan4 or fan_68_5); empty: off",
    )
    face_mask_blur: float = Field(
        0.3, ge=0.0, le=1.0, description="neural swappers: feather of FaceFusion's box mask, fraction of the crop"
    )
    face_mask_padding: tuple[int, int, int, int] = Field(
        (0, 0, 0, 0), description="neural swappers: FaceFusion's box mask padding, percent: top, right, bottom, left"
    )
    target_lips: Literal["video", "always", "never"] = Field(
        "video",
        description="keep the target's own lips and the skin just around them, so the mouth moves as the "
        "target's did (lip sync; a smiling source's mouth does not smile on a speaking target): in videos "
        "and live streams, always, or never",
    )

    @field_validator("face_occluder")
    @classmethod
    def _known_occluder(cls, value: str | None) -> str | None:
        if value is not None and value not in names.OCCLUDER_CHOICES:
            raise ValueError(names.unknown("face occluder", value, names.OCCLUDER_CHOICES))
        return value

    @field_validator("face_parser")
    @classmethod
    def _known_parser(cls, value: str | None) -> str | None:
        if value is not None and value not in names.FACE_PARSERS:
            raise ValueError(names.unknown("face parser", value, tuple(sorted(names.FACE_PARSERS))))
        return value

    @field_validator("face_parser_regions")
    @classmethod
    def _known_regions(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        problem = names.region_problem(tuple(value))
        if problem is not None:
            raise ValueError(problem)
        return tuple(value)

    @field_validator("face_mask_areas")
    @classmethod
    def _known_areas(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [a for a in value if a not in names.FACE_MASK_AREAS]
        if unknown:
            raise ValueError(f"unknown face mask area {unknown[0]!r}; one of {', '.join(names.FACE_MASK_AREAS)}")
        return tuple(dict.fromkeys(value))

    @field_validator("face_mask_padding")
    @classmethod
    def _padding_percent(cls, value: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        if any(not 0 <= p <= 100 for p in value):
            raise ValueError(f"face mask padding is 4 percentages in [0, 100] (top right bottom left); got {value}")
        return value


class RuntimeOptions(_Options):
    """Where neural models (ONNX) run and where their files are; the
    classical default swapper needs none of it."""

    execution_provider: str = Field(
        "cpu", description="cpu, cuda, tensorrt, cann, openvino, coreml, directml, rocm or migraphx"
    )
    device_id: int = Field(0, ge=0, le=64, description="accelerator index")
    provider_fallback: bool = Field(
        False, description="use the CPU, with a logged warning, when the provider is not available"
    )
    models_dir: str | None = Field(None, description="model folder (default $FACEWEAVE_MODELS or the XDG cache)")
    tensorrt_cache: str | None = Field(None, description="TensorRT engine cache folder")
    tensorrt_fp16: bool = Field(False, description="TensorRT: build fp16 engines")

    @field_validator("execution_provider")
    @classmethod
    def _known_provider(cls, value: str) -> str:
        if value not in names.EXECUTION_PROVIDERS:
            raise ValueError(names.unknown("execution provider", value, names.EXECUTION_PROVIDERS))
        return value


class EnhancerOptions(_Options):
    """Optional restoration after the swap (neural models, see ``faceweave models list``)."""

    face: str | None = Field(
        None,
        description="face enhancer: gfpgan_1.2/1.3/1.4, codeformer, gpen_bfr_256/512/1024/2048, "
        "restoreformer_plus_plus",
    )
    face_blend: float = Field(0.8, ge=0.0, le=1.0, description="how much of the enhanced face is kept")
    face_weight: float = Field(0.5, ge=0.0, le=1.0, description="CodeFormer fidelity weight")
    frame: str | None = Field(
        None, description="frame enhancer: real_esrgan_x2/x4/x8, each also as _fp16 (e.g. real_esrgan_x4_fp16)"
    )
    frame_blend: float = Field(1.0, ge=0.0, le=1.0, description="how much of the enhanced frame is kept")
    frame_restore_size: bool = Field(False, description="resize the enhanced frame back to the input size")

    @field_validator("face")
    @classmethod
    def _known_face(cls, value: str | None) -> str | None:
        if value is not None and value not in names.FACE_ENHANCERS:
            raise ValueError(
                names.unknown("face enhancer", value, tuple(sorted(names.FACE_ENHANCERS)), listed="available:")
            )
        return value

    @field_validator("frame")
    @classmethod
    def _known_frame(cls, value: str | None) -> str | None:
        if value is not None and value not in names.FRAME_ENHANCERS:
            raise ValueError(
                names.unknown("frame enhancer", value, tuple(sorted(names.FRAME_ENHANCERS)), listed="available:")
            )
        return value


class SwapOptions(_Options):
    """Everything that decides how a swap is done."""

    swapper: str = Field("mesh", description="registered swapper name: 'mesh' (classical, offline) or a neural model")
    pixel_boost: int | None = Field(
        None, ge=64, le=1024, description="neural swappers: run the model on tiles of a crop this large"
    )
    swapper_weight: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="neural swappers that take an identity embedding: FaceFusion's face_swapper_weight (0.5: the "
        "source's identity only; towards 0 the target's identity is mixed in, towards 1 it is pushed away)",
    )
    working_size: int = Field(256, ge=96, le=1024, description="face size in pixels in the working crop")
    shape_transfer: float = Field(1.0, ge=0.0, le=1.0, description="how much of the source face shape is carried over")
    shading: float = Field(
        0.5, ge=0.0, le=1.0, description="how much of the target's low-frequency shading the result takes"
    )
    skin_tone: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="how much of the target's skin the new face takes: 0 the source's own skin colour and tint, "
        "0.5 the colour matched and part of the target's tint, 1 the target's tint and shading in full "
        "(the classical swapper and 'faceweave' compositing)",
    )
    expression_check: bool = Field(
        True,
        description="photos: look at each new face once and correct its mouth width, mouth opening and eye "
        "opening to read as the target's (video frames are not checked)",
    )
    multi_source: Literal["pose", "first"] = Field(
        "pose", description="with several source photos: closest head pose, or the first"
    )
    source_blend: Literal["average", "pose"] = Field(
        "average",
        description="neural swappers with several source photos: average their identity embeddings (as "
        "FaceFusion does) or use one photo per face as multi_source says (the classical swapper always does)",
    )
    compositing: Literal["auto", "facefusion", "faceweave"] = Field(
        "auto",
        description="neural swappers: how the new face is put into the picture: 'facefusion' (FaceFusion's "
        "box mask, occlusion masks when on, and its paste-back; no colour transfer), 'faceweave' (colour, "
        "shading, multi-band blend, grain) or 'auto' (the one that measured best); the classical swapper "
        "always composites the faceweave way",
    )
    selection: SelectionOptions = SelectionOptions()
    masks: MaskOptions = MaskOptions()
    analysis: AnalysisOptions = AnalysisOptions()
    max_pixels: int = Field(40_000_000, ge=1, description="refuse images with more pixels than this")
    runtime: RuntimeOptions = RuntimeOptions()
    enhance: EnhancerOptions = EnhancerOptions()

    @field_validator("compositing")
    @classmethod
    def _compositing_for_neural(cls, value: str, info: ValidationInfo) -> str:
        if value == "facefusion" and info.data.get("swapper") == "mesh":
            raise ValueError(
                "'facefusion' is for the neural swappers; the classical 'mesh' swapper composites its own way "
                "(use 'faceweave' or 'auto')"
            )
        return value

    @field_validator("masks")
    @classmethod
    def _mask_models_for_neural(cls, value: MaskOptions, info: ValidationInfo) -> MaskOptions:
        if info.data.get("swapper") == "mesh" and (value.face_occluder or value.face_parser):
            raise ValueError(
                "the face occluder and face parser models are for the neural swappers; the classical 'mesh' "
                "swapper keeps what is in front with its own occlusion masks"
            )
        return value

    @model_validator(mode="after")
    def _weight_for_embedding_swappers(self) -> SwapOptions:
        """Refused here, before any model file is looked for (the factory refuses it too)."""
        neural = self.swapper in names.NEURAL_SWAPPERS
        if self.swapper_weight != 0.5 and neural and not takes_embedding(find_spec(self.swapper)):
            raise ValueError(
                f"{self.swapper} takes the source face as an image, not an identity embedding: the swapper weight "
                "applies only to the embedding swappers (inswapper, hyperswap, simswap, ghost, hififace); leave it "
                "at 0.5"
            )
        return self

    @model_validator(mode="after")
    def _areas_need_68_points(self) -> SwapOptions:
        if not self.masks.face_mask_areas:
            return self
        if self.swapper == "mesh":
            raise ValueError(
                "face mask areas are for the neural swappers; the classical 'mesh' swapper fits its own mask "
                "to the face"
            )
        if self.analysis.face_landmarker == "mediapipe":
            raise ValueError(
                "face mask areas are drawn from 68 landmarks: choose a 68-point face landmarker, "
                "--face-landmarker (face_landmarker) 2dfan4 or fan_68_5"
            )
        return self

    def neural_compositing(self) -> Literal["facefusion", "faceweave"]:
        """The compositing a neural swapper uses: ``compositing``, with
        ``auto`` resolved (:data:`AUTO_COMPOSITING`)."""
        return AUTO_COMPOSITING if self.compositing == "auto" else self.compositing

    @field_validator("swapper")
    @classmethod
    def _known_swapper(cls, value: str) -> str:
        if value not in names.SWAPPERS:
            raise ValueError(names.unknown("swapper", value, names.SWAPPERS, listed="available:"))
        return value
