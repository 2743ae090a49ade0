"""What a model is, as data: :class:`ModelSpec` and its tensors' :class:`TensorSpec`.

A spec says where the file comes from (URLs, sha256, size, licence), what the
graph looks like (input/output names, shapes, dtypes) and how the caller
prepares pixels for it (alignment template name, crop size, mean/std).
Specs are frozen values; the catalog of known models is in
:mod:`faceweave.models.catalog`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from faceweave.errors import InvalidOptionError

#: the kinds of model faceweave knows how to use
KINDS = (
    "swapper",
    "embedder",
    "face_enhancer",
    "frame_enhancer",
    "frame_colorizer",
    "background_remover",
    "lip_syncer",
    "age_modifier",
    "live_portrait",
    "deep_swapper",
    "face_classifier",
    "voice_extractor",
    "content_classifier",
    "face_occluder",
    "face_parser",
    "face_detector",
    "face_landmarker",
)

#: one dimension of a tensor shape: an ``int`` is fixed, a ``str`` is a named
#: dynamic dimension (``"batch"``, ``"height"``), ``None`` is dynamic and unnamed
Dim = int | str | None

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of a graph.

    ``name`` ``None`` means the name is not pinned (the tensor is matched by
    position); ``shape`` ``None`` means the rank is not pinned either;
    ``dtype`` is a numpy dtype name (``"float32"``) or ``None`` for any;
    ``optional``: a named input some files of the model have and others not
    (a DeepFaceLive model's morph), fed where it is there.
    """

    name: str | None
    shape: tuple[Dim, ...] | None
    dtype: str | None = "float32"
    optional: bool = False

    def describe(self) -> str:
        """``name[1, 3, 128, 128] float32`` with ``?`` for what is not pinned."""
        name = self.name if self.name is not None else "?"
        if self.shape is None:
            dims = "[...]"
        else:
            dims = "[" + ", ".join("?" if d is None else str(d) for d in self.shape) + "]"
        return f"{name}{dims} {self.dtype or 'any'}" + (" (optional)" if self.optional else "")


def is_dynamic(dim: Dim) -> bool:
    """Whether ``dim`` is not a fixed size (a name, ``None``, or a non-positive int)."""
    return not isinstance(dim, int) or dim <= 0


@dataclass(frozen=True)
class ModelSpec:
    """A known model: its file, where to get it, its graph and its preprocessing.

    ``urls`` are tried in order; ``sha256`` / ``size`` are ``None`` when not
    pinned.  ``template`` is the name of a 5-point alignment template (the
    arrays live in :mod:`faceweave.geometry`), ``crop_size`` the side in pixels
    of the aligned crop the model takes; ``mean`` / ``std`` are per channel (RGB)
    on pixels scaled to ``[0, 1]``.  ``bundled`` is ``(package, resource)`` for
    a file shipped inside an installed Python package (never downloaded).
    ``warmup_dims`` gives sizes for named dynamic dimensions in the warm-up
    input (others get 1).  ``requires`` names the other models this one is
    used with (a swapper's ArcFace and embedding converter).
    """

    name: str
    kind: str
    file_name: str
    licence: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    urls: tuple[str, ...] = ()
    sha256: str | None = None
    size: int | None = None
    vendor: str | None = None
    template: str | None = None
    crop_size: int | None = None
    mean: tuple[float, float, float] | None = None
    std: tuple[float, float, float] | None = None
    bundled: tuple[str, str] | None = None
    warmup_dims: tuple[tuple[str, int], ...] = ()
    requires: tuple[str, ...] = ()
    notes: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.name or not re.fullmatch(r"[A-Za-z0-9_.\-]+", self.name):
            raise InvalidOptionError(f"model name {self.name!r}: use letters, digits, '_', '.', '-'")
        if self.kind not in KINDS:
            raise InvalidOptionError(f"model {self.name}: unknown kind {self.kind!r}; one of {', '.join(KINDS)}")
        if "/" in self.file_name or "\\" in self.file_name or self.file_name in ("", ".", ".."):
            raise InvalidOptionError(f"model {self.name}: file name {self.file_name!r} must be a plain name")
        if self.sha256 is not None and not _SHA256.match(self.sha256):
            raise InvalidOptionError(f"model {self.name}: sha256 must be 64 lowercase hex digits")
        if self.size is not None and self.size <= 0:
            raise InvalidOptionError(f"model {self.name}: size must be positive")
        for name, triple in (("mean", self.mean), ("std", self.std)):
            if triple is not None and len(triple) != 3:
                raise InvalidOptionError(f"model {self.name}: {name} needs 3 values")
        if self.std is not None and any(v <= 0 for v in self.std):
            raise InvalidOptionError(f"model {self.name}: std values must be positive")
        if not self.inputs or not self.outputs:
            raise InvalidOptionError(f"model {self.name}: needs at least one input and one output")

    @property
    def pinned(self) -> bool:
        """Whether the spec pins the file's sha256."""
        return self.sha256 is not None

    def warmup_dim(self, name: str | None) -> int:
        """Size to use for a dynamic dimension called ``name`` in the warm-up input."""
        return dict(self.warmup_dims).get(name or "", 1)
