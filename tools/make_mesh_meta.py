"""Derive mesh metadata from a frontal face and save it to
``faceweave/geometry/data/mesh_meta.npz``:

- ``mirror``: ``(478,)`` index of each landmark's left-right mirror partner,
  found by running the mesh on the public-domain astronaut photo
  (``skimage.data.astronaut()``) and on its mirror image;
- ``triangles``: the tessellation followed by the eye-opening fans, with a consistent winding (positive signed
  area, i.e. facing the camera, on a frontal face).

Run: ``.venv/bin/python tools/make_mesh_meta.py``.
"""

from pathlib import Path

import numpy as np
from scipy.optimize import linear_sum_assignment
from skimage.data import astronaut

from faceweave.analysis import FaceAnalyser
from faceweave.geometry.topology import eye_fans, tessellation


def main() -> None:
    img = astronaut()
    with FaceAnalyser() as an:
        (face,) = an.analyse(img)
        (flipped,) = an.analyse(np.ascontiguousarray(img[:, ::-1]))
    pts = face.mesh[:, :2].astype(np.float64)
    mir = flipped.mesh[:, :2].astype(np.float64).copy()
    mir[:, 0] = img.shape[1] - mir[:, 0]
    # mir[i] is where the mirror partner of i sits on the original face
    cost = np.linalg.norm(mir[:, None, :] - pts[None, :, :], axis=2)
    rows, cols = linear_sum_assignment(cost)
    mirror = np.empty(len(pts), np.int32)
    mirror[rows] = cols
    # make it an involution: keep pairs that agree, fix the rest by symmetry
    for i in range(len(mirror)):
        j = mirror[i]
        if mirror[j] != i:
            mirror[j] = i
    assert np.all(mirror[mirror] == np.arange(len(mirror))), "mirror map is not an involution"
    tris = np.concatenate([tessellation(), eye_fans()]).copy()
    a, b, c = pts[tris[:, 0]], pts[tris[:, 1]], pts[tris[:, 2]]
    area = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0])
    tris[area < 0] = tris[area < 0][:, [0, 2, 1]]
    out = Path(__file__).resolve().parents[1] / "faceweave" / "geometry" / "data" / "mesh_meta.npz"
    np.savez_compressed(out, mirror=mirror, triangles=tris.astype(np.int32))
    print(f"wrote {out}: {len(tris)} triangles, {int(np.sum(mirror == np.arange(len(mirror))))} self-mirrored points")


if __name__ == "__main__":
    main()
