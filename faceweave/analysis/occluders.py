"""The occluder models of a swap: what is in front of a face that colour
alone cannot tell.  The person segmentation keeps non-person objects (a
ball, a microphone) in front; the hand model keeps skin-coloured hands in
front.  :class:`Occluders` owns both and their locks, so a swapper holds
one component and closes it with itself."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from faceweave.analysis.hands import HandDetector
from faceweave.analysis.segmenter import SelfieSegmenter
from faceweave.options import MaskOptions
from faceweave.timing import timed


@dataclass(frozen=True, eq=False)
class OccluderMasks:
    """What the occluder models found in one ``(S, S, 3)`` crop: ``person``
    ``(S, S)`` float32 in ``[0, 1]`` (1 = person), ``hands`` ``(S, S)``
    float32 in ``[0, 1]`` (1 = hand); ``None`` when that model is off (or,
    for ``hands``, when there is no hand)."""

    person: np.ndarray | None = None
    hands: np.ndarray | None = None


class Occluders:
    """The selfie segmenter and the hand model a swap asked for (either may
    be off).  Graphs are made on :meth:`prepare` or the first use; a
    mediapipe graph runs one image at a time, so each model has its own lock
    (video renders frames on several threads).  Call :meth:`close`, or use
    it as a context manager."""

    def __init__(self, *, segmentation: bool = False, hands: bool = False) -> None:
        self.segmenter = SelfieSegmenter() if segmentation else None
        self.hand_detector = HandDetector() if hands else None
        self._segment_lock = threading.Lock()
        self._hands_lock = threading.Lock()

    @classmethod
    def from_options(cls, masks: MaskOptions) -> Occluders:
        """The models ``masks.segmentation`` and ``masks.hands`` ask for."""
        return cls(segmentation=masks.segmentation, hands=masks.hands)

    def prepare(self) -> None:
        """Make the graphs of the models in use (each once)."""
        if self.segmenter is not None:
            with self._segment_lock:
                self.segmenter.prepare()
        if self.hand_detector is not None:
            with self._hands_lock:
                self.hand_detector.prepare()

    def find(self, rgb: np.ndarray, timings: dict[str, float]) -> OccluderMasks:
        """Run the models in use on an ``(S, S, 3)`` uint8 RGB crop; adds
        their milliseconds to ``timings`` (``"segment"``, ``"hands"``)."""
        person = hands = None
        if self.segmenter is not None:
            with timed(timings, "segment"), self._segment_lock:
                person = self.segmenter.person_mask(rgb)
        if self.hand_detector is not None:
            # a hand has the colour of skin: the occlusion test cannot tell it
            # from the face, the hand model can
            with timed(timings, "hands"), self._hands_lock:
                hands = self.hand_detector.hand_mask(rgb)
        return OccluderMasks(person=person, hands=hands)

    def close(self) -> None:
        """Close the models' graphs (they are made again if used after)."""
        if self.segmenter is not None:
            with self._segment_lock:
                self.segmenter.close()
        if self.hand_detector is not None:
            with self._hands_lock:
                self.hand_detector.close()

    def __enter__(self) -> Occluders:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
