"""Carry one face's 3D shape onto another face's pose and expression."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from faceweave.geometry import topology as topo
from faceweave.geometry.align import apply_similarity, procrustes
from faceweave.geometry.expression import ExpressionCorrection, apply_correction, corner_axes

#: how far the lips' and eyes' expression offsets spread into the skin around
#: them, as the Gaussian width over the mouth's (or eye's) own width
SURROUND = 0.25
#: how much of the source's own lip shape the moved lips take (their
#: thickness and outline around the target's mouth line), and of its eye
#: shape (the lids' outline and the eye's width around the target's opening)
LIP_SHAPE = 1.0
EYE_SHAPE = 1.0
#: an eye's opening over its width at which it counts as shut, and as open
EYE_SHUT, EYE_OPEN = 0.11, 0.15


@lru_cache(maxsize=1)
def _blocks() -> tuple[tuple[np.ndarray, tuple[int, int]], ...]:
    """The moving blocks (lips, each eyelid loop with its iris) and the two
    points whose distance is each block's width."""
    irises = (topo.RIGHT_IRIS, topo.LEFT_IRIS)
    return ((topo.lips_block(), (topo.MOUTH_CORNER_RIGHT, topo.MOUTH_CORNER_LEFT)),) + tuple(
        (np.concatenate([loop, iris]), corners) for (loop, corners, _), iris in zip(topo.eyes(), irises, strict=False)
    )


@lru_cache(maxsize=1)
def _lip_anchors() -> np.ndarray:
    """``(len(lips_block), 478)`` float32 weights, read-only: for each vertex
    of :func:`topo.lips_block` (in its order), the point of the inner lip
    line it hangs from, as a mix of two neighbouring inner-line vertices.

    On the frontal reference face, the inner line is split at its corners
    into the upper and the lower lip's edge; a vertex belongs to the lip on
    whose side of the line between them it lies, and hangs from that lip's
    edge straight above or below it."""
    ref = topo.reference_mesh()
    inner = topo.lips_inner()
    x = ref[inner, 0]
    a, b = int(np.argmin(x)), int(np.argmax(x))
    lo, hi = min(a, b), max(a, b)
    chains = [inner[lo : hi + 1], np.concatenate([inner[hi:], inner[: lo + 1]])]
    chains = [c[np.argsort(ref[c, 0])] for c in chains]
    chains.sort(key=lambda c: float(ref[c, 1].mean()))  # upper lip edge first (y grows downwards)
    block = topo.lips_block()

    def on_chain(chain: np.ndarray, xv: float) -> tuple[int, int, float]:
        cx = ref[chain, 0]
        xv = float(np.clip(xv, cx[0], cx[-1]))
        k = int(np.clip(np.searchsorted(cx, xv) - 1, 0, len(chain) - 2))
        t = float((xv - cx[k]) / max(cx[k + 1] - cx[k], 1e-9))
        return int(chain[k]), int(chain[k + 1]), t

    weights = np.zeros((len(block), 478), np.float32)
    for row, v in enumerate(block):
        xv, yv = float(ref[v, 0]), float(ref[v, 1])
        edges = [on_chain(c, xv) for c in chains]
        ys = [(1 - t) * ref[i, 1] + t * ref[j, 1] for i, j, t in edges]
        i, j, t = edges[0] if yv < (ys[0] + ys[1]) / 2.0 else edges[1]
        weights[row, i] += 1.0 - t
        weights[row, j] += t
    weights.setflags(write=False)
    return weights


def _lip_shape(new: np.ndarray, fitted: np.ndarray, amount: float) -> None:
    """Give the moved lips (in ``new``, in place) the source's thickness and
    outline: every lip point keeps the target's inner mouth line (the
    expression) but stands as far across the line of the mouth corners from
    its point of that line as the source's point does.  Along that line
    nothing moves, so the mouth keeps the target's width."""
    block, anchors = topo.lips_block(), _lip_anchors()
    _, _, normal, width = corner_axes(new, topo.MOUTH_CORNER_RIGHT, topo.MOUTH_CORNER_LEFT)
    if width < 1e-6:
        return
    source_offset = (fitted[block, :2] - anchors @ fitted[:, :2]) @ normal
    target_offset = (new[block, :2] - anchors @ new[:, :2]) @ normal
    new[block, :2] += amount * (source_offset - target_offset)[:, None] * normal


def _lid_arcs(loop: np.ndarray, corners: tuple[int, int], lids: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Positions in ``loop`` of the upper and the lower lid (each the arc
    between the two corners that holds that lid's middle point, corners
    left out)."""
    i, j = sorted(int(np.flatnonzero(loop == c)[0]) for c in corners)
    first = np.arange(i + 1, j)
    second = np.concatenate([np.arange(j + 1, len(loop)), np.arange(0, i)])
    upper = int(np.flatnonzero(loop == lids[0])[0])
    return (first, second) if upper in first else (second, first)


@lru_cache(maxsize=2)
def _eye_layout(eye: int) -> tuple[tuple[np.ndarray, np.ndarray], tuple[int, int], list[int]]:
    """Of eye ``eye`` of :func:`topo.eyes`: the positions in its loop of the
    upper and lower lid's arcs, of the lids' middle points, and of the corners."""
    loop, corners, lids = topo.eyes()[eye]
    where = {int(v): k for k, v in enumerate(loop)}
    return _lid_arcs(loop, corners, lids), (where[lids[0]], where[lids[1]]), [where[c] for c in corners]


def eye_openness(mesh: np.ndarray, loop: np.ndarray, corners: tuple[int, int]) -> float:
    """An eye's opening over its width: the largest gap across the line of
    its corners between the lid loop's points on either side."""
    p = np.asarray(mesh, np.float64)
    _, _, normal, width = corner_axes(p, *corners)
    if width <= 1e-6:
        return 0.0
    across = (p[loop, :2] - p[corners[0], :2]) @ normal
    return float((across.max() - across.min()) / width)


def eye_open_weight(mesh: np.ndarray, loop: np.ndarray, corners: tuple[int, int]) -> float:
    """0 for an eye shut (openness :data:`EYE_SHUT` or less), 1 for an open
    one (:data:`EYE_OPEN` or more), a ramp between."""
    return float(np.clip((eye_openness(mesh, loop, corners) - EYE_SHUT) / (EYE_OPEN - EYE_SHUT), 0.0, 1.0))


def _eye_shape(new: np.ndarray, fitted: np.ndarray, eye: int, amount: float) -> None:
    """Give a moved eye (in ``new``, in place) the source's lid outline and
    width, opened as far as the target's: in the frame of the target eye's
    corners, each lid of the source's loop is stretched across so that its
    middle point (``lids``: upper, lower) lies as far from the line of the
    corners as the target lid's.  The iris stays (the target's gaze).  An
    eye that is shut or shutting (:func:`eye_open_weight`) keeps the
    target's own lids, as does one whose source eye is (nearly) shut.
    ``eye``: 0 or 1, the eye's place in :func:`topo.eyes`."""
    loop, corners, _ = topo.eyes()[eye]
    c_t, u_t, n_t, w_t = corner_axes(new, *corners)
    c_s, u_s, n_s, w_s = corner_axes(fitted, *corners)
    if w_t < 1e-6 or w_s < 1e-6:
        return
    amount *= eye_open_weight(new, loop, corners) * eye_open_weight(fitted, loop, corners)
    if amount <= 0.0:
        return
    along = (fitted[loop, :2] - c_s) @ u_s
    across_s = (fitted[loop, :2] - c_s) @ n_s
    across_t = (new[loop, :2] - c_t) @ n_t
    across = across_t.copy()
    arcs, middles, corner_places = _eye_layout(eye)
    for k, arc in zip(middles, arcs, strict=False):
        if abs(float(across_s[k])) > 0.02 * w_s and across_s[k] * across_t[k] > 0:
            across[arc] = across_s[arc] * (across_t[k] / across_s[k])
    across[corner_places] = 0.0
    # the new eye's width is the source's (the eyes' distance is the source's too)
    shaped = c_t + along[:, None] * u_t + across[:, None] * n_t
    new[loop, :2] += amount * (shaped - new[loop, :2])


@lru_cache(maxsize=1)
def _free_points() -> np.ndarray:
    """Mesh points that belong to no moving block (read-only)."""
    moving = np.concatenate([b for b, _ in _blocks()])
    free = np.setdiff1d(np.arange(468), moving)
    free.setflags(write=False)
    return free


def _spread_to_surround(new: np.ndarray, fitted: np.ndarray, blocks, surround: float) -> None:
    """Move the skin around each block (lips, eyes) of ``new`` by the block's
    offset from ``fitted``, falling off as a Gaussian ``surround`` times the
    block's width wide (in place)."""
    free = _free_points()
    around = fitted[free, :2]
    for block, (i, j) in blocks:
        offset = (new[block] - fitted[block]).astype(np.float32)
        sigma = surround * max(float(np.linalg.norm(fitted[i, :2] - fitted[j, :2])), 1e-6)
        # only points within four sigmas of the block are moved noticeably
        lo, hi = fitted[block, :2].min(axis=0) - 4.0 * sigma, fitted[block, :2].max(axis=0) + 4.0 * sigma
        inside = np.all((around >= lo) & (around <= hi), axis=1)
        near = free[inside]
        # the squared distance from planes of x and y differences (contiguous,
        # not a last axis of two: the same sums, several times faster)
        p, q = around[inside].astype(np.float32), fitted[block, :2].astype(np.float32)
        dx, dy = p[:, 0, None] - q[None, :, 0], p[:, 1, None] - q[None, :, 1]
        w = np.exp(-(dx * dx + dy * dy) / np.float32(2.0 * sigma**2))
        # the weighted mean offset of the block's points, faded by the distance to the nearest
        new[near] += (w @ offset) / np.maximum(w.sum(axis=1), 1e-12)[:, None] * w.max(axis=1)[:, None]


def transfer_shape(
    target: np.ndarray,
    source: np.ndarray,
    *,
    amount: float = 1.0,
    surround: float = SURROUND,
    correction: ExpressionCorrection | None = None,
) -> np.ndarray:
    """A new ``(478, 3)`` mesh with the source's face shape in the target's pose.

    The source mesh is fitted onto the target with a 3D similarity on stable
    points (no lips, eyelids or irises); the result takes the fitted source
    everywhere except the lips and each eye, which keep the target's own
    points moved as blocks: shifted by their mean offset and scaled about
    their centre by the change of the distance between the outer eye
    corners (the lips once more after the eyes take the source's outline),
    so that the target's expression (mouth and eye opening, mouth width, all
    relative to that distance) stays.

    The skin around the lips and eyes follows them: each block's offset from
    the fitted source spreads to the points around it, falling off as a
    Gaussian ``surround`` times the mouth's (eye's) width wide.  Without it a
    wide smile sits in the source's resting cheeks, whose texture then shows
    the source's mouth corners.  ``correction`` then changes the new lips
    and eyelids alone (:func:`faceweave.geometry.expression.apply_correction`;
    made after the finished face has been looked at, see
    :meth:`faceweave.pipeline.FaceSwapper.check_expression`).  ``amount`` in
    ``[0, 1]`` blends from the target's shape (0) to the source's (1).
    """
    target = np.asarray(target, np.float64)
    stable = topo.stable_points()
    s, r, t = procrustes(np.asarray(source, np.float64)[stable], target[stable])
    fitted = apply_similarity(source, s, r, t).astype(np.float64)
    new = fitted.copy()
    blocks = _blocks()

    def eye_distance(mesh: np.ndarray) -> float:
        # the outer eye corners, as expressions are read (faceweave.geometry.expression)
        return float(np.linalg.norm(mesh[topo.RIGHT_EYE_OUTER, :2] - mesh[topo.LEFT_EYE_OUTER, :2]))

    k = eye_distance(fitted) / max(eye_distance(target), 1e-6)
    for block, _ in blocks:
        centre_t = target[block].mean(axis=0)
        new[block] = fitted[block].mean(axis=0) + k * (target[block] - centre_t)
    if LIP_SHAPE > 0:
        _lip_shape(new, fitted, LIP_SHAPE)
    if EYE_SHAPE > 0:
        for eye in range(len(topo.eyes())):
            _eye_shape(new, fitted, eye, EYE_SHAPE)
        # the source's eyes set the corners: the mouth keeps its size beside them
        lips = blocks[0][0]
        grow = eye_distance(new) / max(k * eye_distance(target), 1e-6)
        centre = new[lips].mean(axis=0)
        new[lips] = centre + grow * (new[lips] - centre)
    if surround > 0:
        _spread_to_surround(new, fitted, blocks, surround)
    if correction is not None and not correction.is_none:
        # the lips and lids alone: the skin around them keeps its place, so
        # that the corners move against the texture beside them
        new = apply_correction(new, correction).astype(np.float64)
    return (target + amount * (new - target)).astype(np.float32)
