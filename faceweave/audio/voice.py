"""Voice extractors: FaceFusion's ``voice_extractor`` (Kim Vocal 1 and 2,
UVR MDX-Net), which keep the voice of an audio track and drop the music
and noise under it, so that the lip syncer follows the speech.

The model takes ``input`` ``[B, 4, 3072, 256]``: the real and imaginary
parts of both channels' short-time Fourier transform (7,680 samples, hop
1,024: 256 columns, the first 3,072 of 3,841 bins), and gives the same for
the voice.  The audio goes through in chunks of 240 x 1,024 samples, a
chunk every 180 x 1,024 (the overlaps averaged); each chunk is padded by
3,840 samples a side, cut into pieces of ``255 x 1,024`` samples, and put
back with the inverse transform, as FaceFusion's ``batch_extract_voice``.
"""

from __future__ import annotations

import numpy as np
import scipy.signal

from faceweave import names
from faceweave.enhancers.base import InferenceModel, find_input, first_output, is_dynamic, tensor_dtype
from faceweave.errors import InvalidOptionError, ModelSignatureError

#: samples per chunk given to the model in one call, and between chunks
CHUNK = 240 * 1024
STEP = 180 * 1024
#: samples each piece is padded by a side, the STFT's length and overlap, bins kept and channels
TRIM = 3840
FRAME = 7680
OVERLAP = 6656
BINS = 3072
CHANNELS = 4


def _window() -> np.ndarray:
    return scipy.signal.windows.hann(FRAME)


def pieces(chunk: np.ndarray, size: int) -> tuple[np.ndarray, int]:
    """``chunk`` ``(2, N)`` int16 as float pieces ``(2 P, size)`` that
    overlap by ``2 TRIM``, and the padding added at the end."""
    step = size - 2 * TRIM
    pad = step - chunk.shape[1] % step
    total = chunk.shape[1] + pad
    audio = np.pad(chunk.astype(np.float32) / np.iinfo(np.int16).max, ((0, 0), (TRIM, TRIM + pad)))
    parts = np.concatenate([audio[:, i : i + size] for i in range(0, total, step)], axis=0)
    return parts.reshape((-1, size)), pad


def decompose(parts: np.ndarray) -> np.ndarray:
    """Pieces ``(2 P, size)`` -> the model's ``(P, 4, 3072, columns)``."""
    window = _window()
    spec = scipy.signal.stft(parts, nperseg=FRAME, noverlap=OVERLAP, window=window)[2]
    spec = np.stack((np.real(spec), np.imag(spec)), axis=-1).transpose((0, 3, 1, 2))
    spec = spec.reshape(-1, 2, 2, TRIM + 1, spec.shape[-1]).reshape(-1, CHANNELS, TRIM + 1, spec.shape[-1])
    spec = spec[:, :, :BINS]
    spec /= np.sqrt(1.0 / window.sum() ** 2)
    return spec


def compose(spec: np.ndarray) -> np.ndarray:
    """The model's ``(P, 4, 3072, columns)`` back to samples ``(2 P, size)``."""
    window = _window()
    spec = np.pad(spec, ((0, 0), (0, 0), (0, TRIM + 1 - BINS), (0, 0)))
    spec = spec.reshape(-1, 2, TRIM + 1, spec.shape[-1]).transpose((0, 2, 3, 1))
    spec = spec[:, :, :, 0] + 1j * spec[:, :, :, 1]
    audio = scipy.signal.istft(spec, nperseg=FRAME, noverlap=OVERLAP, window=window)[1]
    audio *= np.sqrt(1.0 / window.sum() ** 2)
    return audio


def joined(audio: np.ndarray, size: int, pad: int) -> np.ndarray:
    """Pieces ``(2 P, size)`` -> the chunk's ``(N, 2)`` samples, the padding cut."""
    audio = audio.reshape((-1, 2, size))[:, :, TRIM:-TRIM].transpose(1, 0, 2)
    return audio.reshape(2, -1)[:, :-pad].T


class VoiceExtractor:
    """Keep the voice of ``(N, 2)`` int16 audio at 48 kHz with one voice
    extractor model (the caller owns ``model``)."""

    def __init__(self, model: InferenceModel, *, name: str) -> None:
        if name not in names.VOICE_EXTRACTORS:
            raise InvalidOptionError(names.unknown("voice extractor", name, names.VOICE_EXTRACTORS))
        self.name, self.model = name, model
        info = find_input(model, "input", model_name=name)
        shape = list(info.shape)
        wrong = any(not is_dynamic(d) and int(d) != w for d, w in zip(shape[1:3], (CHANNELS, BINS), strict=False))
        if len(shape) != 4 or wrong:
            raise ModelSignatureError(f"{name}: input 'input' expected shape [N, 4, 3072, 256], got {shape}")
        self._columns = 256 if is_dynamic(shape[3]) else int(shape[3])
        self._dtype = tensor_dtype(info)

    @property
    def piece(self) -> int:
        """Samples in one piece the model sees (``(columns - 1) x 1024``)."""
        return (self._columns - 1) * 1024

    def extract(self, audio: np.ndarray) -> np.ndarray:
        """``(N, 2)`` float32: the voice of ``audio`` (``(N, 2)`` int16)."""
        audio = np.asarray(audio)
        if audio.ndim != 2 or audio.shape[1] != 2:
            raise ValueError(f"expected (N, 2) stereo samples, got shape {audio.shape}")
        voice = np.zeros(audio.shape, np.float32)
        counts = np.zeros(audio.shape, np.float32)
        for start in range(0, audio.shape[0], STEP):
            end = min(start + CHUNK, audio.shape[0])
            voice[start:end] += self.extract_chunk(audio[start:end])
            counts[start:end] += 1
        return voice / np.maximum(counts, 1)

    def extract_chunk(self, chunk: np.ndarray) -> np.ndarray:
        """One chunk ``(n, 2)`` int16 through the model: ``(n, 2)`` float."""
        size = self.piece
        parts, pad = pieces(chunk.T, size)
        spec = decompose(parts)
        out = first_output(self.model, self.model.run({"input": spec.astype(self._dtype, copy=False)}))
        if out.shape != spec.shape:
            raise ModelSignatureError(f"{self.name}: output expected shape {list(spec.shape)}, got {list(out.shape)}")
        return joined(compose(np.asarray(out, np.float32)), size, pad)
