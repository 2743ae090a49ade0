"""The speech a video's lips follow: :class:`Speech`, the mel spectrogram
of an audio track and the window of it that goes with each frame."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from faceweave.audio.features import frame_ends, frame_window, prepare_voice, spectrogram
from faceweave.audio.reading import SAMPLE_RATE, read_audio
from faceweave.audio.voice import VoiceExtractor
from faceweave.errors import InvalidOptionError


@dataclass(frozen=True, eq=False)
class Speech:
    """An audio track's ``(80, T)`` mel spectrogram ``mel`` (80 columns a
    second), for a video at ``fps`` whose frame at time ``offset`` (seconds
    on the video's timeline) goes with the spectrogram's start."""

    mel: np.ndarray
    fps: float
    offset: float = 0.0

    def __post_init__(self) -> None:
        if not self.fps > 0:
            raise InvalidOptionError(f"the video's frame rate must be above 0 to follow speech; got {self.fps}")

    @cached_property
    def ends(self) -> np.ndarray:
        """The column each frame's window ends at (:func:`~faceweave.audio.features.frame_ends`)."""
        return frame_ends(self.mel.shape[1], self.fps)

    @property
    def frames(self) -> int:
        """How many frames have speech (from ``offset`` on)."""
        return len(self.ends)

    def window(self, number: int) -> np.ndarray | None:
        """The ``(80, 16)`` window of frame ``number`` (counted from
        ``offset``), ``None`` past the audio's end."""
        return frame_window(self.mel, self.ends, number)

    def at(self, time: float) -> np.ndarray | None:
        """The window of the frame at ``time`` seconds of the video."""
        return self.window(int(round((time - self.offset) * self.fps)))


def samples_speech(
    samples: np.ndarray, *, fps: float, offset: float = 0.0, extractor: VoiceExtractor | None = None
) -> Speech:
    """:class:`Speech` of ``(N, 2)`` int16 samples at 48 kHz, their voice
    kept by ``extractor`` first (``None``: as they are)."""
    voice = extractor.extract(samples) if extractor is not None else np.asarray(samples, np.float32)
    return Speech(spectrogram(prepare_voice(voice, SAMPLE_RATE)), fps=fps, offset=offset)


def read_speech(
    path: str | os.PathLike[str],
    *,
    fps: float,
    start: float = 0.0,
    end: float | None = None,
    offset: float = 0.0,
    extractor: VoiceExtractor | None = None,
) -> Speech:
    """:class:`Speech` of the audio of ``path`` from ``start`` to ``end``
    seconds of it, for frames whose time ``offset`` goes with ``start``
    (see :func:`~faceweave.audio.reading.read_audio` for the errors)."""
    samples = read_audio(path, start=start, end=end, what="lip syncer audio")
    return samples_speech(samples, fps=fps, offset=offset, extractor=extractor)
