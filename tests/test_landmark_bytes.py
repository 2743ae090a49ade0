"""Landmarks of mediapipe's results read straight from their serialized
bytes (faceweave/analysis/landmarker.py ``landmark_array``) are those
read one attribute at a time."""

from __future__ import annotations

import numpy as np
import pytest


def landmark_list(rows: list[tuple[float, ...]]):
    from mediapipe.framework.formats import landmark_pb2

    out = landmark_pb2.NormalizedLandmarkList()
    for row in rows:
        point = out.landmark.add()
        point.x, point.y, point.z = row[:3]
        if len(row) > 3:
            point.visibility = row[3]
    return out


@pytest.mark.parametrize(
    "rows",
    [
        [(0.25, 0.5, -0.01), (0.75, 0.125, 0.02)] * 239,  # a mesh's worth, read from the bytes
        [(0.25, 0.5, -0.01), (0.0, 0.125, 0.02)],  # a zero left out of the bytes
        [(0.25, 0.5, -0.01, 0.9)],  # a visibility: another layout
        [(float(np.float32(1 / 3)), 2.5e-8, -1e6)],
    ],
)
def test_landmarks_read_from_their_bytes_are_those_read_one_by_one(rows):
    from faceweave.analysis.landmarker import landmark_array

    landmarks = landmark_list(rows)
    want = np.array([[p.x, p.y, p.z] for p in landmarks.landmark], np.float32)
    got = landmark_array(landmarks)
    assert got.dtype == np.float32 and got.shape == (len(rows), 3)
    np.testing.assert_array_equal(got, want)


def test_no_landmarks_is_an_empty_array():
    from faceweave.analysis.landmarker import landmark_array

    assert landmark_array(landmark_list([])).shape == (0, 3)
