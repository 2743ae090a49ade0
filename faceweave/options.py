"""Options, validated with pydantic at the boundary.

Every option object is frozen and serialisable (``model_dump_json``), so a
saved job reproduces a run exactly.  Unknown fields are rejected.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from types import MappingProxyType
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from faceweave import names
from faceweave.errors import InvalidOptionError
from faceweave.models.catalog import find_spec, takes_embedding
from faceweave.models.deepfacelive import DEEP_SWAPPERS
from faceweave.option_fields import DETECTION, EDITOR, FACEFUSION, MODELS, QUALITY, SELECTION, Flag, OutputKind

SelectionMode = Literal["one", "many", "reference", "index"]
FaceOrder = Literal["left-right", "right-left", "top-bottom", "bottom-top", "large-small", "small-large", "best-score"]
FACE_ORDERS: tuple[str, ...] = FaceOrder.__args__  # type: ignore[attr-defined]
SELECTION_MODES: tuple[str, ...] = SelectionMode.__args__  # type: ignore[attr-defined]
#: the face size in the working crop of video swaps unless one is given (``faceweave swap``
#: and the service's ``video_working_size``): smaller than a photo's, as every frame pays for it
VIDEO_WORKING_SIZE = 192
#: what each kind of output sets unless the user does, by the options' surface names: video
#: frames are many and faces move, so a smaller working crop (about 1.5 times faster; once the
#: grain is matched it looks the same); a live frame is not looked at again for its expression
KIND_DEFAULTS: MappingProxyType[OutputKind, MappingProxyType[str, Any]] = MappingProxyType(
    {
        "photo": MappingProxyType({}),
        "video": MappingProxyType({"working_size": VIDEO_WORKING_SIZE}),
        "live": MappingProxyType({"working_size": VIDEO_WORKING_SIZE, "expression_check": False}),
    }
)


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

    min_confidence: Annotated[float, Flag(DETECTION, name="face_detector_score", metavar="F")] = Field(
        0.5, ge=0.05, le=1.0, description="Lowest detector score that counts as a face, 0.05-1."
    )
    small_faces: bool = Field(True, description="tiled, upscaled second detection pass for small faces")
    max_faces: int = Field(64, ge=1, le=1000, description="at most this many faces per image")
    face_detector: Annotated[str, Flag(DETECTION, metavar="NAME")] = Field(
        "mediapipe",
        description=f"Face detector: {'|'.join(names.FACE_DETECTORS)} (mediapipe: offline; the others are "
        "FaceFusion's ONNX models: download or import the file first). Its five points align the neural swappers.",
    )
    face_detector_angles: Annotated[tuple[int, ...], Flag(DETECTION, metavar="DEGREES")] = Field(
        (0,),
        description="ONNX detectors: also look for faces in the frame turned by these angles, 0 90 180 270 "
        "(repeat, or comma-separate), as FaceFusion.",
    )
    face_detector_margin: Annotated[tuple[int, int, int, int], Flag(DETECTION, metavar="TOP RIGHT BOTTOM LEFT")] = (
        Field(
            (0, 0, 0, 0),
            description="ONNX detectors: a zero border added around the frame before detection, four whole "
            "percentages 0-100 (100: half the frame), as FaceFusion; finds faces cut by the frame's edge.",
        )
    )
    face_detector_size: Annotated[int, Flag(DETECTION, metavar="PX")] = Field(
        640,
        description="ONNX detectors: side of the square the frame is fitted into (scrfd, retinaface: 160, 320, "
        "480, 512, 640; yolo_face, yunet: 640).",
    )
    face_landmarker: Annotated[str, Flag(DETECTION, metavar="NAME")] = Field(
        "mediapipe",
        description=f"Where the five alignment points come from: {'|'.join(names.FACE_LANDMARKERS)} (mediapipe: "
        "the detector's points, or the mesh's with the mediapipe detector; 2dfan4, peppa_wutz: FaceFusion's 68 "
        "points, each needs fan_68_5 too; many: both, FaceFusion's choice between them).",
    )
    face_landmarker_score: Annotated[float, Flag(DETECTION, metavar="F")] = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="2dfan4, peppa_wutz: the confidence, 0-1, above which their points replace the detector's.",
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

    mode: Annotated[SelectionMode, Flag(SELECTION, name="faces", metavar="MODE", given=True)] = Field(
        "one",
        description=f"Which target faces: {'|'.join(SELECTION_MODES)} (default one, or reference / index when "
        "--reference-face / --face-index is given).",
    )
    order: Annotated[FaceOrder, Flag(SELECTION, metavar="ORDER")] = Field(
        "large-small", description=f"Face order: {'|'.join(FACE_ORDERS)}."
    )
    indices: Annotated[tuple[int, ...], Flag(SELECTION, name="face_index", metavar="N", given=True)] = Field(
        (0,),
        description="Position of a target face after ordering, from 0; repeat, or comma-separate (--faces index).",
    )
    reference_distance: Annotated[float, Flag(SELECTION, metavar="F")] = Field(
        0.6, gt=0.0, le=2.0, description="Largest identity distance that counts as the reference person."
    )
    min_face_size: Annotated[int, Flag(SELECTION, metavar="PX")] = Field(
        0, ge=0, description="Ignore target faces smaller than this many pixels."
    )


class MaskOptions(_Options):
    """Masks combined by minimum; each can be switched off."""

    box: bool = True
    box_blur: float = Field(0.25, ge=0.0, le=1.0, description="feather of the box mask, fraction of the crop")
    region: bool = True
    mouth: Annotated[bool, Flag(QUALITY, name="mouth_mask", off="Do not keep the target's open mouth.")] = Field(
        True, description="Keep the target's open mouth."
    )
    occlusion: Annotated[
        bool,
        Flag(
            QUALITY,
            off="Do not keep hair, glasses and other things that are not skin-coloured in front of the face.",
        ),
    ] = Field(
        True,
        description="Keep hair, glasses and other things that are not skin-coloured in front of the face "
        "(--occlusion-hands: hands too).",
    )
    segmentation: bool = Field(
        False, description="also keep non-person objects in front of the face (selfie segmentation model)"
    )
    hands: Annotated[bool, Flag(QUALITY, name="occlusion_hands")] = Field(
        False,
        description="Also keep hands in front of the face (mediapipe hand landmarks: a hand has the colour of "
        "skin, so the occlusion test alone paints over it; about 6-10 ms per face).",
    )
    face_occluder: Annotated[str | None, Flag(FACEFUSION, metavar="NAME")] = Field(
        None,
        description=f"FaceFusion's occluder model: {'|'.join(names.OCCLUDER_CHOICES)} (many: all three, their "
        "minimum; keeps what is in front of the face: hair, hands, glasses; the files must be downloaded or "
        "imported first).",
    )
    face_parser: Annotated[str | None, Flag(FACEFUSION, metavar="NAME")] = Field(
        None,
        description=f"FaceFusion's face parser: {'|'.join(sorted(names.FACE_PARSERS))} (the new face shows only "
        "on --face-parser-regions).",
    )
    face_parser_regions: Annotated[tuple[str, ...], Flag(FACEFUSION, metavar="REGION", shown_default="all")] = Field(
        names.PARSER_REGIONS,
        description="Regions the new face shows on with --face-parser (repeat, or comma-separate): "
        f"{', '.join(names.PARSER_REGIONS)}.",
    )
    face_mask_areas: Annotated[tuple[str, ...], Flag(FACEFUSION, metavar="AREA", shown_default="off")] = Field(
        (),
        description="FaceFusion's face mask areas: the new face shows only inside the hull of the target's 68 "
        f"landmarks of these areas (repeat, or comma-separate): {', '.join(names.FACE_MASK_AREAS)}; needs "
        "--face-landmarker 2dfan4 or fan_68_5.",
    )
    face_mask_blur: Annotated[float, Flag(FACEFUSION, metavar="F")] = Field(
        0.3, ge=0.0, le=1.0, description="Feather of FaceFusion's box mask, 0-1 of the crop."
    )
    face_mask_padding: Annotated[tuple[int, int, int, int], Flag(FACEFUSION, metavar="TOP RIGHT BOTTOM LEFT")] = Field(
        (0, 0, 0, 0),
        description="FaceFusion's box mask padding: four whole percentages of the crop, 0-100.",
    )
    target_lips: Annotated[Literal["video", "always", "never"], Flag(QUALITY, metavar="WHEN")] = Field(
        "video",
        description="Keep the target's own lips and the skin around them, so the mouth moves as the target's did "
        "(lip sync; a smiling source's mouth does not smile on a speaking target): video (in videos and live "
        "streams), always, never.",
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
    classical default swapper needs none of it.  A job cannot choose them:
    the worker's settings do."""

    execution_provider: Annotated[str, Flag(MODELS, metavar="NAME", api=False)] = Field(
        "cpu", description=f"Where neural models run: {'|'.join(names.EXECUTION_PROVIDERS)}."
    )
    device_id: Annotated[int, Flag(MODELS, metavar="N", api=False)] = Field(
        0, ge=0, le=64, description="Accelerator index for the execution provider."
    )
    provider_fallback: Annotated[bool, Flag(MODELS, api=False)] = Field(
        False, description="Use the CPU (with a warning) when the execution provider is not available."
    )
    models_dir: Annotated[str | None, Flag(MODELS, metavar="DIR", api=False)] = Field(
        None, description="Model folder (default $FACEWEAVE_MODELS or ~/.cache/faceweave/models)."
    )
    tensorrt_cache: Annotated[str | None, Flag(MODELS, metavar="DIR", api=False)] = Field(
        None, description="TensorRT: keep built engines in DIR (much faster next start)."
    )
    tensorrt_fp16: Annotated[bool, Flag(MODELS, api=False)] = Field(False, description="TensorRT: build fp16 engines.")

    @field_validator("execution_provider")
    @classmethod
    def _known_provider(cls, value: str) -> str:
        if value not in names.EXECUTION_PROVIDERS:
            raise ValueError(names.unknown("execution provider", value, names.EXECUTION_PROVIDERS))
        return value


#: a face editor knob: -1 .. 1, 0 (no change) by default
EditKnob = Annotated[float, Field(ge=-1.0, le=1.0)]


class FaceEditOptions(_Options):
    """FaceFusion's face editor (LivePortrait): each knob -1 .. 1, 0 leaves that part as it is."""

    model: Annotated[str | None, Flag(EDITOR, name="face_editor", metavar="NAME")] = Field(
        None,
        description=f"Edit the faces' expression and pose: {', '.join(names.FACE_EDITORS)} (FaceFusion's face "
        "editor; LivePortrait's six models must be downloaded or imported first). Runs after the age modifier.",
    )
    eyebrow_direction: Annotated[EditKnob, Flag(EDITOR, name="face_editor_eyebrow_direction", metavar="F")] = Field(
        0.0, description="Eyebrows down (-1) or up (1)."
    )
    eye_gaze_horizontal: Annotated[EditKnob, Flag(EDITOR, name="face_editor_eye_gaze_horizontal", metavar="F")] = Field(
        0.0, description="Gaze to the image left (-1) or right (1)."
    )
    eye_gaze_vertical: Annotated[EditKnob, Flag(EDITOR, name="face_editor_eye_gaze_vertical", metavar="F")] = Field(
        0.0, description="Gaze down (-1) or up (1)."
    )
    eye_open_ratio: Annotated[EditKnob, Flag(EDITOR, name="face_editor_eye_open_ratio", metavar="F")] = Field(
        0.0, description="Eyes closed (-1) or wide open (1)."
    )
    lip_open_ratio: Annotated[EditKnob, Flag(EDITOR, name="face_editor_lip_open_ratio", metavar="F")] = Field(
        0.0, description="Lips closed (-1) or open (1)."
    )
    mouth_grim: Annotated[EditKnob, Flag(EDITOR, name="face_editor_mouth_grim", metavar="F")] = Field(
        0.0, description="A grim mouth, one way (-1) or the other (1)."
    )
    mouth_pout: Annotated[EditKnob, Flag(EDITOR, name="face_editor_mouth_pout", metavar="F")] = Field(
        0.0, description="Lips pulled in (-1) or pouted (1)."
    )
    mouth_purse: Annotated[EditKnob, Flag(EDITOR, name="face_editor_mouth_purse", metavar="F")] = Field(
        0.0, description="Lips spread (-1) or pursed (1)."
    )
    mouth_smile: Annotated[EditKnob, Flag(EDITOR, name="face_editor_mouth_smile", metavar="F")] = Field(
        0.0, description="A frown (-1) or a smile (1)."
    )
    mouth_position_horizontal: Annotated[
        EditKnob, Flag(EDITOR, name="face_editor_mouth_position_horizontal", metavar="F")
    ] = Field(0.0, description="The mouth moved to the image left or right.")
    mouth_position_vertical: Annotated[
        EditKnob, Flag(EDITOR, name="face_editor_mouth_position_vertical", metavar="F")
    ] = Field(0.0, description="The mouth moved down (-1) or up (1).")
    head_pitch: Annotated[EditKnob, Flag(EDITOR, name="face_editor_head_pitch", metavar="F")] = Field(
        0.0, description="The head tilted up (-1, 20 degrees) or down (1)."
    )
    head_yaw: Annotated[EditKnob, Flag(EDITOR, name="face_editor_head_yaw", metavar="F")] = Field(
        0.0, description="The head turned (up to 60 degrees) one way (-1) or the other (1)."
    )
    head_roll: Annotated[EditKnob, Flag(EDITOR, name="face_editor_head_roll", metavar="F")] = Field(
        0.0, description="The head rolled (up to 15 degrees) one way (-1) or the other (1)."
    )

    @field_validator("model")
    @classmethod
    def _known_editor(cls, value: str | None) -> str | None:
        if value is not None and value not in names.FACE_EDITORS:
            raise ValueError(names.unknown("face editor", value, names.FACE_EDITORS))
        return value


class EnhancerOptions(_Options):
    """Optional restoration after the swap (neural models, see ``faceweave models list``)."""

    face: Annotated[str | None, Flag(MODELS, name="face_enhancer", metavar="NAME")] = Field(
        None, description=f"Restore the swapped faces: {', '.join(names.FACE_ENHANCERS)}."
    )
    face_blend: Annotated[float, Flag(MODELS, name="face_enhancer_blend", metavar="F")] = Field(
        0.8, ge=0.0, le=1.0, description="How much of the restored face to keep."
    )
    face_weight: Annotated[float, Flag(MODELS, name="face_enhancer_weight", metavar="F")] = Field(
        0.5, ge=0.0, le=1.0, description="CodeFormer fidelity weight (1 = closest to the input)."
    )
    frame: Annotated[str | None, Flag(MODELS, name="frame_enhancer", metavar="NAME")] = Field(
        None, description=f"Upscale the whole result: {', '.join(names.FRAME_ENHANCERS)}."
    )
    frame_blend: Annotated[float, Flag(MODELS, name="frame_enhancer_blend", metavar="F")] = Field(
        1.0, ge=0.0, le=1.0, description="How much of the upscaled frame to keep."
    )
    frame_restore_size: bool = Field(False, description="resize the enhanced frame back to the input size")
    background: Annotated[str | None, Flag(MODELS, name="background_remover", metavar="NAME")] = Field(
        None,
        description=f"Find the foreground and keep it: {', '.join(names.BACKGROUND_REMOVERS)} (FaceFusion's "
        "background removers; the file must be downloaded or imported first). A photo written as PNG, WebP or "
        "TIFF gets the background transparent; --background-remover-fill-color paints it (videos: only so). Runs "
        "after the face enhancer.",
    )
    background_fill: Annotated[
        tuple[int, int, int, int], Flag(MODELS, name="background_remover_fill_color", metavar="R G B A")
    ] = Field(
        (0, 0, 0, 0),
        description="The colour laid over the removed background, 0-255 each, by its alpha (0: none, the "
        "background only made transparent).",
    )
    background_despill: Annotated[
        tuple[int, int, int, int], Flag(MODELS, name="background_remover_despill_color", metavar="R G B A")
    ] = Field(
        (0, 0, 0, 0),
        description="A screen's colour to take out of the picture (green: 0 255 0 255), by its alpha (0: none).",
    )
    colorizer: Annotated[str | None, Flag(MODELS, name="frame_colorizer", metavar="NAME")] = Field(
        None,
        description=f"Colour the whole result from its lightness (a grey or faded picture): "
        f"{', '.join(names.FRAME_COLORIZERS)} (FaceFusion's frame colorizers; the file must be downloaded or "
        "imported first). Runs after the face enhancer and the background remover, before the frame enhancer.",
    )
    colorizer_size: Annotated[int, Flag(MODELS, name="frame_colorizer_size", metavar="PX")] = Field(
        256,
        description="The side of the square the frame colorizer sees the frame at: "
        f"{', '.join(map(str, names.FRAME_COLORIZER_SIZES))}.",
    )
    colorizer_blend: Annotated[float, Flag(MODELS, name="frame_colorizer_blend", metavar="F")] = Field(
        1.0, ge=0.0, le=1.0, description="How much of the colorized frame to keep (FaceFusion's blend / 100)."
    )

    deep_swapper: Annotated[str | None, Flag(MODELS, name="deep_swapper", metavar="SCOPE/NAME")] = Field(
        None,
        description="Swap the faces for the person a DeepFaceLive model was trained on, with no source photo "
        "(FaceFusion's deep swapper, e.g. iperov/elon_musk_224; see 'faceweave models list', names dfm_*; the file "
        "must be downloaded or imported first). Use it with --swapper none; it runs first.",
    )
    deep_swapper_morph: Annotated[int, Flag(MODELS, name="deep_swapper_morph", metavar="N")] = Field(
        100, ge=0, le=100, description="How far the face is morphed to the model's person (0-100)."
    )
    expression_restorer: Annotated[str | None, Flag(MODELS, name="expression_restorer", metavar="NAME")] = Field(
        None,
        description=f"Give the swapped faces back the target's own expression: "
        f"{', '.join(names.EXPRESSION_RESTORERS)} (FaceFusion's expression restorer; LivePortrait's feature "
        "extractor, motion extractor and generator must be downloaded or imported first). Runs first after the swap.",
    )
    expression_restorer_factor: Annotated[int, Flag(MODELS, name="expression_restorer_factor", metavar="N")] = Field(
        80, ge=0, le=100, description="How much of the target's expression comes back (0-100)."
    )
    expression_restorer_areas: Annotated[
        tuple[str, ...], Flag(MODELS, name="expression_restorer_areas", metavar="AREA")
    ] = Field(
        names.EXPRESSION_RESTORER_AREAS,
        min_length=1,
        description=f"Where the expression comes back: {', '.join(names.EXPRESSION_RESTORER_AREAS)}.",
    )
    age_modifier: Annotated[str | None, Flag(MODELS, name="age_modifier", metavar="NAME")] = Field(
        None,
        description=f"Make the faces older or younger: {', '.join(names.AGE_MODIFIERS)} (FaceFusion's age "
        "modifiers; fran also needs the face classifier fairface; the files must be downloaded or imported "
        "first). Runs after the swap and the expression restorer, before the face editor and the lip syncer.",
    )
    age_modifier_direction: Annotated[int, Flag(MODELS, name="age_modifier_direction", metavar="YEARS")] = Field(
        0, ge=-100, le=100, description="How much older (up to 100) or younger (down to -100)."
    )
    edit: FaceEditOptions = FaceEditOptions()
    lip_syncer: Annotated[str | None, Flag(MODELS, name="lip_syncer", metavar="NAME")] = Field(
        None,
        description=f"Move the faces' mouths to speech: {', '.join(names.LIP_SYNCERS)} (FaceFusion's lip syncers; "
        "the file must be downloaded or imported first). A video follows its own audio or --lip-syncer-audio; "
        "a photo or a live stream gets silence (a closed mouth), as in FaceFusion. Runs after the swap and the "
        "age modifier.",
    )
    lip_syncer_weight: Annotated[float, Flag(MODELS, name="lip_syncer_weight", metavar="F")] = Field(
        0.5, ge=0.0, le=1.0, description="How strongly the mouth follows the speech (FaceFusion's weight)."
    )
    lip_syncer_audio: Annotated[
        str | None, Flag(MODELS, name="lip_syncer_audio", metavar="FILE", kinds=("video",), api=False)
    ] = Field(
        None,
        max_length=4096,
        description="The speech the lips follow, from the video's start (a dub), instead of the video's own "
        "audio; the output gets this audio.",
    )
    voice_extractor: Annotated[str, Flag(MODELS, name="voice_extractor", metavar="NAME", kinds=("video",))] = Field(
        names.VOICE_EXTRACTORS[0],
        description=f"Keep only the voice of the lip syncer's audio: {', '.join(names.VOICE_EXTRACTORS)}, or "
        "'none' for clean speech (faster; FaceFusion always extracts).",
    )

    @field_validator("face")
    @classmethod
    def _known_face(cls, value: str | None) -> str | None:
        if value is not None and value not in names.FACE_ENHANCERS:
            raise ValueError(
                names.unknown("face enhancer", value, tuple(sorted(names.FACE_ENHANCERS)), listed="available:")
            )
        return value

    @field_validator("background")
    @classmethod
    def _known_remover(cls, value: str | None) -> str | None:
        if value is not None and value not in names.BACKGROUND_REMOVERS:
            raise ValueError(names.unknown("background remover", value, tuple(names.BACKGROUND_REMOVERS)))
        return value

    @field_validator("background_fill", "background_despill")
    @classmethod
    def _rgba(cls, value: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        if any(not 0 <= c <= 255 for c in value):
            raise ValueError(f"a colour is four whole numbers 0-255 (red green blue alpha); got {value}")
        return value

    @field_validator("colorizer")
    @classmethod
    def _known_colorizer(cls, value: str | None) -> str | None:
        if value is not None and value not in names.FRAME_COLORIZERS:
            raise ValueError(names.unknown("frame colorizer", value, tuple(names.FRAME_COLORIZERS)))
        return value

    @field_validator("colorizer_size")
    @classmethod
    def _colorizer_size(cls, value: int) -> int:
        if value not in names.FRAME_COLORIZER_SIZES:
            sizes = ", ".join(map(str, names.FRAME_COLORIZER_SIZES))
            raise ValueError(f"frame colorizer size {value}; one of {sizes}")
        return value

    def processors(self) -> tuple[str, ...]:
        """The options of the steps chosen (``lip_syncer``, ``face_enhancer`` ...), in the order they run."""
        chosen = {
            "deep_swapper": self.deep_swapper,
            "expression_restorer": self.expression_restorer,
            "age_modifier": self.age_modifier,
            "face_editor": self.edit.model,
            "lip_syncer": self.lip_syncer,
            "face_enhancer": self.face,
            "background_remover": self.background,
            "frame_colorizer": self.colorizer,
            "frame_enhancer": self.frame,
        }
        return tuple(name for name, value in chosen.items() if value is not None)

    @field_validator("deep_swapper")
    @classmethod
    def _known_deep_swapper(cls, value: str | None) -> str | None:
        if value is not None and value not in DEEP_SWAPPERS:
            close = difflib.get_close_matches(value, DEEP_SWAPPERS, n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else " (faceweave models list shows them as dfm_*)"
            raise ValueError(
                f"unknown deep swapper {value!r}: FaceFusion's are scope/name, e.g. iperov/elon_musk_224{hint}"
            )
        return value

    @field_validator("expression_restorer")
    @classmethod
    def _known_expression_restorer(cls, value: str | None) -> str | None:
        if value is not None and value not in names.EXPRESSION_RESTORERS:
            raise ValueError(names.unknown("expression restorer", value, names.EXPRESSION_RESTORERS))
        return value

    @field_validator("expression_restorer_areas")
    @classmethod
    def _known_restorer_areas(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for area in value:
            if area not in names.EXPRESSION_RESTORER_AREAS:
                raise ValueError(names.unknown("expression restorer area", area, names.EXPRESSION_RESTORER_AREAS))
        return tuple(dict.fromkeys(value))

    @field_validator("age_modifier")
    @classmethod
    def _known_age_modifier(cls, value: str | None) -> str | None:
        if value is not None and value not in names.AGE_MODIFIERS:
            raise ValueError(names.unknown("age modifier", value, tuple(names.AGE_MODIFIERS)))
        return value

    @field_validator("lip_syncer")
    @classmethod
    def _known_lip_syncer(cls, value: str | None) -> str | None:
        if value is not None and value not in names.LIP_SYNCERS:
            raise ValueError(names.unknown("lip syncer", value, tuple(names.LIP_SYNCERS)))
        return value

    @field_validator("voice_extractor")
    @classmethod
    def _known_voice_extractor(cls, value: str) -> str:
        if value != "none" and value not in names.VOICE_EXTRACTORS:
            raise ValueError(names.unknown("voice extractor", value, (*names.VOICE_EXTRACTORS, "none")))
        return value

    @model_validator(mode="after")
    def _audio_needs_lip_syncer(self) -> EnhancerOptions:
        if self.lip_syncer_audio is not None and self.lip_syncer is None:
            raise ValueError("the lip syncer audio is what a lip syncer follows: choose one, --lip-syncer (lip_syncer)")
        return self

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

    swapper: Annotated[str, Flag(MODELS, metavar="NAME")] = Field(
        "mesh",
        description="'mesh' (classical, works offline) or a neural model such as inswapper_128, hyperswap_1a_256, "
        "simswap_256 (see 'faceweave models list'; the file must be downloaded or imported first); 'none' keeps "
        "the faces and runs only the processors named (a lip sync, a face enhancer ...), with no source photo.",
    )
    pixel_boost: Annotated[int | None, Flag(MODELS, metavar="PX", aliases=("--face-swapper-pixel-boost",))] = Field(
        None,
        ge=64,
        le=1024,
        description="Neural swappers: run the model on tiles of a crop this large (e.g. 256 or 512 for a 128 px "
        "model).",
    )
    swapper_weight: Annotated[float, Flag(FACEFUSION, name="face_swapper_weight", metavar="F")] = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="FaceFusion's swapper weight, 0-1 (0.5: the source's identity alone; lower mixes the target's "
        "identity in, higher pushes it away); embedding swappers only (inswapper, hyperswap, simswap, ghost, "
        "hififace).",
    )
    working_size: Annotated[int, Flag(QUALITY, metavar="PX", given=True)] = Field(
        256, ge=96, le=1024, description="Face size in pixels inside the working crop, 96-1024; larger is slower."
    )
    shape_transfer: float = Field(1.0, ge=0.0, le=1.0, description="how much of the source face shape is carried over")
    shading: float = Field(
        0.5, ge=0.0, le=1.0, description="how much of the target's low-frequency shading the result takes"
    )
    skin_tone: Annotated[float, Flag(QUALITY, metavar="0-1")] = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="How much of the target's skin the new face takes: 0 the source's own skin colour and tint, "
        "0.5 the colour matched and part of the target's tint, 1 the target's tint and shading in full (the "
        "classical swapper and faceweave compositing).",
    )
    expression_check: Annotated[
        bool,
        Flag(
            QUALITY,
            kinds=("photo",),
            off="Photos: do not look at each new face again to correct how its mouth and eyes read against the "
            "target's expression (saves a composite and a mesh inference, and sometimes a swap, per face).",
        ),
    ] = Field(
        True,
        description="Photos: look at each new face once more and correct its mouth width, mouth opening and eye "
        "opening to read as the target's (off saves a composite and a mesh inference, and sometimes a swap, per "
        "face).",
    )
    multi_source: Literal["pose", "first"] = Field(
        "pose", description="with several source photos: closest head pose, or the first"
    )
    source_blend: Annotated[Literal["average", "pose"], Flag(MODELS, metavar="MODE")] = Field(
        "average",
        description="Neural swappers with several source photos: average (as FaceFusion: their identity "
        "embeddings averaged) or pose (the photo closest in head pose to each face; the classical swapper always "
        "picks by pose).",
    )
    compositing: Annotated[Literal["auto", "facefusion", "faceweave"], Flag(MODELS, metavar="MODE")] = Field(
        "auto",
        description="Neural swappers: how the new face is put into the picture: facefusion (FaceFusion's box mask, "
        "occlusion masks when on, and its paste-back; no colour transfer), faceweave (colour, shading, multi-band "
        "blend, grain) or auto (the one that measured best, see docs/MODELS.md); the classical swapper always "
        "composites the faceweave way.",
    )
    selection: SelectionOptions = SelectionOptions()
    masks: MaskOptions = MaskOptions()
    analysis: AnalysisOptions = AnalysisOptions()
    max_pixels: Annotated[int, Flag(QUALITY, metavar="N", api=False)] = Field(
        40_000_000, ge=1, description="Refuse images with more pixels than this."
    )
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
    def _nothing_to_do(self) -> SwapOptions:
        if self.swapper == names.NO_SWAPPER and not self.enhance.processors():
            raise ValueError(
                "swapper 'none' keeps the faces: name what to do with them, e.g. --deep-swapper, --lip-syncer, "
                "--face-enhancer, --age-modifier, --face-editor, --expression-restorer, --background-remover, "
                "--frame-colorizer or --frame-enhancer"
            )
        return self

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
