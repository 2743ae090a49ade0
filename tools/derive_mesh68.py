"""Derive ``faceweave.geometry.topology.MESH_TO_68``: for each of dlib's 68
iBUG points, the mediapipe mesh vertex closest to it on average, over faces
found in a folder of photos (both run on the same faces; distances over the
face's outer-eye-corner distance; faces turned more than 20 degrees left out).

    .venv/bin/python tools/derive_mesh68.py ../shared/data/faces [--every 3]

Prints the table and, on stderr, the mean distance of each point to its vertex.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import dlib
import face_recognition_models
import numpy as np

from faceweave.analysis import FaceAnalyser
from faceweave.errors import FaceweaveError
from faceweave.io.images import read_image


def distances(folder: Path, every: int) -> np.ndarray:
    """``(faces, 68, 478)`` normalised distances from each dlib point to each vertex."""
    predictor = dlib.shape_predictor(face_recognition_models.pose_predictor_model_location())
    analyser = FaceAnalyser()
    paths = sorted(folder.glob("identity/*/*.jpg"))[::every] + sorted(folder.glob("single/*"))
    found = []
    for path in paths:
        try:
            pixels = read_image(path).pixels
        except FaceweaveError:
            continue
        for face in analyser.analyse(pixels):
            if face.mesh is None or abs(face.pose.yaw) > 20:
                continue
            box = dlib.rectangle(int(face.bbox.x1), int(face.bbox.y1), int(face.bbox.x2), int(face.bbox.y2))
            shape = predictor(np.ascontiguousarray(pixels), box)
            points = np.array([[shape.part(i).x, shape.part(i).y] for i in range(68)], float)
            mesh = np.asarray(face.mesh[:, :2], float)
            scale = np.linalg.norm(mesh[33] - mesh[263])
            found.append(np.linalg.norm(points[:, None, :] - mesh[None, :, :], axis=2) / scale)
    return np.array(found)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--every", type=int, default=3, help="take every n-th identity photo")
    args = parser.parse_args()
    found = distances(args.folder, args.every)
    mean = found.mean(axis=0)
    chosen = mean.argmin(axis=1)
    print(tuple(int(i) for i in chosen))
    off = np.round(mean[np.arange(68), chosen], 3).tolist()
    print(f"{len(found)} faces; distance per point:", off, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
