"""The image face-swap pipeline: :class:`FaceSwapper`.

It composes components that do not know about it: the face analyser, a
swapper from the registry, pure compositing functions and paste-back.
Video (later) reuses :meth:`FaceSwapper.load_sources` and
:meth:`FaceSwapper.swap_faces` frame by frame.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np

from faceweave.analysis import FaceAnalyser, mesh_box
from faceweave.analysis.hands import HandDetector
from faceweave.analysis.segmenter import SelfieSegmenter
from faceweave.compositing.blend import match_detail, paste_back
from faceweave.compositing.colour import ColourMatch
from faceweave.compositing.composite import composite
from faceweave.compositing.occlusion import source_clean_map
from faceweave.compositing.values import Composite
from faceweave.errors import InputError, NoFaceError
from faceweave.geometry.align import crop_matrix, transform_points
from faceweave.geometry.expression import ExpressionCorrection, expression_ratios, next_correction
from faceweave.io import image_from_array, read_image
from faceweave.options import SwapOptions
from faceweave.provenance.stamp import Provenance, stamp_image
from faceweave.selection import order_faces, select_faces
from faceweave.swappers import AlignedCrop, SourceFace, SwapOutput, create_swapper
from faceweave.threads import single_threaded_blas
from faceweave.timing import timed
from faceweave.types import Face, Image, SwappedFace, SwapResult

ImageInput = str | os.PathLike | bytes | Image | np.ndarray

log = logging.getLogger("faceweave")

#: crop side over face size: room for the reshaping warp and the blend
CROP_MARGIN = 1.8
#: smallest face size in a working crop, pixels
MIN_WORKING_SIZE = 96
#: the expression check: a ratio (over the eye distance) read this far from
#: the target's is corrected, with this gain (the reading follows the
#: geometry less than one to one), in at most this many rounds; the eyes too
EXPRESSION_TOLERANCE = 0.01
EXPRESSION_GAIN = 1.7
EXPRESSION_ROUNDS = 1
EXPRESSION_EYES = True
#: faces smaller than this (pixels in the photo) are not checked: their mesh
#: reads too coarsely to correct by, and a correction could not be seen
EXPRESSION_MIN_FACE = 80


def cut_crop(pixels: np.ndarray, face: Face, *, face_size: int) -> AlignedCrop:
    """The square working crop around ``face`` in which the face measures
    ``face_size`` pixels.  Large faces are halved with ``pyrDown`` first so
    that the downscale does not alias."""
    m, side = crop_matrix(face.bbox, face_size=face_size, margin=CROP_MARGIN)
    scale = m[0, 0]
    src, pre = pixels, 1.0
    if scale < 0.5:
        # cut a padded region around the crop and halve it until the rest of the scale is > 1/2
        inv = cv2.invertAffineTransform(m)
        x1, y1 = np.floor(inv[:, 2]).astype(int) - 2
        x2, y2 = np.ceil(inv @ np.array([side, side, 1.0])).astype(int) + 2
        h, w = pixels.shape[:2]
        region = cv2.copyMakeBorder(
            pixels[max(y1, 0) : min(y2, h), max(x1, 0) : min(x2, w)],
            max(0, -y1),
            max(0, y2 - h),
            max(0, -x1),
            max(0, x2 - w),
            cv2.BORDER_REPLICATE,
        )
        offset = np.array([x1, y1], np.float64)
        src = region
        while scale / pre < 0.5 and min(src.shape[:2]) > 8:
            src = cv2.pyrDown(src)
            pre *= 0.5
        m_local = m.copy()
        m_local[:, 2] += m[:, :2] @ offset  # account for the region's origin
        m_local[:, :2] /= pre
        warp = m_local
    else:
        warp = m
    crop = cv2.warpAffine(src, warp, (side, side), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    mesh = transform_points(face.mesh, m)
    return AlignedCrop(pixels=crop, matrix=m, mesh=mesh, face_size=float(face_size))


#: prepared source faces a :class:`FaceSwapper` keeps (the most recently used)
SOURCE_CACHE = 16


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


def _largest(faces: Sequence[Face]) -> Face:
    return max(faces, key=lambda f: f.bbox.area)


class FaceSwapper:
    """Swap faces in images.

    >>> swapper = FaceSwapper()
    >>> result = swapper.swap(["me.jpg"], "photo.jpg")   # doctest: +SKIP
    >>> result.image.shape, [s.target_index for s in result.swapped]  # doctest: +SKIP
    >>> result.save("out.png")  # watermarked pixels, "AI-generated" label  # doctest: +SKIP

    Owns its models; call :meth:`close` or use it as a context manager.
    """

    def __init__(
        self,
        options: SwapOptions = SwapOptions(),
        *,
        analyser: FaceAnalyser | None = None,
        source_cache: int = SOURCE_CACHE,
        provenance: Provenance | None = None,
    ) -> None:
        """``source_cache``: how many prepared source faces to keep for
        reuse (0: none; a server handling other people's photos keeps none).

        ``provenance`` marks what :meth:`swap` returns and the videos a
        :class:`~faceweave.video.pipeline.VideoSwapper` makes with this
        swapper.  ``None`` (the default): each swap and each video is a run of
        its own, ``Provenance.new()``: a new run id, the invisible watermark
        on.  ``Provenance.new(watermark=False)`` turns the watermark off, as
        the CLI's ``--no-watermark`` does: the label still says
        "AI-generated", the result's ``provenance`` keeps the choice, and each
        swap made so logs it (``faceweave`` logger, INFO)."""
        self.options = options
        self.source_cache = max(0, int(source_cache))
        self.provenance = provenance
        self._own_analyser = analyser is None
        self.analyser = analyser if analyser is not None else FaceAnalyser(options.analysis)
        #: ONNX sessions of the neural models (swapper, enhancers), when any is used
        self.pool = None
        self.face_enhancer = self.frame_enhancer = None
        try:
            if options.swapper == "mesh":
                self.swapper = create_swapper("mesh", shape_transfer=options.shape_transfer)
            else:
                self.swapper = create_swapper(
                    options.swapper, pool=self._pool(), provider=self.provider, pixel_boost=options.pixel_boost
                )
            if options.enhance.face is not None or options.enhance.frame is not None:
                from faceweave.enhancers.factory import load_enhancers

                self.face_enhancer, self.frame_enhancer = load_enhancers(
                    options.enhance, pool=self._pool(), provider=self.provider
                )
        except BaseException:
            self.close()
            raise
        self.segmenter = SelfieSegmenter() if options.masks.segmentation else None
        self._segment_lock = threading.Lock()
        self.hand_detector = HandDetector() if options.masks.hands else None
        self._hands_lock = threading.Lock()
        #: prepared source faces by the identity of their image (see :meth:`load_sources`)
        self._sources: OrderedDict[tuple, SourceFace] = OrderedDict()
        self._sources_lock = threading.Lock()

    @property
    def provider(self):
        """The :class:`~faceweave.runtime.ProviderConfig` of the runtime options."""
        from faceweave.runtime import ProviderConfig

        rt = self.options.runtime
        return ProviderConfig(
            name=rt.execution_provider.strip().lower(),
            device_id=rt.device_id,
            trt_engine_cache=rt.tensorrt_cache,
            trt_fp16=rt.tensorrt_fp16,
        )

    def model_loads(self) -> list[dict]:
        """The neural models loaded for this swapper: provider, load and
        warm-up milliseconds (empty for the classical swapper)."""
        if self.pool is None:
            return []
        return [
            {
                "model": r.model,
                "provider": r.provider,
                "requested": r.requested,
                "fell_back": r.fell_back,
                "load_ms": round(r.load_ms, 1),
                "warmup_ms": round(r.warmup_ms, 1),
            }
            for r in self.pool.records
        ]

    def _pool(self):
        if self.pool is None:
            from faceweave.models import ModelStore
            from faceweave.runtime import SessionPool

            models_dir = Path(self.options.runtime.models_dir) if self.options.runtime.models_dir else None
            self.pool = SessionPool(store=ModelStore(models_dir), fallback=self.options.runtime.provider_fallback)
        return self.pool

    def run_provenance(self) -> Provenance:
        """The :class:`Provenance` of one run (a photo, a video): the one
        given to the constructor, or a new one (watermark on)."""
        return self.provenance if self.provenance is not None else Provenance.new()

    # -- life cycle -------------------------------------------------------
    def prepare(self) -> float:
        """Load and warm up every model; returns the milliseconds it took."""
        start = time.perf_counter()
        self.analyser.prepare(embeddings=True)
        self.analyser.analyse(np.zeros((64, 64, 3), np.uint8))
        self.swapper.prepare()
        if self.segmenter is not None:
            self.segmenter.prepare()
        if self.hand_detector is not None:
            self.hand_detector.prepare()
        return (time.perf_counter() - start) * 1000.0

    def close(self) -> None:
        if self._own_analyser:
            self.analyser.close()
        if getattr(self, "swapper", None) is not None:
            self.swapper.close()
        if getattr(self, "segmenter", None) is not None:
            self.segmenter.close()
        if getattr(self, "hand_detector", None) is not None:
            self.hand_detector.close()
        if getattr(self, "_sources", None) is not None:
            self._sources.clear()
        if self.pool is not None:
            self.pool.close()
            self.pool = None

    def __enter__(self) -> FaceSwapper:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- inputs -----------------------------------------------------------
    def read(self, value: ImageInput, *, role: str) -> Image:
        """Decode a path, bytes, :class:`Image` or array into an :class:`Image`."""
        if isinstance(value, Image):
            return value
        if isinstance(value, np.ndarray):
            return image_from_array(value)
        if isinstance(value, (str, os.PathLike, bytes, bytearray)):
            return read_image(
                value if isinstance(value, (bytes, bytearray)) else Path(value),
                max_pixels=self.options.max_pixels,
                role=f"{role} image",
            )
        raise InputError(f"{role} image must be a path, bytes, an Image or a numpy array; got {type(value).__name__}")

    def load_sources(self, sources: Sequence[ImageInput]) -> list[SourceFace]:
        """Find the (largest) face in each source photo and prepare it, or
        reuse the prepared face of a source given before (the same file
        unchanged, the same bytes or pixels: :func:`source_key`; the last
        ``source_cache`` of them are kept)."""
        if isinstance(sources, (str, os.PathLike, bytes, Image, np.ndarray)):
            sources = [sources]
        if not sources:
            raise InputError("at least one source image is needed")
        prepared = []
        for index, value in enumerate(sources):
            key = source_key(value) if self.source_cache > 0 else None
            with self._sources_lock:
                known = self._sources.get(key) if key is not None else None
                if known is not None:
                    self._sources.move_to_end(key)
            if known is None:
                known = self._prepare_source(value)
                if key is not None:
                    with self._sources_lock:
                        self._sources[key] = known
                        while len(self._sources) > self.source_cache:
                            self._sources.popitem(last=False)
            prepared.append(dataclasses.replace(known, index=index))
        return prepared

    def _prepare_source(self, value: ImageInput) -> SourceFace:
        image = self.read(value, role="source")
        faces = self.analyser.analyse(image.pixels, small_faces=False) or self.analyser.analyse(image.pixels)
        if not faces:
            raise NoFaceError(f"no face found in source image {image.label}", role="source", path=image.path)
        face = _largest(faces)
        crop = cut_crop(image.pixels, face, face_size=self.options.working_size)
        clean = None
        if self.options.masks.occlusion:
            clean = source_clean_map(crop)
        src = SourceFace(index=0, path=image.path, face=face, crop=crop, clean=clean)
        return self.swapper.prepare_source(src)

    def reference_embedding(self, reference: ImageInput) -> np.ndarray:
        image = self.read(reference, role="reference")
        faces = self.analyser.analyse(image.pixels)
        if not faces:
            raise NoFaceError(f"no face found in reference image {image.label}", role="reference", path=image.path)
        return self.analyser.embed(image.pixels, _largest(faces)).embedding

    def find_faces(self, pixels: np.ndarray, timings: dict[str, float] | None = None) -> list[Face]:
        """The target's faces.  When only the largest face will be swapped the
        tiled small-face pass is skipped, unless the quick pass finds nothing."""
        sel = self.options.selection
        only_largest = sel.mode == "one" and sel.order == "large-small" and sel.min_face_size == 0
        if only_largest and self.options.analysis.small_faces:
            found = self.analyser.analyse(pixels, small_faces=False, timings=timings)
            if found:
                return found
        return self.analyser.analyse(pixels, timings=timings)

    # -- swapping ---------------------------------------------------------
    def choose_source(self, sources: Sequence[SourceFace], face: Face) -> SourceFace:
        """The source whose head pose is closest to the target face's."""
        if self.options.multi_source == "first" or len(sources) == 1:
            return sources[0]

        def gap(s: SourceFace) -> float:
            return float(np.hypot(s.face.pose.yaw - face.pose.yaw, s.face.pose.pitch - face.pose.pitch))

        return min(sources, key=gap)

    def working_size(self, face: Face) -> int:
        """Face size in the working crop: the configured size, but no more
        than a little above the face's own size (a small face gains nothing
        from a large crop, and costs grow with its area)."""
        return int(round(min(self.options.working_size, max(MIN_WORKING_SIZE, face.size * 1.25))))

    def swap_face(
        self,
        pixels: np.ndarray,
        face: Face,
        source: SourceFace,
        timings: dict[str, float] | None = None,
        *,
        colour: ColourMatch | None = None,
    ) -> np.ndarray:
        """Swap one face of an RGB frame; returns a new frame.  ``colour``: a
        fixed colour mapping (see :func:`faceweave.compositing.composite.composite`)."""
        timings = {} if timings is None else timings
        with timed(timings, "crop"):
            crop = cut_crop(pixels, face, face_size=self.working_size(face))
        with timed(timings, "swap"):
            out = self.swapper.swap(source, crop)
        return self.finish_face(pixels, crop, out, timings, colour=colour)

    def finish_face(
        self,
        pixels: np.ndarray,
        crop: AlignedCrop,
        out: SwapOutput,
        timings: dict[str, float],
        *,
        into: np.ndarray | None = None,
        colour: ColourMatch | None = None,
        still: bool = False,
    ) -> np.ndarray:
        """Masks, colour and blending of a swapper's output, pasted into the
        frame: a new frame, or written into ``into`` (a caller-owned copy of
        ``pixels`` that several faces are pasted into, so that a frame with
        many faces is copied once)."""
        comp = self._composite(crop, out, timings, colour)
        with timed(timings, "paste"):
            if into is None:
                pasted = paste_back(pixels, comp.pixels, comp.paste, crop.matrix)
                return match_detail(
                    pixels, pasted, comp.detail, crop.matrix, out=pasted, blur_mask=comp.mask, sharpen=still
                )
            paste_back(into, comp.pixels, comp.paste, crop.matrix, out=into)
            # the grain and blur to match are the target photo's own
            return match_detail(pixels, into, comp.detail, crop.matrix, out=into, blur_mask=comp.mask, sharpen=still)

    def _composite(
        self, crop: AlignedCrop, out: SwapOutput, timings: dict[str, float], colour: ColourMatch | None
    ) -> Composite:
        person = None
        if self.segmenter is not None:
            # a mediapipe graph runs one image at a time; video renders frames on several threads
            with timed(timings, "segment"), self._segment_lock:
                person = self.segmenter.person_mask(crop.pixels)
        hands = None
        if self.hand_detector is not None:
            # a hand has the colour of skin: the occlusion test cannot tell it
            # from the face, the hand model can
            with timed(timings, "hands"), self._hands_lock:
                hands = self.hand_detector.hand_mask(crop.pixels)
        with timed(timings, "blend"):
            return composite(
                crop,
                out,
                mask_options=self.options.masks,
                shading=self.options.shading,
                person_mask=person,
                colour=colour,
                hands_mask=hands,
            )

    def check_expression(
        self,
        crop: AlignedCrop,
        source: SourceFace,
        out: SwapOutput,
        timings: dict[str, float],
        colour: ColourMatch | None = None,
    ) -> SwapOutput:
        """Look at the new face and correct how its expression reads.

        The new geometry has the target's mouth and eye ratios exactly, but
        the eye reads them off the texture: a source's smile crease that
        continues the line of the lips reads as a wider mouth, a moustache
        over the corners as a narrower one, heavy lids as half-closed eyes.
        The face is composited (without the occlusion test, a third of the
        cost; the lips and lids read the same) and measured again with the
        face mesh; while a ratio (mouth width, mouth opening, eye opening,
        over the eye distance) reads more than :data:`EXPRESSION_TOLERANCE`
        away from the target's, the face is made again with its lips and
        lids changed to make up for it
        (:func:`faceweave.geometry.expression.next_correction`), at most
        :data:`EXPRESSION_ROUNDS` times.  Returns the output to use.  Only
        swappers that take a ``correction`` (the mesh swapper) are checked;
        a look costs a composite and a mesh inference, a correction one
        more swap."""
        if not getattr(self.swapper, "adjusts_expression", False):
            return out
        try:
            want = expression_ratios(crop.mesh)
        except ValueError:  # a degenerate mesh: nothing to correct against
            return out
        look_masks = self.options.masks.model_copy(update={"occlusion": False})
        correction: ExpressionCorrection | None = ExpressionCorrection()
        for _ in range(EXPRESSION_ROUNDS):
            with timed(timings, "expression"):
                look = composite(crop, out, mask_options=look_masks, shading=self.options.shading, colour=colour)
                seen = self.analyser.mesher.landmarks(look.pixels, mesh_box(out.mesh))
                try:
                    got = expression_ratios(seen) if seen is not None else None
                except ValueError:
                    got = None
            if got is None:
                break
            correction = next_correction(
                correction, want, got, tolerance=EXPRESSION_TOLERANCE, gain=EXPRESSION_GAIN, eyes=EXPRESSION_EYES
            )
            if correction is None:
                break
            with timed(timings, "swap"):
                out = self.swapper.swap(source, crop, correction=correction)
        return out

    def _swap_batched(
        self,
        pixels: np.ndarray,
        chosen: Sequence[tuple[Face, SourceFace]],
        timings: dict[str, float],
        colours: Sequence[ColourMatch | None],
        *,
        still: bool = False,
    ) -> np.ndarray:
        """Several faces through a swapper that takes a batch: one inference
        per source for all its faces (crops are cut from the frame before any
        face is pasted), then each face is finished in order."""
        with timed(timings, "crop"):
            crops = [cut_crop(pixels, face, face_size=self.working_size(face)) for face, _ in chosen]
        outputs: list[SwapOutput | None] = [None] * len(chosen)
        groups: dict[int, list[int]] = {}
        for k, (_, source) in enumerate(chosen):
            groups.setdefault(id(source), []).append(k)
        with timed(timings, "swap"):
            for members in groups.values():
                results = self.swapper.swap_batch(chosen[members[0]][1], [crops[k] for k in members])
                for k, result in zip(members, results, strict=False):
                    outputs[k] = result
        out = pixels.copy()
        for crop, result, colour in zip(crops, outputs, colours, strict=False):
            self.finish_face(pixels, crop, result, timings, into=out, colour=colour, still=still)
        return out

    def enhance(self, pixels: np.ndarray, faces: Sequence[Face], timings: dict[str, float] | None = None) -> np.ndarray:
        """The optional face and frame enhancers on a swapped frame (a frame
        enhancer may change its size)."""
        if self.face_enhancer is None and self.frame_enhancer is None:
            return pixels
        from faceweave.enhancers import enhance_result

        with timed({} if timings is None else timings, "enhance"):
            return enhance_result(
                pixels,
                list(faces),
                face_enhancer=self.face_enhancer,
                frame_enhancer=self.frame_enhancer,
                face_blend=self.options.enhance.face_blend,
                frame_blend=self.options.enhance.frame_blend,
            )

    def swap_many(
        self,
        pixels: np.ndarray,
        chosen: Sequence[tuple[Face, SourceFace]],
        timings: dict[str, float] | None = None,
        *,
        colours: Sequence[ColourMatch | None] | None = None,
        still: bool = False,
    ) -> np.ndarray:
        """Swap each ``(face, source)`` in order (later ones end on top), in
        one batch when the swapper takes batches, then run the enhancers.
        ``colours``: a fixed colour mapping per face, or ``None`` entries.
        ``still``: a photo, not a frame of a video; then each new face is
        looked at once and its expression corrected (:meth:`check_expression`,
        when the options ask for it) and a face softer than the photo is
        sharpened (in a video both would change from frame to frame)."""
        timings = {} if timings is None else timings
        colours = list(colours) if colours is not None else [None] * len(chosen)
        if len(chosen) > 1 and hasattr(self.swapper, "swap_batch"):
            out = self._swap_batched(pixels, chosen, timings, colours, still=still)
        else:
            # one copy of the frame for all faces; each face is cut from the
            # frame as swapped so far, so a nearer face ends on top
            out = pixels.copy()
            for (face, source), colour in zip(chosen, colours, strict=False):
                with timed(timings, "crop"):
                    crop = cut_crop(out, face, face_size=self.working_size(face))
                with timed(timings, "swap"):
                    result = self.swapper.swap(source, crop)
                if still and self.options.expression_check and face.size >= EXPRESSION_MIN_FACE:
                    result = self.check_expression(crop, source, result, timings, colour)
                self.finish_face(pixels, crop, result, timings, into=out, colour=colour, still=still)
        return self.enhance(out, [face for face, _ in chosen], timings)

    def swap_faces(
        self,
        pixels: np.ndarray,
        faces: Sequence[Face],
        indices: Sequence[int],
        sources: Sequence[SourceFace],
        timings: dict[str, float] | None = None,
    ) -> tuple[np.ndarray, list[SwappedFace]]:
        """Swap the faces ``faces[i]`` for ``i`` in ``indices``; smaller faces
        first so that a nearer, larger face ends on top."""
        timings = {} if timings is None else timings
        order = sorted(indices, key=lambda k: faces[k].bbox.area)
        chosen = [(faces[i], self.choose_source(sources, faces[i])) for i in order]
        out = self.swap_many(pixels, chosen, timings, still=True)
        swapped = []
        for i, (face, source) in zip(order, chosen, strict=False):
            gap = float(np.hypot(source.face.pose.yaw - face.pose.yaw, source.face.pose.pitch - face.pose.pitch))
            swapped.append(
                SwappedFace(
                    target_index=i, bbox=face.bbox, source_index=source.index, source_path=source.path, pose_gap=gap
                )
            )
        swapped.sort(key=lambda s: s.target_index)
        return out, swapped

    def swap(
        self,
        sources: Sequence[ImageInput] | ImageInput,
        target: ImageInput,
        *,
        reference: ImageInput | None = None,
        provenance: Provenance | None = None,
    ) -> SwapResult:
        """Swap the source identity onto the selected faces of ``target``.

        Faces in the result are numbered in the selection order
        (``options.selection.order``); ``SwapResult.swapped`` says which
        target faces were swapped and with which source photo.  The result's
        pixels carry the invisible watermark of ``provenance`` (default: the
        swapper's, see the constructor), after any enhancer, and
        :meth:`SwapResult.save` writes its label.  (:meth:`swap_faces` and
        :meth:`swap_many`, the steps that batch and video compose, return
        unmarked pixels: those callers mark what they write.)
        Raises :class:`NoFaceError` (``role`` says which image) or
        :class:`NoMatchingFaceError` when nothing can be swapped, and
        :class:`InputError` when the watermark is on and the picture is under
        64 pixels on a side.
        """
        mark = provenance if provenance is not None else self.run_provenance()
        with single_threaded_blas():
            return self._swap(sources, target, reference=reference, provenance=mark)

    def _swap(
        self,
        sources: Sequence[ImageInput] | ImageInput,
        target: ImageInput,
        *,
        reference: ImageInput | None = None,
        provenance: Provenance,
    ) -> SwapResult:
        """The work of :meth:`swap`."""
        timings: dict[str, float] = {}
        with timed(timings, "decode"):
            target_image = self.read(target, role="target")
        with timed(timings, "sources"):
            prepared = self.load_sources(sources)
        ref = None
        if self.options.selection.mode == "reference":
            if reference is None:
                raise InputError("selection mode 'reference' needs a reference face image")
            ref = self.reference_embedding(reference)
        found = self.find_faces(target_image.pixels, timings)
        if not found:
            raise NoFaceError(
                f"no face found in target image {target_image.label}", role="target", path=target_image.path
            )
        faces = [found[i] for i in order_faces(found, self.options.selection.order)]
        if ref is not None:
            with timed(timings, "embed"):
                faces = [self.analyser.embed(target_image.pixels, f) for f in faces]
        indices = select_faces(faces, self.options.selection, reference=ref)
        image, swapped = self.swap_faces(target_image.pixels, faces, indices, prepared, timings)
        alpha = target_image.alpha
        if alpha is not None and alpha.shape[:2] != image.shape[:2]:  # a frame enhancer scaled the image
            alpha = cv2.resize(alpha, (image.shape[1], image.shape[0]), interpolation=cv2.INTER_LINEAR)
        with timed(timings, "mark"):
            image = stamp_image(image, provenance)  # last: nothing changes the pixels after it
        if not provenance.watermark:
            log.info("swap of run %s: the invisible watermark is off, as the caller asked", provenance.run_hex)
        return SwapResult(
            image=image,
            alpha=alpha,
            faces=tuple(faces),
            swapped=tuple(swapped),
            timings_ms=timings,
            provenance=provenance,
        )
