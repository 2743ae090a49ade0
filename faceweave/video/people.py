"""The distinct people of a video: faces sampled through the video, grouped
by identity (dlib embeddings), each person with a thumbnail."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from faceweave.analysis import FaceAnalyser, embedding_distance
from faceweave.video.io import VideoReader

#: two faces closer than this (dlib L2) are the same person
SAME_PERSON = 0.55


@dataclass
class Person:
    """One person found in the video (built up while scanning)."""

    index: int
    embeddings: list[np.ndarray] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    thumbnail: np.ndarray | None = None
    thumbnail_size: float = 0.0

    @property
    def centre(self) -> np.ndarray:
        return np.mean(self.embeddings, axis=0)

    def summary(self) -> dict:
        return {
            "person": self.index,
            "appearances": len(self.times),
            "first_seen": round(min(self.times), 2),
            "last_seen": round(max(self.times), 2),
        }


def assign(people: list[Person], embedding: np.ndarray, *, threshold: float = SAME_PERSON) -> Person:
    """The person an embedding belongs to (nearest centre within
    ``threshold``), or a new person appended to ``people``."""
    best = min(people, key=lambda p: embedding_distance(p.centre, embedding), default=None)
    if best is not None and embedding_distance(best.centre, embedding) < threshold:
        return best
    person = Person(index=len(people))
    people.append(person)
    return person


def find_people(
    path: str | os.PathLike,
    analyser: FaceAnalyser,
    *,
    every: float = 0.5,
    min_appearances: int = 1,
    max_pixels: int | None = None,
    max_frames: int | None = None,
    max_seconds: float | None = None,
) -> list[Person]:
    """The people of a video, most often seen first (``index`` renumbered in
    that order): faces are detected on a frame every ``every`` seconds.
    ``max_pixels``, ``max_frames``, ``max_seconds``: the reader's limits."""
    from faceweave.evaluate.sheet import face_thumbnail

    people: list[Person] = []
    next_time = 0.0
    with VideoReader(path, max_pixels=max_pixels, max_frames=max_frames, max_seconds=max_seconds) as reader:
        for frame in reader:
            if frame.time + 1e-6 < next_time:
                continue
            next_time = frame.time + every
            for face in analyser.analyse(frame.pixels):
                embedding = analyser.embedding(frame.pixels, face)
                person = assign(people, embedding)
                person.embeddings.append(embedding)
                person.times.append(frame.time)
                if face.size > person.thumbnail_size:
                    person.thumbnail = face_thumbnail(frame.pixels, face.bbox, size=160)
                    person.thumbnail_size = face.size
    kept = sorted((p for p in people if len(p.times) >= min_appearances), key=lambda p: -len(p.times))
    for index, person in enumerate(kept):
        person.index = index
    return kept


def people_sheet(people: list[Person]) -> np.ndarray:
    """``(H, W, 3)`` uint8 sheet: one thumbnail per person with its index."""
    from faceweave.evaluate.sheet import SheetRow, contact_sheet

    rows = [
        SheetRow(
            tiles=(p.thumbnail,),
            lines=(f"person {p.index}", f"{len(p.times)} x, {min(p.times):.1f}-{max(p.times):.1f} s"),
        )
        for p in people
        if p.thumbnail is not None
    ]
    return contact_sheet(rows)
