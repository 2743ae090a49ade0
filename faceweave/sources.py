"""Source photos made into prepared source faces, and the reference face.

:func:`read_input` decodes whatever a caller may pass as a picture;
:class:`SourceCache` finds the face of each source photo, cuts its working
crop, lets the swapper precompute what it needs, and keeps the last few
prepared faces (keyed by :func:`source_key`) so that a source given again is
not prepared again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from faceweave.analysis import FaceAnalyser
from faceweave.compositing.occlusion import source_clean_map
from faceweave.crops import cut_crop
from faceweave.errors import InputError, ModelError, NoFaceError
from faceweave.io import image_from_array, read_image
from faceweave.options import SwapOptions
from faceweave.swappers import SourceFace, Swapper
from faceweave.types import Face, Image

#: what a picture may be given as: a path, encoded bytes, an Image, or an RGB array
ImageInput = str | os.PathLike | bytes | Image | np.ndarray

#: prepared source faces a :class:`SourceCache` keeps (the most recently used)
SOURCE_CACHE = 16


def read_input(value: ImageInput, *, role: str, max_pixels: int) -> Image:
    """Decode a path, bytes, :class:`Image` or array into an :class:`Image`
    (``role``: ``"source"``, ``"target"``, ... for the error messages)."""
    if isinstance(value, Image):
        return value
    if isinstance(value, np.ndarray):
        return image_from_array(value)
    if isinstance(value, (str, os.PathLike, bytes, bytearray)):
        return read_image(
            value if isinstance(value, (bytes, bytearray)) else Path(value),
            max_pixels=max_pixels,
            role=f"{role} image",
        )
    raise InputError(f"{role} image must be a path, bytes, an Image or a numpy array; got {type(value).__name__}")


def source_key(value: ImageInput) -> tuple | None:
    """What identifies a source image's content, so that a source given again
    (the same file, unchanged; the same bytes; an equal array) is not
    prepared again: a file's resolved path, size and modification time, or
    a BLAKE2 digest of bytes or pixels.  ``None`` for a file that cannot be
    looked at (reading it will say why)."""
    if isinstance(value, (str, os.PathLike)):
        try:
            path = Path(value).resolve()
            stat = path.stat()
        except OSError:
            return None
        return ("file", str(path), stat.st_size, stat.st_mtime_ns)
    if isinstance(value, (bytes, bytearray)):
        return ("bytes", hashlib.blake2b(bytes(value), digest_size=16).digest())
    pixels = value.pixels if isinstance(value, Image) else value
    if isinstance(pixels, np.ndarray):
        data = np.ascontiguousarray(pixels)
        digest = hashlib.blake2b(data.data, digest_size=16).digest()
        return ("pixels", data.shape, str(data.dtype), digest, value.path if isinstance(value, Image) else None)
    return None


def largest(faces: Sequence[Face]) -> Face:
    """The face with the largest box."""
    return max(faces, key=lambda f: f.bbox.area)


class SourceCache:
    """Prepared source faces for one analyser and swapper.

    ``capacity``: how many prepared faces to keep for reuse (0: none; a
    server handling other people's photos keeps none).  Thread-safe: video
    renders on several threads."""

    def __init__(self, analyser: FaceAnalyser, swapper: Swapper, *, options: SwapOptions, capacity: int) -> None:
        self.analyser = analyser
        self.swapper = swapper
        self.options = options
        self.capacity = max(0, int(capacity))
        self._known: OrderedDict[tuple, SourceFace] = OrderedDict()
        self._lock = threading.Lock()

    def read(self, value: ImageInput, *, role: str) -> Image:
        """:func:`read_input` with the options' pixel limit."""
        return read_input(value, role=role, max_pixels=self.options.max_pixels)

    def load(self, sources: Sequence[ImageInput] | ImageInput) -> list[SourceFace]:
        """Find the (largest) face in each source photo and prepare it, or
        reuse the prepared face of a source given before (the same file
        unchanged, the same bytes or pixels: :func:`source_key`; the last
        ``capacity`` of them are kept).  ``index`` follows the list."""
        if isinstance(sources, (str, os.PathLike, bytes, Image, np.ndarray)):
            sources = [sources]
        if not sources:
            raise InputError("at least one source image is needed")
        return [dataclasses.replace(self._get(value), index=index) for index, value in enumerate(sources)]

    def _get(self, value: ImageInput) -> SourceFace:
        key = source_key(value) if self.capacity > 0 else None
        if key is None:
            return self.prepare(value)
        with self._lock:
            known = self._known.get(key)
            if known is not None:
                self._known.move_to_end(key)
                return known
        known = self.prepare(value)
        with self._lock:
            self._known[key] = known
            while len(self._known) > self.capacity:
                self._known.popitem(last=False)
        return known

    def prepare(self, value: ImageInput) -> SourceFace:
        """One source photo's largest face, cut, with its clean map (when
        the occlusion mask is on) and the swapper's precomputed data (made
        from the photo itself: a neural swapper aligns the face from it at its
        own resolution; the photo is not kept)."""
        image = self.read(value, role="source")
        faces = self.analyser.analyse(image.pixels, small_faces=False) or self.analyser.analyse(image.pixels)
        if not faces:
            raise NoFaceError(f"no face found in source image {image.label}", role="source", path=image.path)
        face = largest(faces)
        crop = cut_crop(image.pixels, face, face_size=self.options.working_size)
        clean = source_clean_map(crop) if self.options.masks.occlusion else None
        source = SourceFace(index=0, path=image.path, face=face, crop=crop, clean=clean, image=image.pixels)
        return dataclasses.replace(self.swapper.prepare_source(source), image=None)

    def reference_embedding(self, reference: ImageInput) -> np.ndarray:
        """``(128,)`` identity embedding of the largest face of ``reference``.

        Raises:
            NoFaceError: no face in the reference image (``role="reference"``).
            ModelError: the analyser's embedder gave no embedding.
        """
        image = self.read(reference, role="reference")
        faces = self.analyser.analyse(image.pixels)
        if not faces:
            raise NoFaceError(f"no face found in reference image {image.label}", role="reference", path=image.path)
        embedding = self.analyser.embed(image.pixels, largest(faces)).embedding
        if embedding is None:
            raise ModelError(f"the face embedder gave no embedding for the face in reference image {image.label}")
        return embedding

    def clear(self) -> None:
        """Forget every prepared face."""
        with self._lock:
            self._known.clear()
