"""The lip syncer's audio features, as FaceFusion 3.x computes them
(``facefusion/audio.py``): pure functions of the samples.

The voice (48 kHz, after the voice extractor) is resampled to 16 kHz,
averaged to mono, scaled to a peak of 1 and pre-emphasised
(``y[n] = x[n] - 0.97 x[n-1]``); its short-time Fourier transform (800
samples, hop 200: 80 columns a second) is summed through 80 triangular mel
filters from 55 to 7,600 Hz.  Video frame ``k`` (at ``fps``) gets the 16
columns (0.2 s) that end at FaceFusion's index for it
(:func:`frame_ends`), and the model takes
``clip(log10(max(m, 1e-5)) * 1.6 + 3.2, -4, 4)`` of them
(:func:`speech_input`).  One difference: a silent input (a peak of 0),
which FaceFusion divides by zero into NaN, stays silent here.
"""

from __future__ import annotations

import numpy as np
import scipy.signal

#: the rate the features are computed at
FEATURE_RATE = 16_000
#: mel filters, and the columns of one frame's window
MEL_FILTERS = 80
WINDOW_COLUMNS = 16
#: STFT length and overlap (hop 200 samples: 80 columns a second at 16 kHz)
MEL_BINS = 800
MEL_OVERLAP = 600
#: the silence a frame without speech gets (FaceFusion's ``create_empty_audio_frame``)
SILENCE = np.zeros((MEL_FILTERS, WINDOW_COLUMNS), np.float64)


def prepare_audio(audio: np.ndarray) -> np.ndarray:
    """Mono (the channels' mean), scaled to a peak of 1, pre-emphasised
    (in the input's float type, as FaceFusion)."""
    audio = np.asarray(audio)
    if audio.ndim > 1:
        audio = np.mean(audio, axis=1)
    peak = float(np.max(np.abs(audio))) if audio.size else 0.0
    if peak > 0.0:
        audio = audio / peak
    return scipy.signal.lfilter([1.0, -0.97], [1.0], audio)


def prepare_voice(audio: np.ndarray, rate: int = 48_000) -> np.ndarray:
    """``audio`` ``(N, C)`` at ``rate`` resampled to :data:`FEATURE_RATE`
    (by FFT, over the whole signal, as FaceFusion) and :func:`prepare_audio`'d."""
    audio = np.asarray(audio)
    count = round(len(audio) * FEATURE_RATE / rate)
    return prepare_audio(scipy.signal.resample(audio, count))


def _hertz_to_mel(hertz: float) -> float:
    return float(2595 * np.log10(1 + hertz / 700))


def mel_filter_bank() -> np.ndarray:
    """``(80, 401)`` triangular filters over the STFT's bins."""
    bank = np.zeros((MEL_FILTERS, MEL_BINS // 2 + 1))
    mels = np.linspace(_hertz_to_mel(55.0), _hertz_to_mel(7600.0), MEL_FILTERS + 2)
    hertz = 700 * (10 ** (mels / 2595) - 1)
    edges = np.floor((MEL_BINS + 1) * hertz / FEATURE_RATE).astype(np.int16)
    for k in range(MEL_FILTERS):
        start, end = int(edges[k]), int(edges[k + 1])
        bank[k, start:end] = scipy.signal.windows.triang(end - start)
    return bank


def spectrogram(audio: np.ndarray) -> np.ndarray:
    """``(80, T)`` mel magnitudes of prepared mono ``audio`` at 16 kHz."""
    stft = scipy.signal.stft(audio, nperseg=MEL_BINS, nfft=MEL_BINS, noverlap=MEL_OVERLAP)[2]
    return np.dot(mel_filter_bank(), np.abs(stft))


def frame_ends(columns: int, fps: float) -> np.ndarray:
    """The column each video frame's window ends at, frame 0 first:
    FaceFusion's ``extract_audio_frames`` (steps of ``80 / fps`` columns, cut
    to 16-bit, those under 16 dropped)."""
    ends = np.arange(0, columns, MEL_FILTERS / fps).astype(np.int16)
    return ends[ends >= WINDOW_COLUMNS]


def frame_window(mel: np.ndarray, ends: np.ndarray, number: int) -> np.ndarray | None:
    """Frame ``number``'s ``(80, 16)`` window of ``mel``, or ``None`` past the speech."""
    if not 0 <= number < len(ends):
        return None
    end = int(ends[number])
    return mel[:, max(0, end - WINDOW_COLUMNS) : end]


def speech_input(window: np.ndarray | None, *, scale: float | None = None) -> np.ndarray:
    """The model's ``[1, 1, 80, 16]`` float32 ``source`` for a frame's mel
    ``window`` (``None`` or all zero: :data:`SILENCE`); ``scale``: Wav2Lip's
    ``lip_syncer_weight * 2`` (EDTalk takes its weight as an input)."""
    if window is None or not np.any(window):
        window = SILENCE
    x = np.log10(np.maximum(np.exp(-5 * np.log(10)), window)) * 1.6 + 3.2
    x = x.clip(-4, 4).astype(np.float32)
    if scale is not None:
        x = x * scale
    return np.expand_dims(x, axis=(0, 1))
