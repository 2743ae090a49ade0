"""The per-frame work of one video swap (:class:`SwapWork`), which
:class:`~faceweave.video.pipeline.VideoSwapper` hands to a
:class:`~faceweave.video.stream.FrameStream`."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from faceweave.swappers import SourceFace
from faceweave.timing import timed
from faceweave.types import Face
from faceweave.video.io import VideoFrame
from faceweave.video.planning import PeopleMap, PlannedFace, TrackStates
from faceweave.video.tracker import FaceTracker

if TYPE_CHECKING:
    from faceweave.audio.speech import Speech
    from faceweave.video.pipeline import VideoSwapper


class SwapWork:
    """The per-frame work of one video swap, as a
    :class:`~faceweave.video.stream.FrameWork`: the scheduled detections on
    the decoder thread, tracking and planning in frame order (the run's
    :class:`TrackStates`), rendering on the render threads (``speech``: what
    the lip syncer follows, frame by frame).  Counts the frames and faces
    swapped, and the milliseconds of each stage."""

    def __init__(
        self,
        video: VideoSwapper,
        tracker: FaceTracker,
        sources: Sequence[SourceFace],
        reference: np.ndarray | None,
        mapping: PeopleMap | None,
        speech: Speech | None = None,
    ) -> None:
        self.video, self.tracker = video, tracker
        self.sources, self.reference, self.mapping = sources, reference, mapping
        self.speech = speech
        self.states = TrackStates()
        self.frames_with_swap = self.faces_swapped = 0
        self._timings: dict[str, float] = {}  # the planning thread's
        self._detect_timings: dict[str, float] = {}  # only the decoder thread writes it
        self._render_timings: dict[str, float] = {}  # the render threads', under the lock
        self._lock = threading.Lock()

    def ahead(self, frame: VideoFrame) -> list[Face] | None:
        """The frame's scheduled detection (the schedule depends only on the
        frame index), or None."""
        if not self.tracker.due(frame.index):
            return None
        with timed(self._detect_timings, "detect"):
            return self.tracker.detect_ahead(frame.pixels)

    def plan(self, frame: VideoFrame, found: list[Face] | None) -> list[PlannedFace] | None:
        plan = self.video.plan_frame(
            frame, self.tracker, self.sources, self.reference, self._timings, self.mapping, found, states=self.states
        )
        self.frames_with_swap += bool(plan)
        self.faces_swapped += len(plan)
        # a frame enhancer, colorizer or background remover changes every frame, faces or not
        return plan if plan or self.video.swapper.enhancers.whole_frame else None

    def words(self, frame: VideoFrame) -> np.ndarray | None:
        """The frame's window of the run's speech (``None``: none, silence)."""
        return None if self.speech is None else self.speech.at(frame.time)

    def render(self, frame: VideoFrame, plan: list[PlannedFace]) -> np.ndarray:
        frame_timings: dict[str, float] = {}
        rendered = self.video.render(frame.pixels, plan, frame_timings, speech=self.words(frame))
        with self._lock:
            _add(self._render_timings, frame_timings)
        return rendered

    def render_batch(self, frames: Sequence[tuple[VideoFrame, list[PlannedFace]]]) -> list[np.ndarray]:
        batch_timings: dict[str, float] = {}
        pairs = [(frame.pixels, plan) for frame, plan in frames]
        speech = [self.words(frame) for frame, _ in frames]
        rendered = self.video.render_batch(pairs, batch_timings, speech=speech)
        with self._lock:
            _add(self._render_timings, batch_timings)
        return rendered

    def timings_ms(self) -> dict[str, float]:
        """Milliseconds per stage: tracking and planning, then rendering, then detection."""
        timings = dict(self._timings)
        _add(timings, self._render_timings)
        _add(timings, self._detect_timings)
        return timings


def _add(total: dict[str, float], more: dict[str, float]) -> None:
    for key, value in more.items():
        total[key] = total.get(key, 0.0) + value
