"""Job options as the HTTP API takes them, and their mapping onto the pipeline's.

The options are the CLI's (``faceweave swap``), named after its flags
without the dashes (a switch by what it turns on: ``occlusion``, not
``no_occlusion``), made from the options models as the flags are; unknown
names are refused.  They arrive as one JSON
form field ``options`` and/or as one form field per option (repeat
``face_index`` for several faces).  Video ``--map INDEX=PHOTO`` becomes file
parts named ``map.INDEX``.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from annotated_types import MaxLen
from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

from faceweave import names
from faceweave.errors import InvalidOptionError
from faceweave.option_fields import OutputKind
from faceweave.option_schema import Leaf, api_leaves, swap_options
from faceweave.options import FORM_WORDS, AnalysisOptions, RuntimeOptions, SwapOptions

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
#: the longest text a job's option may be (a model's name), and the most items in a list
_LONGEST_TEXT = 64
_MOST_ITEMS = 16


class JobFields(BaseModel):
    """What a swap job may be told besides the swap options: the output's
    format and quality, and the video's part, rate, size, audio and encoder.
    :data:`JobOptions` adds one field per option a job may set."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal["png", "jpg", "webp", "mp4", "webm", "gif", "mov", "mkv"] | None = None
    quality: int | None = Field(None, ge=1, le=100)
    trim: str | None = Field(None, max_length=64, description="video: START-END, e.g. 5-20 or 00:00:05-00:00:20")
    fps: float | None = Field(None, gt=0.0, le=240.0)
    scale: float = Field(1.0, ge=0.05, le=1.0)
    audio: bool = True
    codec: Literal["h264", "h265"] = "h264"
    preset: Literal["ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow"] = "veryfast"

    def given(self) -> dict[str, Any]:
        """The swap options' values, by name (``None``: not given)."""
        return {leaf.name: getattr(self, leaf.name) for leaf in api_leaves()}

    def output_format(self, kind: str) -> str:
        """The output extension (no dot) for a target of ``kind`` ("image" or "video")."""
        allowed = IMAGE_FORMATS if kind == "image" else VIDEO_FORMATS
        chosen = self.format or allowed[0]
        if chosen not in allowed:
            raise InvalidOptionError(
                f"option format '{chosen}' is not for a {kind} target; use one of {', '.join(allowed)}"
            )
        return chosen

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
        models run, the model folder) and ``max_pixels`` come from the
        worker's settings, as does a video's working size unless given."""
        fixed = {"max_pixels": max_pixels, "runtime": (runtime or RuntimeOptions()).model_dump()}
        return swap_options(
            self.given(),
            kind=_output_kind(kind),
            has_reference=has_reference,
            words=FORM_WORDS,
            defaults={"working_size": video_working_size} if kind == "video" else {},
            fixed=fixed,
        )

    def analysis_options(self) -> AnalysisOptions:
        """The face detector and landmarker options, as a job with them finds faces."""
        return swap_options(self.given(), kind="photo", has_reference=None, words=FORM_WORDS).analysis

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
        """Checks that need the target's kind (and the model names, against
        the registries, when the job is submitted); raise :class:`InvalidOptionError`."""
        from pydantic import ValidationError

        try:
            swap_options(self.given(), kind=_output_kind(kind), has_reference=None, words=FORM_WORDS)
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


def _output_kind(kind: str) -> OutputKind:
    """The options' kind of output of a job's kind ("image" or "video")."""
    return "photo" if kind == "image" else "video"


def _job_field(leaf: Leaf) -> tuple[Any, FieldInfo]:
    """A job's field for one option: the option's type and bounds, a bound
    on text and list lengths, its default (none where the default depends
    on the rest of the job) and its description."""
    kind: Any = leaf.value_type
    if kind is str:
        kind = Annotated[str, MaxLen(_LONGEST_TEXT)]
    elif leaf.listed:
        item: Any = typing.get_args(kind)[0]
        item = Annotated[str, MaxLen(_LONGEST_TEXT)] if item is str else item
        kind = Annotated[tuple[item, ...], MaxLen(_MOST_ITEMS)]
    kind = Annotated[kind, *leaf.bounds] if leaf.bounds else kind
    default = None if leaf.flag.given else leaf.default
    if default is None:
        kind = kind | None
    return kind, typing.cast(FieldInfo, Field(default, description=leaf.info.description))


#: what a swap job may be told (serialised into the job record as is): the
#: fields of :class:`JobFields` and one per option a job may set, named and
#: described as the options models say (:mod:`faceweave.option_schema`)
JobOptions = create_model(  # type: ignore[call-overload]
    "JobOptions", __base__=JobFields, **{leaf.name: _job_field(leaf) for leaf in api_leaves()}
)
#: the options whose form field may be repeated or list several values (``face_index=0,1``)
_LIST_FIELDS = frozenset(leaf.name for leaf in api_leaves() if typing.get_origin(leaf.value_type) is tuple)


def keeps_faces(fields: Mapping[str, list[str]]) -> bool:
    """Whether the form asks for swapper ``none`` (no source photo), read
    before the options are checked, so that the files are sorted first: the
    ``swapper`` field, else the JSON ``options`` field's; anything unreadable
    is left to :func:`options_from_form` to refuse."""
    given = fields.get("swapper", [])
    if given:
        return given[-1] == names.NO_SWAPPER
    for text in reversed(fields.get("options", [])):
        try:
            value = json.loads(text) if text.strip() else {}
        except (ValueError, RecursionError):
            return False
        if isinstance(value, dict) and "swapper" in value:
            return value["swapper"] == names.NO_SWAPPER
    return False


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
