"""An audio file (or a video's first audio stream) decoded to 48 kHz
stereo 16-bit samples, as FaceFusion has FFmpeg give them to its
``read_voice`` (``-ar 48000 -ac 2 -f s16le``)."""

from __future__ import annotations

import os
from pathlib import Path

import av
import av.error
import numpy as np

from faceweave.errors import InputError, LimitExceededError, UnreadableFileError, UnsupportedFormatError
from faceweave.video.io.probe import file_url

#: the sample rate the voice extractor and the mel features start from
SAMPLE_RATE = 48_000
#: the longest audio read (seconds): four hours is 2.8 GB of samples
MAX_SECONDS = 4 * 3600.0
#: what an audio file may be
ACCEPTED_AUDIO = "an audio file (WAV, MP3, AAC/M4A, FLAC, Ogg/Opus) or a video with an audio stream"


def read_audio(
    path: str | os.PathLike[str], *, start: float = 0.0, end: float | None = None, what: str = "audio"
) -> np.ndarray:
    """``(N, 2)`` int16 samples at :data:`SAMPLE_RATE` of the first audio
    stream of ``path``, from ``start`` to ``end`` seconds (``None``: to its
    end).  Time 0 is the start of the file's timeline (a video's first
    frame where it has one); silence fills a stream that starts later.

    Raises:
        UnreadableFileError: missing, a folder, empty, or corrupt.
        UnsupportedFormatError: not a file FFmpeg reads, or no audio stream.
        LimitExceededError: more than :data:`MAX_SECONDS` asked for.
    """
    label = os.fsdecode(os.fspath(path))
    named = f"{what} '{label}'"
    _check_file(Path(label), named)
    if end is not None and end - start > MAX_SECONDS:
        raise LimitExceededError(f"{named}: {end - start:.0f} s asked for; at most {MAX_SECONDS:.0f} s are read")
    try:
        container = av.open(file_url(label), metadata_errors="replace")
    except av.error.FFmpegError as exc:
        raise UnsupportedFormatError(
            f"{named} is not a file FFmpeg can read ({exc.strerror or type(exc).__name__}); expected {ACCEPTED_AUDIO}"
        ) from None
    with container:
        if not container.streams.audio:
            raise UnsupportedFormatError(f"{named} has no audio stream; expected {ACCEPTED_AUDIO}")
        return _decode(container, start, end, named)


def _check_file(path: Path, what: str) -> None:
    if path.is_dir():
        raise UnreadableFileError(f"{what} is a directory; expected {ACCEPTED_AUDIO}")
    if not path.exists():
        raise UnreadableFileError(f"{what} does not exist; check the path")
    if path.stat().st_size == 0:
        raise UnreadableFileError(f"{what} is empty; expected {ACCEPTED_AUDIO}")


def _origin(container) -> float:
    """Seconds of the timeline's start: the first video frame's, else 0."""
    video = [s for s in container.streams.video if not s.disposition & av.stream.Disposition.attached_pic]
    stream = video[0] if video else None
    if stream is not None and stream.start_time is not None and stream.time_base is not None:
        return float(stream.start_time * stream.time_base)
    return 0.0


def _decode(container, start: float, end: float | None, what: str) -> np.ndarray:
    stream = container.streams.audio[0]
    origin = _origin(container)
    resampler = av.AudioResampler(format="s16", layout="stereo", rate=SAMPLE_RATE)
    parts: list[np.ndarray] = []
    first: float | None = None
    taken = 0
    try:
        for frame in container.decode(stream):
            if first is None:
                first = 0.0 if frame.time is None else float(frame.time) - origin
            for out in resampler.resample(frame):
                parts.append(out.to_ndarray().reshape(-1, 2))
                taken += parts[-1].shape[0]
            if end is not None and taken >= (end - first) * SAMPLE_RATE:
                break  # the window is read
            if taken > MAX_SECONDS * SAMPLE_RATE:
                raise LimitExceededError(f"{what} is longer than {MAX_SECONDS:.0f} s; at most that is read")
        for out in resampler.resample(None):
            parts.append(out.to_ndarray().reshape(-1, 2))
    except av.error.FFmpegError as exc:
        if not parts:
            raise UnreadableFileError(
                f"{what} is corrupt: its audio cannot be decoded ({exc.strerror or type(exc).__name__})"
            ) from None
        # a damaged tail ends the audio, as it ends the audio copied into a video
    if not parts:
        raise InputError(f"{what} has no audio samples; expected {ACCEPTED_AUDIO}")
    samples = np.concatenate(parts).astype(np.int16, copy=False)
    return _window(samples, first or 0.0, start, end)


def _window(samples: np.ndarray, first: float, start: float, end: float | None) -> np.ndarray:
    """The samples of ``[start, end)`` on the timeline, for samples that begin at ``first`` seconds."""
    lead = int(round((first - start) * SAMPLE_RATE))
    if lead > 0:
        samples = np.concatenate((np.zeros((lead, 2), np.int16), samples))
    elif lead < 0:
        samples = samples[-lead:]
    if end is not None:
        samples = samples[: max(0, int(round((end - start) * SAMPLE_RATE)))]
    return np.ascontiguousarray(samples)
