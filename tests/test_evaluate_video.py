"""Temporal figures of a video swap (jitter, frame-to-frame change)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from faceweave.evaluate.video import temporal_figures


def square_mesh(x: float, y: float, size: float = 100.0) -> np.ndarray:
    grid = np.stack(np.meshgrid(np.linspace(0, size, 5), np.linspace(0, size, 5)), axis=-1).reshape(-1, 2)
    return grid + [x, y]


def test_jitter_is_zero_for_steady_motion_and_grows_with_shaking():
    frames = [np.full((300, 300), 100, np.uint8) for _ in range(20)]
    steady = [square_mesh(50 + 2 * t, 60) for t in range(20)]  # constant speed: no second difference
    rng = np.random.default_rng(0)
    shaky = [m + rng.normal(0, 1.0, m.shape) for m in steady]
    a, b = temporal_figures(frames, steady), temporal_figures(frames, shaky)
    assert a.jitter == pytest.approx(0.0, abs=1e-9)
    assert b.jitter > 0.01 and a.frames == b.frames == 20 and a.frames_with_face == 20
    assert a.change == pytest.approx(0.0)


def test_frames_without_face_and_face_switches_are_left_out():
    frames = [np.full((300, 300), 100, np.uint8) for _ in range(6)]
    meshes = [
        square_mesh(50, 50),
        None,
        square_mesh(50, 50),
        square_mesh(50, 50),
        square_mesh(190, 190),
        square_mesh(190, 190),
    ]
    figures = temporal_figures(frames, meshes)
    assert figures.frames_with_face == 5
    assert figures.jitter is None  # no three consecutive frames of one face
    flicker = [f.copy() for f in frames]
    flicker[3][50:150, 50:150] = 140
    assert temporal_figures(flicker, meshes).change > 10


@pytest.mark.slow
def test_evaluate_video_writes_a_report(tmp_path, faces_dir):
    from faceweave.evaluate.video import evaluate_video
    from faceweave.pipeline import FaceSwapper
    from faceweave.video.io import VideoReader, VideoWriter

    clip = tmp_path / "clip.mp4"
    with (
        VideoReader(faces_dir / "video/lp_d18_talking_face.mp4", end=0.5) as reader,
        VideoWriter(clip, info=reader.info) as writer,
    ):
        for frame in reader:
            writer.write(frame.pixels, frame.time)
    with FaceSwapper() as swapper:
        evaluation = evaluate_video(clip, faces_dir / "single/biden2.jpg", tmp_path / "report", swapper=swapper)
    assert evaluation.original.frames_with_face == evaluation.swapped.frames_with_face == evaluation.original.frames
    assert evaluation.jitter_ratio is not None and 0.2 < evaluation.jitter_ratio < 5
    report = json.loads((tmp_path / "report/video_report.json").read_text())
    assert report["jitter_ratio"] == pytest.approx(evaluation.jitter_ratio)
    assert "jitter ratio" in (tmp_path / "report/video_summary.txt").read_text()
