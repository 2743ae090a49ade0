"""Derive mesh metadata from a frontal face and save it to
``faceweave/geometry/data/mesh_meta.npz``:

- ``mirror``: ``(478,)`` index of each landmark's left-right mirror partner,
  found by running the mesh on the public-domain astronaut photo
  (``skimage.data.astronaut()``) and on its mirror image;
- ``reference``: ``(478, 3)`` a frontal face shape (the astronaut's mesh
  averaged with its mirror image), used to measure head pose;
- ``triangles``: the tessellation followed by the eye-opening fills, with a consistent winding (positive signed
  area, i.e. facing the camera, on a frontal face).

Run: ``.venv/bin/python tools/make_mesh_meta.py``.
"""

from pathlib import Path

import numpy as np
from scipy.optimize import linear_sum_assignment
from skimage.data import astronaut

from faceweave.analysis.detector import MediapipeFaceDetector
from faceweave.analysis.landmarker import MediapipeFaceMesh
from faceweave.geometry.topology import eye_fills, tessellation


def main() -> None:
    img = astronaut()
    detector, mesher = MediapipeFaceDetector(), MediapipeFaceMesh()

    def mesh_of(rgb: np.ndarray) -> np.ndarray:
        (det,) = detector.detect(rgb)
        return mesher.landmarks(rgb, det.bbox)

    face_mesh = mesh_of(img)
    flipped_mesh = mesh_of(np.ascontiguousarray(img[:, ::-1]))
    pts = face_mesh[:, :2].astype(np.float64)
    mir = flipped_mesh[:, :2].astype(np.float64).copy()
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
    tris = np.concatenate([tessellation(), eye_fills()]).copy()
    a, b, c = pts[tris[:, 0]], pts[tris[:, 1]], pts[tris[:, 2]]
    area = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0])
    tris[area < 0] = tris[area < 0][:, [0, 2, 1]]
    # a frontal reference shape: the face averaged with its own mirror image
    # (yaw and roll cancel), centred and scaled to unit size
    p3 = face_mesh.astype(np.float64)
    p3 = p3 - p3.mean(axis=0)
    flipped3 = p3[mirror].copy()
    flipped3[:, 0] = -flipped3[:, 0]
    reference = (p3 + flipped3) / 2.0
    reference /= np.sqrt((reference**2).sum(axis=1).mean())
    out = Path(__file__).resolve().parents[1] / "faceweave" / "geometry" / "data" / "mesh_meta.npz"
    np.savez_compressed(out, mirror=mirror, triangles=tris.astype(np.int32), reference=reference.astype(np.float32))
    print(f"wrote {out}: {len(tris)} triangles, {int(np.sum(mirror == np.arange(len(mirror))))} self-mirrored points")


if __name__ == "__main__":
    main()
