"""Job options as the HTTP API takes them, and their mapping onto the pipeline's.

The options are the CLI's (``faceweave swap``), named after its flags
without the dashes; unknown names are refused.  They arrive as one JSON
form field ``options`` and/or as one form field per option (repeat
``face_index`` for several faces).  Video ``--map INDEX=PHOTO`` becomes file
parts named ``map.INDEX``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from faceweave.errors import InvalidOptionError
from faceweave.option_fields import analysis_flag_fields
from faceweave.options import FORM_WORDS, FaceOrder, RuntimeOptions, SelectionMode, SwapOptions, selection_mode

IMAGE_FORMATS = ("png", "jpg", "webp")
VIDEO_FORMATS = ("mp4", "webm", "gif", "mov", "mkv")
MEDIA_TYPES = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "webp": "image/webp",
    "mp4": "video/mp4",
    "webm": "video/webm",
    "gif": "image/gif",
    "mov": "video/quicktime",
    "mkv": "video/x-matroska",
}
_LIST_FIELDS = frozenset(
    {
        "face_index",
        "face_parser_regions",
        "face_mask_areas",
        "face_mask_padding",
        "face_detector_angles",
        "face_detector_margin",
    }
)


class JobOptions(BaseModel):
    """What a swap job may be told (serialised into the job record as is)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    faces: SelectionMode | None = Field(None, description="one|many|reference|index; implied by reference / face_index")
    face_index: tuple[int, ...] | None = Field(None, description="target face positions after ordering (faces=index)")
    order: FaceOrder | None = None
    reference_distance: float | None = Field(None, gt=0.0, le=2.0)
    min_face_size: int | None = Field(None, ge=0)
    working_size: int | None = Field(None, ge=96, le=1024)
    occlusion: bool = True
    mouth_mask: bool = True
    target_lips: Literal["video", "always", "never"] = Field(
        "video", description="keep the target's own lips (lip sync): in videos (default), always, never"
    )
    occlusion_hands: bool = Field(False, description="also keep hands in front of the face (hand landmark model)")
    skin_tone: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="how much of the target's skin the new face takes: 0 the source's own, 1 the target's "
        f"(default {SwapOptions().skin_tone})",
    )
    format: Literal["png", "jpg", "webp", "mp4", "webm", "gif", "mov", "mkv"] | None = None
    quality: int | None = Field(None, ge=1, le=100)
    trim: str | None = Field(None, max_length=64, description="video: START-END, e.g. 5-20 or 00:00:05-00:00:20")
    fps: float | None = Field(None, gt=0.0, le=240.0)
    scale: float = Field(1.0, ge=0.05, le=1.0)
    audio: bool = True
    codec: Literal["h264", "h265"] = "h264"
    preset: Literal["ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow"] = "veryfast"
    swapper: str = Field(
        "mesh", max_length=64, description="'mesh' or a neural model present on the worker (faceweave models list)"
    )
    pixel_boost: int | None = Field(None, ge=64, le=1024)
    compositing: Literal["auto", "facefusion", "faceweave"] = Field(
        "auto", description="neural swappers: facefusion (FaceFusion's masks and paste-back), faceweave, or auto"
    )
    source_blend: Literal["average", "pose"] = Field(
        "average", description="neural swappers, several source photos: average their identities, or pick by pose"
    )
    face_occluder: str | None = Field(None, max_length=64, description="neural swappers: xseg_1|xseg_2|xseg_3|many")
    face_parser: str | None = Field(
        None, max_length=64, description="neural swappers: bisenet_resnet_18|bisenet_resnet_34"
    )
    face_parser_regions: tuple[str, ...] | None = Field(
        None, max_length=16, description="the parser's regions the new face shows on (FaceFusion's names)"
    )
    face_detector: str = Field(
        "mediapipe", max_length=64, description="mediapipe (offline) or FaceFusion's yolo_face|scrfd|retinaface|yunet"
    )
    face_detector_size: int | None = Field(
        None, description="ONNX detectors: the square the frame is fitted into (scrfd, retinaface: 160-640; 640)"
    )
    face_detector_score: float | None = Field(
        None, ge=0.05, le=1.0, description="lowest detector score that counts, 0.05-1 (0.5)"
    )
    face_detector_angles: tuple[int, ...] | None = Field(
        None, max_length=4, description="ONNX detectors: also detect in the frame turned by 90, 180, 270 (0: as is)"
    )
    face_detector_margin: tuple[int, int, int, int] | None = Field(
        None, description="ONNX detectors: zero border around the frame, percent: top, right, bottom, left"
    )
    face_landmarker: str = Field(
        "mediapipe", max_length=64, description="five alignment points: mediapipe, 2dfan4 (with fan_68_5), fan_68_5"
    )
    face_landmarker_score: float | None = Field(
        None, ge=0.0, le=1.0, description="2dfan4: the confidence its points replace at (0.5)"
    )
    face_mask_areas: tuple[str, ...] | None = Field(
        None,
        max_length=3,
        description="FaceFusion's face mask areas (upper-face, lower-face, mouth), from the target's 68 landmarks "
        "(needs face_landmarker 2dfan4 or fan_68_5)",
    )
    face_mask_blur: float = Field(0.3, ge=0.0, le=1.0, description="FaceFusion's box mask feather")
    face_mask_padding: tuple[int, int, int, int] = Field(
        (0, 0, 0, 0), description="FaceFusion's box mask padding, percent: top, right, bottom, left"
    )
    face_swapper_weight: float = Field(0.5, ge=0.0, le=1.0, description="FaceFusion's swapper weight")
    face_enhancer: str | None = Field(None, max_length=64)
    face_enhancer_blend: float = Field(0.8, ge=0.0, le=1.0)
    face_enhancer_weight: float = Field(0.5, ge=0.0, le=1.0)
    frame_enhancer: str | None = Field(None, max_length=64)
    frame_enhancer_blend: float = Field(1.0, ge=0.0, le=1.0)

    def output_format(self, kind: str) -> str:
        """The output extension (no dot) for a target of ``kind`` ("image" or "video")."""
        allowed = IMAGE_FORMATS if kind == "image" else VIDEO_FORMATS
        chosen = self.format or allowed[0]
        if chosen not in allowed:
            raise InvalidOptionError(
                f"option format '{chosen}' is not for a {kind} target; use one of {', '.join(allowed)}"
            )
        return chosen

    def selection_mode(self, *, has_reference: bool) -> str:
        """The selection mode, as given or implied (the rule the CLI uses too)."""
        return selection_mode(
            self.faces, has_reference=has_reference, has_indices=bool(self.face_index), words=FORM_WORDS
        )

    def swap_options(
        self,
        *,
        kind: str,
        has_reference: bool,
        max_pixels: int,
        video_working_size: int,
        runtime: RuntimeOptions | None = None,
    ) -> SwapOptions:
        """The :class:`SwapOptions` for this job; ``runtime`` (where neural
        models run, the model folder) comes from the worker's settings."""
        selection: dict[str, Any] = {"mode": self.selection_mode(has_reference=has_reference)}
        for name, value in (
            ("order", self.order),
            ("indices", self.face_index),
            ("reference_distance", self.reference_distance),
            ("min_face_size", self.min_face_size),
        ):
            if value is not None:
                selection[name] = value
        size = self.working_size or (video_working_size if kind == "video" else SwapOptions().working_size)
        return SwapOptions.model_validate(
            {
                "working_size": size,
                "max_pixels": max_pixels,
                "selection": selection,
                "analysis": self.analysis_fields(),
                "masks": {
                    "occlusion": self.occlusion,
                    "mouth": self.mouth_mask,
                    "hands": self.occlusion_hands,
                    "target_lips": self.target_lips,
                    **self.mask_models(),
                    "face_mask_blur": self.face_mask_blur,
                    "face_mask_padding": self.face_mask_padding,
                },
                **({} if self.skin_tone is None else {"skin_tone": self.skin_tone}),
                "swapper": self.swapper,
                "swapper_weight": self.face_swapper_weight,
                "pixel_boost": self.pixel_boost,
                "compositing": self.compositing,
                "source_blend": self.source_blend,
                "enhance": {
                    "face": self.face_enhancer,
                    "face_blend": self.face_enhancer_blend,
                    "face_weight": self.face_enhancer_weight,
                    "frame": self.frame_enhancer,
                    "frame_blend": self.frame_enhancer_blend,
                },
                "runtime": (runtime or RuntimeOptions()).model_dump(),
            }
        )

    def mask_models(self) -> dict[str, Any]:
        """The ``masks`` fields naming FaceFusion's occluder and parser (and
        the parser's regions and the face mask areas when given)."""
        fields: dict[str, Any] = {"face_occluder": self.face_occluder, "face_parser": self.face_parser}
        if self.face_parser_regions is not None:
            fields["face_parser_regions"] = self.face_parser_regions
        if self.face_mask_areas is not None:
            fields["face_mask_areas"] = self.face_mask_areas
        return fields

    def analysis_fields(self) -> dict[str, Any]:
        """The ``analysis`` fields: the face detector and landmarker and their
        options, as the CLI's flags of the same names set them."""
        return analysis_flag_fields(self)

    def video_options(self):
        """The :class:`~faceweave.video.pipeline.VideoOptions` for a video job."""
        from faceweave.video.io import parse_trim
        from faceweave.video.pipeline import VideoOptions

        start, end = parse_trim(self.trim) if self.trim else (0.0, None)
        crf = int(round(max(0.0, min(51.0, 51.0 - (self.quality or 65) * 0.51))))
        return VideoOptions(
            start=start,
            end=end,
            fps=self.fps,
            scale=self.scale,
            audio=self.audio,
            codec=self.codec,
            crf=crf,
            preset=self.preset,
        )

    def check(self, *, kind: str) -> None:
        """Checks that need the target's kind; raise :class:`InvalidOptionError`."""
        from pydantic import ValidationError

        try:  # model names are checked against the registries when the job is submitted
            SwapOptions.model_validate(
                {
                    "swapper": self.swapper,
                    "swapper_weight": self.face_swapper_weight,
                    "enhance": {"face": self.face_enhancer, "frame": self.frame_enhancer},
                    "masks": {**self.mask_models(), "face_mask_padding": self.face_mask_padding},
                    "analysis": self.analysis_fields(),
                }
            )
        except ValidationError as exc:
            raise InvalidOptionError(
                "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
            ) from None
        self.output_format(kind)
        if kind == "video":
            self.video_options()
        else:
            video_only = [n for n in ("trim", "fps") if getattr(self, n) is not None]
            video_only += [n for n, d in (("scale", 1.0), ("audio", True), ("codec", "h264")) if getattr(self, n) != d]
            if video_only:
                raise InvalidOptionError(f"option {video_only[0]} is for video targets only")


def options_from_form(fields: Mapping[str, list[str]]) -> JobOptions:
    """:class:`JobOptions` from form fields: the JSON ``options`` field, then
    one field per option on top.  Raises pydantic's ``ValidationError`` (an
    unknown option is named in it) or :class:`InvalidOptionError`."""
    data: dict[str, Any] = {}
    for text in fields.get("options", []):
        try:
            value = json.loads(text) if text.strip() else {}
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
            raise InvalidOptionError(f"the 'options' field is not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise InvalidOptionError("the 'options' field must be a JSON object")
        data.update(value)
    for name, values in fields.items():
        if name == "options":
            continue
        if name in _LIST_FIELDS:
            items: list[str] = []
            for v in values:
                items.extend(p.strip() for p in v.split(",") if p.strip())
            data[name] = items
        else:
            data[name] = values[-1] if len(values) == 1 else values
    return JobOptions.model_validate(data)
