"""Shared machinery of the neural swappers (FaceFusion-compatible).

Each model family is one small subclass of :class:`NeuralSwapper` that says
how the source is given to the model (:meth:`NeuralSwapper.source_tensor`);
everything else is common and follows FaceFusion's ``face_swapper``:

1. the five points of the target crop (from its mesh) are fitted onto the
   model's template at the model size (or the pixel-boost size), and the crop
   is warped there;
2. pixels ``/ 255``, ``(x - mean) / std`` per RGB channel, NCHW float32
   (FaceFusion reads BGR frames and flips them to RGB first; our pixels are
   RGB already);
3. the model runs on all faces (and pixel-boost tiles) of one call in one
   batch when its batch dimension is dynamic, else one by one;
4. the output, NCHW RGB, is de-normalised (``* std + mean``) only for the
   families FaceFusion does it for, clipped to ``[0, 1]``, scaled to 255;
5. it is warped back into the target crop's pixels, with FaceFusion's static
   box mask (feathered edges) as the coverage; a family that reads a mask
   of the model's own (:meth:`NeuralSwapper.mask_output`, hyperswap's
   ``mask`` on request) takes the minimum of both, as FaceFusion combines
   masks.

:meth:`NeuralSwapper.swap_frame` runs the same steps straight from the
frame: the five points of the face in the frame are fitted onto the
template and the frame is warped there once (the only resampling on the way
in); it returns the model-space result (:class:`TemplateSwap`) for the
caller to paste back with one inverse warp.  :meth:`NeuralSwapper.swap_batch`
(an already cut working crop) stays for callers that have one.

A source is described by its raw ArcFace embedding and the L2-normalised
one (:class:`PreparedSource`), taken from the source photo itself when the
:class:`~faceweave.swappers.base.SourceFace` carries it;
:meth:`NeuralSwapper.average_sources` averages several sources as FaceFusion
does (the mean of the raw and the mean of the normalised embeddings, each
family making its tensor from them: :meth:`NeuralSwapper.embedding_tensor`).

The model objects are owned by the caller (e.g. a session pool); the
swapper never loads or closes them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

import cv2
import numpy as np

from faceweave.embedders.arcface import l2_normalize
from faceweave.errors import InvalidOptionError, ModelSignatureError
from faceweave.geometry.templates import points5, warp_to_template
from faceweave.models.catalog import find_spec, takes_embedding
from faceweave.runtime.model import RunnableModel, TensorLike
from faceweave.swappers.base import AlignedCrop, Precomputed, SourceFace, SwapOutput
from faceweave.swappers.neural.pixel_boost import boost_factor, tile, untile

if TYPE_CHECKING:
    from faceweave.geometry.expression import ExpressionCorrection

#: the model protocols are shared by every model-using component
TensorInfo = TensorLike
InferenceModel = RunnableModel


class Embedder(Protocol):
    """An identity embedder (see :mod:`faceweave.embedders.arcface`)."""

    def embed_raw(self, items: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray: ...


@dataclass(frozen=True)
class NeuralSpec:
    """Per-model constants (data, as in FaceFusion's model set).

    ``template``/``size``: alignment template and model side; ``mean``/``std``
    RGB normalisation of the target crop; ``denormalize``: whether the output
    is ``* std + mean`` before clipping; ``source``: ``"embedding"`` or
    ``"image"``; ``embedder``/``converter``: names of the models that make the
    source embedding; ``source_template``/``source_size``: the alignment of a
    source image crop."""

    name: str
    family: str
    template: str
    size: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    denormalize: bool
    source: Literal["embedding", "image"]
    embedder: str | None = None
    converter: str | None = None
    source_template: str | None = None
    source_size: int | None = None

    def source_alignment(self) -> tuple[str, int]:
        """``(source_template, source_size)`` of a family that takes a source image."""
        if self.source_template is None or self.source_size is None:
            raise ModelSignatureError(f"{self.name}: takes a source image but names no source template and size")
        return self.source_template, self.source_size


def catalog_spec(name: str, *, family: str, denormalize: bool, source_template: str | None = None) -> NeuralSpec:
    """The constants of the catalog's swapper ``name`` (the one source of a
    model's facts: :mod:`faceweave.models.catalog`): its template, side,
    mean and std, whether its source input is an embedding (``(batch,
    512)``) or an image (whose side is ``source_size``), and the models that
    make the embedding (``requires``: ArcFace first, then the converter);
    with the family's own ``denormalize`` and the template a source image
    is aligned to."""
    model = find_spec(name)
    source = model.inputs[1]
    embedding = takes_embedding(model)
    embedder, converter = (*model.requires, None, None)[:2] if embedding else (None, None)
    side = None if embedding or source.shape is None else source.shape[-1]
    return NeuralSpec(
        name=name,
        family=family,
        template=str(model.template),
        size=int(model.crop_size or 0),
        mean=model.mean or (0.0, 0.0, 0.0),
        std=model.std or (1.0, 1.0, 1.0),
        denormalize=denormalize,
        source="embedding" if embedding else "image",
        embedder=embedder,
        converter=converter,
        source_template=source_template,
        source_size=int(side) if isinstance(side, int) else None,
    )


@dataclass(frozen=True, eq=False)
class PreparedSource(Precomputed):
    """``tensor``: what the model's ``source`` input gets for one face,
    ``(1, 512)`` float32 or ``(1, 3, h, w)`` float32; ``embedding`` and
    ``embedding_norm``: ``(1, 512)`` float32, the raw ArcFace embedding and
    the L2-normalised one (``None`` for the families that take an image),
    kept so that several sources can be averaged."""

    tensor: np.ndarray
    embedding: np.ndarray | None = None
    embedding_norm: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class TemplateSwap:
    """One face swapped on the model's template (side ``B``: the model size
    or the pixel-boost size), cut straight from the frame.

    ``face`` ``(B, B, 3)`` float32 RGB in ``[0, 255]``: the model's output,
    not rounded; ``target`` ``(B, B, 3)`` uint8: the frame warped onto the
    template (what the model was given); ``mask`` ``(B, B)`` float32 in
    ``[0, 1]``: FaceFusion's box mask (with the model's own mask where the
    family reads one); ``matrix`` ``(2, 3)`` float64 frame -> template."""

    face: np.ndarray
    target: np.ndarray
    mask: np.ndarray
    matrix: np.ndarray


def is_dynamic(dim: Any) -> bool:
    return not isinstance(dim, (int, np.integer)) or int(dim) < 0


def find_tensor(items: Sequence[TensorInfo], name: str, *, model: str, what: str) -> TensorInfo:
    for item in items:
        if item.name == name:
            return item
    names = ", ".join(repr(i.name) for i in items)
    raise ModelSignatureError(f"{model}: expected an {what} named {name!r}; the model has {names}")


def check_shape(info: TensorInfo, expected: Sequence[int | None], *, model: str) -> None:
    """Raise :class:`ModelSignatureError` unless every fixed dimension of
    ``info`` equals ``expected`` (``None`` there matches anything)."""
    shape = list(info.shape)
    ok = len(shape) == len(expected) and all(
        e is None or is_dynamic(d) or int(d) == e for d, e in zip(shape, expected, strict=False)
    )
    if not ok:
        raise ModelSignatureError(
            f"{model}: input {info.name!r} should have shape {_shape_text(expected)}; the model has "
            f"{_shape_text(shape)}"
        )


def _shape_text(shape: Sequence[Any]) -> str:
    return "[" + ", ".join("N" if d is None else str(d) for d in shape) + "]"


def normalize_crops(crops: np.ndarray, mean: Sequence[float], std: Sequence[float]) -> np.ndarray:
    """``(N, S, S, 3)`` uint8 RGB -> ``(N, 3, S, S)`` float32 ``(x / 255 - mean) / std``.

    The bytes are put in channel order first (a quarter of the memory of
    floats), then divided in one pass; a mean of 0 and a std of 1 (inswapper)
    skip their passes, which would change nothing."""
    planes = np.ascontiguousarray(np.asarray(crops).transpose(0, 3, 1, 2))
    x = np.true_divide(planes, np.float32(255.0), dtype=np.float32)
    m = np.asarray(mean, np.float32).reshape(1, 3, 1, 1)
    sd = np.asarray(std, np.float32).reshape(1, 3, 1, 1)
    if m.any():
        x -= m
    if (sd != 1.0).any():
        x /= sd
    return x


def denormalize_outputs(
    out: np.ndarray, mean: Sequence[float], std: Sequence[float], *, denormalize: bool
) -> np.ndarray:
    """``(N, 3, S, S)`` model output -> ``(N, S, S, 3)`` float32 RGB in ``[0, 255]``."""
    x = np.asarray(out, np.float32).transpose(0, 2, 3, 1)
    if denormalize:
        x = x * np.asarray(std, np.float32) + np.asarray(mean, np.float32)
    return np.clip(x, 0.0, 1.0) * 255.0


def image_tensor(crop: np.ndarray) -> np.ndarray:
    """``(h, w, 3)`` uint8 RGB source crop -> ``(1, 3, h, w)`` float32 in ``[0, 1]``."""
    return np.ascontiguousarray((crop.astype(np.float32) / 255.0).transpose(2, 0, 1)[None])


def box_mask(size: int, *, blur: float = 0.3, padding: tuple[float, float, float, float] = (0, 0, 0, 0)) -> np.ndarray:
    """FaceFusion's static box mask, ``(size, size)`` float32 in ``[0, 1]``:
    1 inside, a border of at least ``size * blur / 4`` pixels (or ``padding``
    percent: top, right, bottom, left) set to 0, Gaussian-feathered with
    sigma ``size * blur / 8``."""
    amount = int(size * 0.5 * blur)
    area = max(amount // 2, 1)
    top, right, bottom, left = (int(size * p / 100) for p in padding)
    mask = np.ones((size, size), np.float32)
    mask[: max(area, top), :] = 0
    mask[-max(area, bottom) :, :] = 0
    mask[:, : max(area, left)] = 0
    mask[:, -max(area, right) :] = 0
    if amount > 0:
        mask = np.asarray(cv2.GaussianBlur(mask, (0, 0), amount * 0.25), np.float32)
    return mask


def model_mask(values: np.ndarray, size: int) -> np.ndarray:
    """A model's mask output ``(N, 1, h, w)`` or ``(N, h, w)`` -> ``(N, size,
    size, 1)`` float32, clipped to ``[0, 1]`` and resized (bilinear) to the
    model side."""
    x = np.asarray(values, np.float32)
    if x.ndim not in (3, 4) or (x.ndim == 4 and x.shape[1] != 1):
        raise ModelSignatureError(f"a model mask should have shape [N, 1, H, W]; got {list(x.shape)}")
    x = np.clip(x.reshape(len(x), *x.shape[-2:]), 0.0, 1.0)
    if x.shape[1:] != (size, size):
        x = np.stack([cv2.resize(m, (size, size), interpolation=cv2.INTER_LINEAR) for m in x])
    return x[..., None]


def blend_factor(weight: float) -> float:
    """FaceFusion's ``face_swapper_weight`` in ``[0, 1]`` -> the share of the
    target's embedding mixed into the source's: 0.35 at 0, 0 at 0.5, -0.35 at 1."""
    return float(np.interp(weight, [0.0, 1.0], [0.35, -0.35]))


class NeuralSwapper:
    """Base of the neural swappers: a :class:`~faceweave.swappers.base.Swapper`.

    ``model``: the swapper model; ``embedder``/``converter``: models for the
    source identity (families that need them); ``pixel_boost``: side of the
    crop the model runs on in interleaved tiles (a multiple of the model
    size; ``None``: the model size); ``mask_blur``/``mask_padding``: the box
    mask; ``weight``: FaceFusion's swapper weight (0.5: the source identity
    only; other values mix in the target's embedding, which needs the
    embedder); ``max_batch``: most images per inference."""

    #: mix the target embedding in after L2-normalising it (FaceFusion does for most families)
    normalize_target_embedding = True
    #: the model makes a face from an identity and a crop: no lips or lids to adjust
    adjusts_expression = False
    #: all faces of a frame (and their pixel-boost tiles) go through one inference
    batches = True

    def __init__(
        self,
        model: InferenceModel,
        *,
        spec: NeuralSpec,
        embedder: Embedder | None = None,
        converter: Any = None,
        pixel_boost: int | None = None,
        mask_blur: float = 0.3,
        mask_padding: tuple[float, float, float, float] = (0, 0, 0, 0),
        weight: float = 0.5,
        max_batch: int = 16,
    ) -> None:
        if not 0.0 <= weight <= 1.0:
            raise InvalidOptionError(f"swapper weight must be in [0, 1]; got {weight}")
        if max_batch < 1:
            raise InvalidOptionError(f"max_batch must be at least 1; got {max_batch}")
        self.name = spec.name
        self.spec = spec
        self.model = model
        self.embedder = embedder
        self.converter = converter
        self.boost = boost_factor(spec.size, pixel_boost)
        self.mask_blur = mask_blur
        top, right, bottom, left = mask_padding
        self.mask_padding = (top, right, bottom, left)
        #: FaceFusion's box mask at the template side, made once (read-only:
        #: every :class:`TemplateSwap` of this swapper shares it)
        self.box = box_mask(spec.size * self.boost, blur=mask_blur, padding=self.mask_padding)
        self.box.setflags(write=False)
        self.weight = weight
        self.max_batch = max_batch
        if spec.source == "embedding" and embedder is None:
            raise InvalidOptionError(f"{spec.name} needs an identity embedder ({spec.embedder})")
        if weight != 0.5 and embedder is None:
            raise InvalidOptionError(f"{spec.name}: a swapper weight other than 0.5 needs an embedder")
        self._target_info = find_tensor(model.inputs, "target", model=spec.name, what="input")
        self._source_info = find_tensor(model.inputs, "source", model=spec.name, what="input")
        check_shape(self._target_info, [None, 3, spec.size, spec.size], model=spec.name)
        if spec.source == "embedding":
            check_shape(self._source_info, [None, 512], model=spec.name)
        else:
            side = spec.source_alignment()[1]
            check_shape(self._source_info, [None, 3, side, side], model=spec.name)
        names = [o.name for o in model.outputs]
        self._output = "output" if "output" in names else names[0]
        self._mask_output = self.mask_output(names)

    # -- Swapper protocol -------------------------------------------------
    def prepare(self) -> None:
        """Nothing to load: the models are given loaded (and warmed) by the caller."""

    def close(self) -> None:
        """Nothing to release: the caller owns the models (and their sessions)."""

    def prepare_source(self, source: SourceFace) -> SourceFace:
        """The source with its model tensor (and, for the embedding families,
        its raw and normalised embeddings) precomputed."""
        if self.spec.source == "image":
            return dataclasses.replace(source, prepared=PreparedSource(tensor=self.source_image(source)))
        raw, norm = self.source_identity(source)
        prepared = PreparedSource(tensor=self.embedding_tensor(raw, norm), embedding=raw, embedding_norm=norm)
        return dataclasses.replace(source, prepared=prepared)

    def average_sources(self, sources: Sequence[SourceFace]) -> SourceFace:
        """One source standing for several photos of a person, as FaceFusion
        averages them: the mean raw embedding and the mean normalised
        embedding, made into this family's tensor.  The families that take a
        source image use the first photo (FaceFusion does too).  The result
        keeps the first source's index, path, face and crop."""
        if not sources:
            raise InvalidOptionError("average_sources needs at least one source")
        if len(sources) == 1 or self.spec.source == "image":
            return sources[0]
        identities = [self._identity_of(s) for s in sources]
        raw = np.mean([r for r, _ in identities], axis=0).astype(np.float32)
        norm = np.mean([n for _, n in identities], axis=0).astype(np.float32)
        prepared = PreparedSource(tensor=self.embedding_tensor(raw, norm), embedding=raw, embedding_norm=norm)
        return dataclasses.replace(sources[0], prepared=prepared, image=None)

    def _identity_of(self, source: SourceFace) -> tuple[np.ndarray, np.ndarray]:
        prepared = source.prepared
        if (
            isinstance(prepared, PreparedSource)
            and prepared.embedding is not None
            and prepared.embedding_norm is not None
        ):
            return prepared.embedding, prepared.embedding_norm
        return self.source_identity(source)

    def swap(
        self, source: SourceFace, target: AlignedCrop, *, correction: ExpressionCorrection | None = None
    ) -> SwapOutput:
        """One face; ``correction`` is refused (``adjusts_expression`` is off)."""
        if correction is not None:
            raise InvalidOptionError(f"{self.name} cannot adjust a face's expression")
        return self.swap_batch(source, [target])[0]

    def swap_batch(self, source: SourceFace, targets: Sequence[AlignedCrop]) -> list[SwapOutput]:
        """Swap several faces of one frame, given as working crops (each
        warped again onto the template); one inference when the model allows."""
        if not targets:
            return []
        side = self.spec.size * self.boost
        warped = [warp_to_template(t.pixels, points5(t), self.spec.template, side) for t in targets]
        items = [(t.pixels, points5(t)) for t in targets]
        results = self._on_template(source, [c for c, _ in warped], [m for _, m in warped], items)
        return [self._paste(t, r.face, r.mask, r.matrix) for t, r in zip(targets, results, strict=False)]

    def swap_frame(self, source: SourceFace, pixels: np.ndarray, points: Sequence[np.ndarray]) -> list[TemplateSwap]:
        """Swap the faces with five ``points`` ``(5, 2)`` (frame pixels) of
        the ``(H, W, 3)`` uint8 RGB frame ``pixels``: each is warped from the
        frame onto the template at the model (or pixel-boost) side, once (as
        FaceFusion warps: no prefilter), and returned there for the caller to
        paste back with one inverse warp.  One inference for all faces when
        the model allows."""
        return self.swap_frames(source, [(pixels, p) for p in points])

    def swap_frames(self, source: SourceFace, faces: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[TemplateSwap]:
        """:meth:`swap_frame` for faces of several frames: ``faces`` are
        ``(pixels, points)``, each face's frame and its five points; one
        inference for all of them when the model's batch is dynamic
        (:attr:`dynamic_batch`), in chunks of ``max_batch``."""
        if not faces:
            return []
        side = self.spec.size * self.boost
        warped = [warp_to_template(pixels, points5(p), self.spec.template, side) for pixels, p in faces]
        items = [(pixels, points5(p)) for pixels, p in faces]
        return self._on_template(source, [c for c, _ in warped], [m for _, m in warped], items)

    @property
    def dynamic_batch(self) -> bool:
        """Whether the model takes any number of images per call (both inputs' first dimension dynamic)."""
        return is_dynamic(self._target_info.shape[0]) and is_dynamic(self._source_info.shape[0])

    def _on_template(
        self,
        source: SourceFace,
        crops: Sequence[np.ndarray],
        matrices: Sequence[np.ndarray],
        items: Sequence[tuple[np.ndarray, np.ndarray]],
    ) -> list[TemplateSwap]:
        """Run the model on template crops (``items``: where the target
        embedding of each is read, for a weight other than 0.5)."""
        prepared = source.prepared if isinstance(source.prepared, PreparedSource) else None
        src = prepared.tensor if prepared is not None else self.source_tensor(source)
        tiles = np.concatenate([tile(c, self.boost) for c in crops])  # (len * k*k, S, S, 3)
        per_target = self.boost * self.boost
        source_rows = np.repeat(self._sources_for(src, items), per_target, axis=0)
        out, model_masks = self.run_outputs(normalize_crops(tiles, self.spec.mean, self.spec.std), source_rows)
        faces = denormalize_outputs(out, self.spec.mean, self.spec.std, denormalize=self.spec.denormalize)
        box = self.box
        results = []
        for n, (crop, m) in enumerate(zip(crops, matrices, strict=False)):
            rows = slice(n * per_target, (n + 1) * per_target)
            mask = box if model_masks is None else np.minimum(box, untile(model_masks[rows], self.boost)[..., 0])
            results.append(TemplateSwap(face=untile(faces[rows], self.boost), target=crop, mask=mask, matrix=m))
        return results

    # -- family hooks -----------------------------------------------------
    def source_tensor(self, source: SourceFace) -> np.ndarray:
        """What the model's ``source`` input gets for this face: ``(1, D)`` or
        ``(1, 3, h, w)``.  Models that take a source image get the source
        face on their template; the embedding families make it from the
        source's embeddings (:meth:`embedding_tensor`)."""
        if self.spec.source == "image":
            return self.source_image(source)
        return self.embedding_tensor(*self.source_identity(source))

    def embedding_tensor(self, embedding: np.ndarray, embedding_norm: np.ndarray) -> np.ndarray:
        """The ``(1, D)`` source tensor of a family from the raw ``(1, 512)``
        embedding and the normalised one (for several photos: their means)."""
        raise NotImplementedError(f"{self.spec.name}: the family does not say how its source embedding is made")

    def source_identity(self, source: SourceFace) -> tuple[np.ndarray, np.ndarray]:
        """``(raw, normalised)`` ``(1, 512)`` float32 embeddings of the source face."""
        raw = self.source_embedding(source).reshape(1, -1).astype(np.float32)
        return raw, l2_normalize(raw)

    def source_embedding(self, source: SourceFace) -> np.ndarray:
        """``(512,)`` raw (not normalised) embedding of the source face: the
        embedder aligns it on its own template straight from the source photo
        when the source carries it (one warp at the photo's resolution), else
        from the source's working crop."""
        return self.identity_embedder().embed_raw([_source_pixels(source)])[0]

    def source_image(self, source: SourceFace) -> np.ndarray:
        """``(1, 3, h, w)`` float32 RGB ``[0, 1]`` source face on the spec's
        source template (from the source photo when the source carries it)."""
        template, side = self.spec.source_alignment()
        crop, _ = warp_to_template(*_source_pixels(source), template, side)
        return image_tensor(crop)

    def mask_output(self, names: Sequence[str]) -> str | None:
        """The output holding the model's own face mask to combine with the
        box mask, or ``None`` (the default: FaceFusion uses no model mask)."""
        return None

    def identity_embedder(self) -> Embedder:
        """The embedder (the constructor makes sure the families and weights
        that need one have it)."""
        if self.embedder is None:
            raise InvalidOptionError(f"{self.spec.name} needs an identity embedder ({self.spec.embedder})")
        return self.embedder

    # -- helpers ----------------------------------------------------------
    def run(self, target: np.ndarray, source: np.ndarray) -> np.ndarray:
        """Run on ``target`` ``(N, 3, S, S)`` with ``source`` ``(N, ...)``: in
        chunks of ``max_batch`` when the batch dimension is dynamic, else one
        image at a time.  Returns the ``(N, 3, S, S)`` output."""
        return self.run_outputs(target, source)[0]

    def run_outputs(self, target: np.ndarray, source: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Like :meth:`run`, with the model's own mask (:meth:`mask_output`)
        as ``(N, S, S, 1)`` float32 in ``[0, 1]`` (``None`` when not used)."""
        step = self.max_batch if self.dynamic_batch else 1
        faces, masks = [], []
        for i in range(0, len(target), step):
            feeds = {"target": target[i : i + step], "source": np.ascontiguousarray(source[i : i + step], np.float32)}
            outputs = self.model.run(feeds)
            faces.append(np.asarray(outputs[self._output]))
            if self._mask_output is not None:
                masks.append(model_mask(outputs[self._mask_output], self.spec.size))
        return np.concatenate(faces), (np.concatenate(masks) if masks else None)

    def _sources_for(self, src: np.ndarray, items: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """``(len(items), ...)`` source rows, with the target embedding (of the
        ``(pixels, points)`` of each target) mixed in (FaceFusion's
        ``balance_source_embedding``) when ``weight != 0.5``."""
        if self.weight == 0.5 or self.spec.source != "embedding":
            return np.repeat(src, len(items), axis=0)
        target_embeddings = self.identity_embedder().embed_raw(items)
        if self.normalize_target_embedding:
            target_embeddings = target_embeddings / np.linalg.norm(target_embeddings, axis=1, keepdims=True)
        b = blend_factor(self.weight)
        return (src.reshape(1, -1) * (1.0 - b) + target_embeddings * b).astype(np.float32)

    def _paste(self, target: AlignedCrop, swapped: np.ndarray, mask: np.ndarray, m: np.ndarray) -> SwapOutput:
        """Warp the model-space result ``(B, B, 3)`` float and the box mask
        back into the target crop's pixels."""
        w, h = target.size
        inv = cv2.invertAffineTransform(m)
        face = cv2.warpAffine(swapped, inv, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        coverage = cv2.warpAffine(mask, inv, (w, h), flags=cv2.INTER_LINEAR)  # constant border: 0
        return SwapOutput(
            face=np.clip(np.rint(face), 0, 255).astype(np.uint8),
            background=target.pixels,
            coverage=np.clip(coverage, 0.0, 1.0).astype(np.float32),
            mesh=target.mesh,
            changed=np.zeros((h, w), np.float32),
        )


def _source_pixels(source: SourceFace) -> tuple[np.ndarray, np.ndarray]:
    """``(pixels, five points)`` to align a source face from: the source
    photo and the face's points in it when the source carries the photo,
    else its working crop."""
    if source.image is not None:
        return source.image, points5(source.face.kps5)
    return source.crop.pixels, points5(source.crop)
