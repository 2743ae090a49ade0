"""Which target faces are swapped: ordering and selection, as pure functions.

Both functions take the faces found in an image and return *indices into that
sequence*, so the caller keeps its own list and never sees a reordered copy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from faceweave.errors import InvalidOptionError, NoMatchingFaceError
from faceweave.options import FACE_ORDERS, SelectionOptions
from faceweave.types import Face


def _sort_key(order: str) -> Callable[[Face], float]:
    """The ascending sort key that puts faces in ``order``."""
    match order:
        case "left-right":
            return lambda f: f.bbox.center[0]
        case "right-left":
            return lambda f: -f.bbox.center[0]
        case "top-bottom":
            return lambda f: f.bbox.center[1]
        case "bottom-top":
            return lambda f: -f.bbox.center[1]
        case "large-small":
            return lambda f: -f.bbox.area
        case "small-large":
            return lambda f: f.bbox.area
        case "best-score":
            return lambda f: -f.score
    raise InvalidOptionError(f"unknown face order {order!r}; expected one of: {', '.join(FACE_ORDERS)}")


def order_faces(faces: Sequence[Face], order: str) -> list[int]:
    """Indices into ``faces`` in the given order (ties keep detection order).

    ``order`` is one of ``left-right``, ``right-left``, ``top-bottom``,
    ``bottom-top`` (by box centre), ``large-small``, ``small-large`` (by box
    area) or ``best-score`` (detector confidence, highest first).
    """
    key = _sort_key(order)
    return sorted(range(len(faces)), key=lambda i: (key(faces[i]), i))


def select_faces(
    faces: Sequence[Face],
    options: SelectionOptions,
    *,
    reference: np.ndarray | None = None,
) -> list[int]:
    """Indices into ``faces`` of the faces to swap, in swap order.

    Faces smaller than ``options.min_face_size`` are dropped first, then the
    rest are ordered by ``options.order`` and chosen by ``options.mode``:

    - ``one``: the first face after ordering;
    - ``many``: every face;
    - ``index``: the faces at ``options.indices`` in the ordered list;
    - ``reference``: every face whose embedding lies within
      ``options.reference_distance`` (L2) of ``reference``, a ``(128,)``
      embedding, nearest first.

    Raises:
        NoMatchingFaceError: no face is left after filtering, an index is out
            of range, or no face is near enough to the reference.
        InvalidOptionError: reference mode without a valid reference
            embedding, or a face without an embedding.
    """
    ordered = _filter_and_order(faces, options)
    match options.mode:
        case "one":
            return ordered[:1]
        case "many":
            return ordered
        case "index":
            return _by_index(ordered, options.indices)
        case "reference":
            return _by_reference(faces, ordered, reference, options.reference_distance)
    raise InvalidOptionError(f"unknown selection mode {options.mode!r}")


def _filter_and_order(faces: Sequence[Face], options: SelectionOptions) -> list[int]:
    if not faces:
        raise NoMatchingFaceError("there are no faces to select from")
    kept = [i for i, face in enumerate(faces) if face.size >= options.min_face_size]
    if not kept:
        largest = max(face.size for face in faces)
        raise NoMatchingFaceError(
            f"all {len(faces)} face(s) are smaller than the minimum face size of "
            f"{options.min_face_size} px (the largest is {largest:.0f} px)"
        )
    return [kept[j] for j in order_faces([faces[i] for i in kept], options.order)]


def _by_index(ordered: list[int], indices: Sequence[int]) -> list[int]:
    if not indices:
        raise InvalidOptionError("face selection by index needs at least one index")
    count = len(ordered)
    bad = [i for i in indices if not 0 <= i < count]
    if bad:
        valid = "0" if count == 1 else f"0 to {count - 1}"
        raise NoMatchingFaceError(
            f"face index {', '.join(map(str, bad))} is out of range: "
            f"{count} face(s) can be selected, so valid indices are {valid}"
        )
    return list(dict.fromkeys(ordered[i] for i in indices))


def _by_reference(
    faces: Sequence[Face], ordered: list[int], reference: np.ndarray | None, threshold: float
) -> list[int]:
    if reference is None:
        raise InvalidOptionError("face selection by reference needs a reference face embedding")
    ref = np.asarray(reference, dtype=np.float32)
    if ref.shape != (128,):
        raise InvalidOptionError(f"reference embedding: expected shape (128,), got {ref.shape}")
    embeddings = {i: faces[i].embedding for i in ordered}
    missing = [i for i, embedding in embeddings.items() if embedding is None]
    if missing:
        raise InvalidOptionError(f"face selection by reference needs embeddings, but face(s) {missing} have none")
    distance = {i: float(np.linalg.norm(e - ref)) for i, e in embeddings.items() if e is not None}
    matches = sorted((i for i in ordered if distance[i] <= threshold), key=lambda i: distance[i])
    if not matches:
        nearest = min(distance.values())
        raise NoMatchingFaceError(
            f"no face matches the reference face: the nearest is at distance {nearest:.3f}, "
            f"above the threshold of {threshold:.3f}"
        )
    return matches
