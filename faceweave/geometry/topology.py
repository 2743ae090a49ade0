"""Index sets of mediapipe's 478-point face mesh, derived from the connection
tables that ship with mediapipe (no copied constants to drift out of date).

Every function here is pure and cached; the returned arrays are read-only.
"Left"/"right" below are the subject's: the subject's right eye is on the
image left in an unmirrored photo.
"""

from __future__ import annotations

from functools import cache

import numpy as np


def _connections():
    from faceweave.mediapipe_import import load_mediapipe

    c = load_mediapipe().solutions.face_mesh_connections

    return c


def _ro(a) -> np.ndarray:
    arr = np.asarray(a, dtype=np.int32)
    arr.setflags(write=False)
    return arr


def _loops(edges) -> list[list[int]]:
    """Split an undirected edge set made of disjoint simple cycles into ordered loops."""
    adj: dict[int, list[int]] = {}
    for a, b in edges:
        adj.setdefault(a, []).append(b)
        adj.setdefault(b, []).append(a)
    seen: set[int] = set()
    loops = []
    for start in sorted(adj):
        if start in seen:
            continue
        loop, prev, cur = [start], None, start
        seen.add(start)
        while True:
            nxt = [n for n in adj[cur] if n != prev]
            if not nxt:
                break
            n = nxt[0] if nxt[0] not in seen or len(nxt) == 1 else nxt[-1]
            if n == start or n in seen:
                break
            loop.append(n)
            seen.add(n)
            prev, cur = cur, n
        loops.append(loop)
    return loops


@cache
def tessellation_edges() -> np.ndarray:
    """``(E, 2)`` edges of the face mesh surface."""
    return _ro(sorted(tuple(sorted(e)) for e in _connections().FACEMESH_TESSELATION))


@cache
def _adjacency() -> dict[int, frozenset[int]]:
    """Each surface vertex's neighbours along the tessellation's edges."""
    adj: dict[int, set[int]] = {}
    for a, b in tessellation_edges().tolist():
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    return {v: frozenset(n) for v, n in adj.items()}


@cache
def tessellation() -> np.ndarray:
    """``(T, 3)`` triangles of the face mesh surface (vertex indices < 468)."""
    adj = _adjacency()
    tris = set()
    for a, b in tessellation_edges().tolist():
        for c in adj[a] & adj[b]:
            tris.add(tuple(sorted((a, b, c))))
    return _ro(sorted(tris))


@cache
def face_oval() -> np.ndarray:
    """Ordered loop of the 36 face-outline points."""
    (loop,) = _loops(_connections().FACEMESH_FACE_OVAL)
    return _ro(loop)


def _lip_loops() -> tuple[list[int], list[int]]:
    loops = _loops(_connections().FACEMESH_LIPS)
    loops.sort(key=lambda lp: 61 in lp)  # the outer loop holds the mouth corner 61
    inner, outer = loops
    return inner, outer


@cache
def lips_inner() -> np.ndarray:
    """Ordered loop of the inner lip line (the mouth opening)."""
    return _ro(_lip_loops()[0])


@cache
def lips_outer() -> np.ndarray:
    """Ordered loop of the outer lip line."""
    return _ro(_lip_loops()[1])


@cache
def right_eye() -> np.ndarray:
    """Ordered eyelid loop of the subject's right eye (image left)."""
    (loop,) = _loops(_connections().FACEMESH_RIGHT_EYE)
    return _ro(loop)


@cache
def left_eye() -> np.ndarray:
    """Ordered eyelid loop of the subject's left eye (image right)."""
    (loop,) = _loops(_connections().FACEMESH_LEFT_EYE)
    return _ro(loop)


@cache
def right_eyebrow() -> np.ndarray:
    return _ro(sorted({i for e in _connections().FACEMESH_RIGHT_EYEBROW for i in e}))


@cache
def left_eyebrow() -> np.ndarray:
    return _ro(sorted({i for e in _connections().FACEMESH_LEFT_EYEBROW for i in e}))


#: iris points added by the refined mesh: centre first, then four on the rim
RIGHT_IRIS = _ro([468, 469, 470, 471, 472])
LEFT_IRIS = _ro([473, 474, 475, 476, 477])

#: the cheeks below the eyes, as polygons (mediapipe's cheek points): the
#: subject's right (image left), then its left
RIGHT_CHEEK = _ro([117, 118, 101, 36, 205, 187, 123, 116])
LEFT_CHEEK = _ro([346, 347, 330, 266, 425, 411, 352, 345])

#: the folds that run from each side of the nose past the mouth's corners
#: (nasolabial folds: deep in a smile, faint in a resting face), as chains of
#: mesh points from the nose's wing down: the subject's right (image left),
#: then its left (each the other's mirror)
RIGHT_FOLD = _ro([129, 203, 206, 216, 212])
LEFT_FOLD = _ro([358, 423, 426, 436, 432])

#: named single landmarks
NOSE_TIP = 1
NOSE_BASE = 2  # subnasale, where the nose meets the upper lip
NOSE_BRIDGE_TOP, NOSE_BRIDGE_MID = 168, 6
MOUTH_CORNER_RIGHT = 61  # image left
MOUTH_CORNER_LEFT = 291  # image right
UPPER_LIP_INNER = 13
LOWER_LIP_INNER = 14
RIGHT_EYE_OUTER, RIGHT_EYE_INNER = 33, 133
LEFT_EYE_INNER, LEFT_EYE_OUTER = 362, 263
RIGHT_EYE_UPPER, RIGHT_EYE_LOWER = 159, 145
LEFT_EYE_UPPER, LEFT_EYE_LOWER = 386, 374
FOREHEAD_TOP = 10
CHIN = 152


def kps5_from_mesh(points: np.ndarray) -> np.ndarray:
    """``(5, 2)`` insightface-order key points from ``(478, 2+)`` mesh points:
    eye centres (image left, image right), nose tip, mouth corners (image left, right)."""
    p = np.asarray(points)[:, :2]
    return np.stack(
        [p[RIGHT_IRIS[0]], p[LEFT_IRIS[0]], p[NOSE_TIP], p[MOUTH_CORNER_RIGHT], p[MOUTH_CORNER_LEFT]]
    ).astype(np.float32)


#: the mesh vertex nearest each of the 68 iBUG points (jaw 0-16, brows 17-26,
#: nose 27-35, eyes 36-47, mouth 48-67): for each point, the vertex closest on
#: average to dlib's 68-point predictor on the same faces (26 faces within 20
#: degrees of frontal; 1-3 % of the eye-corner distance off inside the face,
#: about 5 % along the jaw, whose contour the two draw differently);
#: ``tools/derive_mesh68.py`` derives it
MESH_TO_68: tuple[int, ...] = (
    127, 227, 147, 215, 172, 136, 149, 148, 152, 377, 378, 365, 397, 435, 376, 454, 356,
    70, 63, 105, 66, 55, 285, 296, 334, 293, 300,
    168, 197, 195, 4, 75, 97, 2, 326, 305,
    33, 160, 158, 155, 153, 144, 382, 385, 386, 263, 373, 380,
    61, 39, 37, 0, 267, 269, 291, 405, 314, 17, 84, 181, 78, 82, 13, 312, 308, 317, 14, 87,
)  # fmt: skip


def points68_from_mesh(points: np.ndarray) -> np.ndarray:
    """``(68, 2)`` float32 iBUG-layout points from ``(478, 2+)`` mesh points (:data:`MESH_TO_68`)."""
    return np.asarray(points)[list(MESH_TO_68), :2].astype(np.float32)


@cache
def _meta() -> dict[str, np.ndarray]:
    from importlib.resources import files

    with files("faceweave.geometry").joinpath("data/mesh_meta.npz").open("rb") as fh:
        data = np.load(fh)
        out = {}
        for k in data.files:
            arr = np.array(data[k])
            arr.setflags(write=False)
            out[k] = arr
        return out


@cache
def reference_mesh() -> np.ndarray:
    """``(478, 3)`` float32 frontal face shape (centred, unit RMS size):
    yaw, pitch and roll 0 by definition."""
    return _meta()["reference"]


@cache
def triangles() -> np.ndarray:
    """``(T, 3)`` tessellation triangles, then the eye-opening fills
    (:func:`eye_fills`), wound so that a triangle facing the camera has a
    positive signed area in image coordinates (x right, y down)."""
    return _meta()["triangles"]


@cache
def mirror() -> np.ndarray:
    """``(478,)`` index of each landmark's left-right mirror partner."""
    return _meta()["mirror"]


@cache
def lips_block() -> np.ndarray:
    """All vertices of the lips: the outer lip loop and every vertex reachable
    from the inner loop without crossing it (the lip surface)."""
    outer = set(lips_outer().tolist())
    inner = lips_inner().tolist()
    adj = _adjacency()
    seen, stack = set(inner), list(inner)
    while stack:
        v = stack.pop()
        for n in adj.get(v, ()):
            if n not in seen and n not in outer:
                seen.add(n)
                stack.append(n)
    return _ro(sorted(seen | outer))


def _fan(loop: np.ndarray, centre: int) -> list[tuple[int, int, int]]:
    return [(int(loop[i]), int(loop[(i + 1) % len(loop)]), centre) for i in range(len(loop))]


@cache
def eye_fills() -> np.ndarray:
    """``(32, 3)`` triangles filling both eye openings (the tessellation
    leaves them empty): each eyelid loop fanned to its iris centre, so the
    source's iris lands where the target's iris is (the target's gaze)."""
    return _ro(_fan(right_eye(), int(RIGHT_IRIS[0])) + _fan(left_eye(), int(LEFT_IRIS[0])))


@cache
def eyes() -> tuple[tuple[np.ndarray, tuple[int, int], tuple[int, int]], ...]:
    """The subject's right eye, then left: its eyelid loop, its corners
    (outer, inner) and the middles of its lids (upper, lower)."""
    return (
        (right_eye(), (RIGHT_EYE_OUTER, RIGHT_EYE_INNER), (RIGHT_EYE_UPPER, RIGHT_EYE_LOWER)),
        (left_eye(), (LEFT_EYE_OUTER, LEFT_EYE_INNER), (LEFT_EYE_UPPER, LEFT_EYE_LOWER)),
    )


@cache
def oval_rings() -> np.ndarray:
    """``(478,)`` how many mesh edges each vertex is from the face outline
    (0 on the outline; the irises, outside the tessellation, count as far)."""
    adj = _adjacency()
    far = 10_000
    rings = np.full(478, far, np.int32)
    frontier = [int(v) for v in face_oval()]
    rings[frontier] = 0
    while frontier:
        nxt = []
        for v in frontier:
            for n in adj.get(v, ()):
                if rings[n] == far:
                    rings[n] = rings[v] + 1
                    nxt.append(n)
        frontier = nxt
    return _ro(rings)


@cache
def stable_points() -> np.ndarray:
    """Vertices that move little with expression (all but the lips, eyelids
    and irises): used to fit one face's shape onto another."""
    moving = set(lips_block().tolist()) | set(right_eye().tolist()) | set(left_eye().tolist())
    moving |= set(RIGHT_IRIS.tolist()) | set(LEFT_IRIS.tolist())
    return _ro([i for i in range(468) if i not in moving])
