"""The typed values a job carries: its state, its inputs and its result.

The store keeps inputs and results as JSON columns; these models parse the
stored dicts (so databases written by earlier releases still load) and dump
back to the same shape.  Results keep only the keys that were set
(``model_dump(exclude_unset=True)``): an image result, a whole-video result
and a segmented-video result each have their own keys, and the API shows
exactly the stored ones.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class JobState(StrEnum):
    """Where a job is; the values are what the store and the API write."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


STATES = tuple(JobState)
ACTIVE = (JobState.QUEUED, JobState.RUNNING)
TERMINAL = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


class InputFile(BaseModel):
    """One uploaded file as the audit log records it: its role (``source``,
    ``target``, ``reference``, ``map.<INDEX>``), stored path, hash and the
    name the client gave it."""

    model_config = ConfigDict(frozen=True)

    role: str
    path: str = ""
    sha256: str
    filename: str | None = None


class JobInputs(BaseModel):
    """A job's files, as paths relative to the storage folder.  ``map``: the
    photos of each person INDEX of a video (``faceweave swap --map``)."""

    model_config = ConfigDict(frozen=True)

    sources: list[str] = Field(default_factory=list)
    #: empty only in a record that never had one (the store still loads it)
    target: str = ""
    reference: str | None = None
    map: dict[int, list[str]] = Field(default_factory=dict)
    files: list[InputFile] = Field(default_factory=list)

    def stored_paths(self) -> list[str]:
        """Every input file's relative path (sources, target, reference, map photos)."""
        paths = [*self.sources, self.target, self.reference, *(p for group in self.map.values() for p in group)]
        return [p for p in paths if p]

    def stored(self) -> dict[str, Any]:
        """The JSON the store keeps (``map`` keys as strings)."""
        return self.model_dump(mode="json")


class SwappedFace(BaseModel):
    """One swapped face of a photo: its index among the target's faces, its
    box ``[x1, y1, x2, y2]`` in pixels and the source photo used."""

    face: int
    box: list[float]
    source_index: int | None = None


class _Result(BaseModel):
    """Unknown keys are kept (a result written by another release shows as stored)."""

    model_config = ConfigDict(extra="allow")

    def stored(self) -> dict[str, Any]:
        """The JSON the store keeps: the keys that were set."""
        return self.model_dump(mode="json", exclude_unset=True)


class ImageResult(_Result):
    """What a photo swap produced."""

    width: int
    height: int
    faces_found: int = 0
    faces_swapped: int
    swapped: list[SwappedFace] = Field(default_factory=list)
    run_id: str | None = None
    #: seconds of the swap itself, without queueing and loading (for overhead figures)
    work_s: float | None = None


class VideoResult(_Result):
    """What a video swap produced; a segmented one also has ``duration_s``,
    ``audio``, ``segments`` and ``segment_workers``."""

    frames: int
    frames_with_swap: int = 0
    faces_swapped: int
    scene_cuts: int = 0
    fps: float | None = None
    duration_s: float | None = None
    #: the audio codec copied from the input, or None (segmented videos)
    audio: str | None = None
    #: seconds into the video where decoding broke (the rest was copied as it was)
    broken_at: float | None = None
    run_id: str | None = None
    segments: int | None = None
    segment_workers: list[str | None] | None = None
    warning: str | None = None
    work_s: float | None = None


JobResult = ImageResult | VideoResult


def parse_result(kind: str, data: dict[str, Any] | None) -> JobResult | None:
    """The stored result of a job of ``kind`` ("image" or "video"), or ``None``."""
    if data is None:
        return None
    return ImageResult.model_validate(data) if kind == "image" else VideoResult.model_validate(data)
