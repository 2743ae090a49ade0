"""Deciding, frame by frame, which tracked face gets which source, and the
colour mapping held for it (:class:`FramePlanner`).

What the planner remembers of a track between frames (the person it is, its
held skin colour) is a typed :class:`TrackState` in a :class:`TrackStates`
that the run owns, keyed by track id: the tracker's :class:`Track` holds
only what tracking needs, and a track's state goes when the track ends."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from faceweave.compositing.colour import ColourMatch, SkinColour, skin_colour
from faceweave.compositing.plans import HeldPlan, PlanPolicy, PlanUse, crop_layout
from faceweave.crops import CROP_MARGIN, cut_crop, working_face_size
from faceweave.errors import NoMatchingFaceError
from faceweave.geometry.align import crop_matrix
from faceweave.pipeline import FaceSwapper
from faceweave.selection import order_faces, select_faces
from faceweave.swappers import SourceFace
from faceweave.timing import timed
from faceweave.types import Face
from faceweave.video.io import VideoFrame
from faceweave.video.tracker import Track

#: seconds over which a face's target skin colour follows the picture
COLOUR_TIME = 0.5
#: face size of the small crop the target skin colour is measured on
COLOUR_FACE_SIZE = 64
#: the target skin colour is measured again at most this often (seconds)
COLOUR_INTERVAL = 0.1


class PlannedFace(NamedTuple):
    """One face of a frame to swap: where, with which source, the colour
    mapping held for its track, and whether it makes or reuses its track's
    face plan (:mod:`faceweave.compositing.plans`); ``source`` ``None``: the
    face is kept (swapper ``none``), only the processors run on it."""

    face: Face
    source: SourceFace | None
    colour: ColourMatch | None = None
    plan: PlanUse | None = None


@dataclass(frozen=True, eq=False)
class PeopleMap:
    """A source per person of the video (``faceweave people`` indices):
    ``centres`` ``(P, 128)`` the people's mean embeddings, ``sources`` the
    prepared sources of the mapped people."""

    centres: np.ndarray
    sources: dict[int, list[SourceFace]]
    threshold: float = 0.65

    def person_of(self, embedding: np.ndarray) -> int | None:
        """The index of the nearest person within the threshold, or None."""
        if len(self.centres) == 0:
            return None
        distances = np.linalg.norm(self.centres - embedding[None, :], axis=1)
        best = int(np.argmin(distances))
        return best if distances[best] < self.threshold else None


@dataclass(frozen=True, eq=False)
class HeldColour:
    """A track's target skin colour for ``source``, last measured at ``time`` (seconds)."""

    source: SourceFace
    target: SkinColour
    time: float


@dataclass(frozen=True)
class TrackState:
    """What the planner remembers of one track between frames: with a
    :class:`PeopleMap`, whether the track's person was looked up
    (``identified``; done once per track) and who it is (``None``: nobody
    mapped); the skin colour held for it (``None`` until measured); and its
    current face plan (``None`` until the first frame makes one)."""

    identified: bool = False
    person: int | None = None
    colour: HeldColour | None = None
    plan: HeldPlan | None = None


class TrackStates:
    """The :class:`TrackState` of each live track of one tracker, by track id
    (ids are never reused: a new face, or any face after a scene cut, starts
    afresh).  Only the planning thread uses it."""

    def __init__(self) -> None:
        self._states: dict[int, TrackState] = {}

    def of(self, track_id: int) -> TrackState:
        """The state of a track (a fresh one for a track not seen before)."""
        return self._states.get(track_id, TrackState())

    def set(self, track_id: int, state: TrackState) -> None:
        self._states[track_id] = state

    def keep(self, track_ids: Iterable[int]) -> None:
        """Drop the states of tracks that ended (those not in ``track_ids``)."""
        live = set(track_ids)
        for ended in [i for i in self._states if i not in live]:
            del self._states[ended]


class FramePlanner:
    """Which source each tracked face of a frame gets, with a
    :class:`FaceSwapper`'s selection options and models; each source's skin
    colour is measured once per planner; ``policy``: when a track's face
    plan is made anew."""

    def __init__(self, swapper: FaceSwapper, policy: PlanPolicy = PlanPolicy()) -> None:
        self.swapper = swapper
        self.policy = policy
        self._source_colours: dict[SourceFace, SkinColour] = {}

    def plan(
        self,
        frame: VideoFrame,
        tracks: Sequence[Track],
        states: TrackStates,
        sources: Sequence[SourceFace],
        reference: np.ndarray | None,
        timings: dict[str, float],
        mapping: PeopleMap | None = None,
    ) -> list[PlannedFace]:
        """The faces of ``frame`` to swap (``tracks``: the tracker's, for this
        frame), smaller faces first so that a nearer, larger face ends on top."""
        states.keep(t.id for t in tracks)
        if not tracks:
            return []
        if mapping is not None:
            return self._plan_mapped(frame, tracks, states, mapping, timings)
        faces, indices, picked = self._selected(tracks, frame.pixels, reference)
        if self.swapper.keeps_faces:
            return [PlannedFace(faces[i], None) for i in sorted(indices, key=lambda k: faces[k].bbox.area)]
        plan = []
        for i in sorted(indices, key=lambda k: faces[k].bbox.area):
            source = self.swapper.choose_source(sources, faces[i])
            plan.append(self._planned(frame, picked[i], faces[i], states, source, timings))
        return plan

    def _selected(
        self, tracks: Sequence[Track], pixels: np.ndarray, reference: np.ndarray | None
    ) -> tuple[list[Face], list[int], list[Track]]:
        """The faces in selection order, the selected indices, and the track
        of each face (same order)."""
        faces = [t.face for t in tracks]
        if reference is not None:
            embedded = []
            for track in tracks:
                if track.embedding is None:
                    track.embedding = self.swapper.analyser.embedding(pixels, track.face)
                embedded.append(track.face.with_embedding(track.embedding))
            faces = embedded
        order = order_faces(faces, self.swapper.options.selection.order)
        faces, ordered = [faces[i] for i in order], [tracks[i] for i in order]
        try:
            return faces, select_faces(faces, self.swapper.options.selection, reference=reference), ordered
        except NoMatchingFaceError:
            return faces, [], ordered

    def _plan_mapped(
        self,
        frame: VideoFrame,
        tracks: Sequence[Track],
        states: TrackStates,
        mapping: PeopleMap,
        timings: dict[str, float],
    ) -> list[PlannedFace]:
        """Each tracked face that belongs to a mapped person gets that
        person's source (the track's person is found once)."""
        plan = []
        for track in sorted(tracks, key=lambda t: t.face.bbox.area):
            state = states.of(track.id)
            if not state.identified:
                with timed(timings, "embed"):
                    embedding = self.swapper.analyser.embedding(frame.pixels, track.face)
                state = replace(state, identified=True, person=mapping.person_of(embedding))
                states.set(track.id, state)
            sources = mapping.sources.get(state.person) if state.person is not None else None
            if sources:
                source = self.swapper.choose_source(sources, track.face)
                plan.append(self._planned(frame, track, track.face, states, source, timings))
        return plan

    def _planned(
        self,
        frame: VideoFrame,
        track: Track,
        face: Face,
        states: TrackStates,
        source: SourceFace,
        timings: dict[str, float],
    ) -> PlannedFace:
        """``face`` (``track``'s) with its source, held colour and plan use."""
        colour = self._colour(frame, track, states, source, timings)
        return PlannedFace(face, source, colour, self._plan_use(frame, track, states, source, colour))

    def _plan_use(
        self, frame: VideoFrame, track: Track, states: TrackStates, source: SourceFace, colour: ColourMatch
    ) -> PlanUse:
        """Whether this frame makes the track's face plan anew or reuses it
        (:class:`PlanPolicy`, from the face's mesh in its working crop)."""
        size = working_face_size(track.face, self.swapper.options.working_size)
        matrix, _ = crop_matrix(track.face.bbox, face_size=size, margin=CROP_MARGIN)
        state = states.of(track.id)
        use, held = self.policy.use(
            state.plan,
            frame=frame.index,
            source=source,
            layout=crop_layout(track.face.require_mesh(), matrix, size),
            face_size=size,
            light=colour.target.mean,
        )
        states.set(track.id, replace(state, plan=held))
        return use

    def _source_colour(self, source: SourceFace) -> SkinColour:
        colour = self._source_colours.get(source)
        if colour is None:
            colour = self._source_colours[source] = skin_colour(source.crop, source.clean)
        return colour

    def _colour(
        self, frame: VideoFrame, track: Track, states: TrackStates, source: SourceFace, timings: dict[str, float]
    ) -> ColourMatch:
        """The colour mapping of a tracked face, held steady over the shot:
        the source's skin colour is measured once, the target's follows the
        face's skin with an exponential moving average (time constant
        ``COLOUR_TIME`` seconds, measured every ``COLOUR_INTERVAL``),
        restarted for a new track (a new face, or any face after a scene cut)
        and when the track's source changes."""
        state = states.of(track.id)
        held = state.colour if state.colour is not None and state.colour.source is source else None
        if held is not None and frame.time - held.time < COLOUR_INTERVAL:
            return ColourMatch(source=self._source_colour(source), target=held.target)
        with timed(timings, "colour"):
            crop = cut_crop(frame.pixels, track.face, face_size=COLOUR_FACE_SIZE)
            now = skin_colour(crop)
            if held is not None:
                step = 1.0 - float(np.exp(-max(frame.time - held.time, 0.0) / COLOUR_TIME))
                now = held.target.towards(now, step)
            states.set(track.id, replace(state, colour=HeldColour(source, now, frame.time)))
            return ColourMatch(source=self._source_colour(source), target=now)
