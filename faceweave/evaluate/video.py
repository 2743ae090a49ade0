"""Temporal quality of a video swap, relative to the original video.

Both videos are measured the same way, frame by frame, with no smoothing:
the largest face's mesh is found in every frame (detector and mesh each
frame), and two figures are taken over runs of consecutive frames that have
a face:

- **landmark jitter**: the mean size of the second difference of the mesh
  points, ``|p[t+1] - 2 p[t] + p[t-1]|``, over the face size: shaking that
  is not motion;
- **frame-to-frame change**: the mean absolute grey-level difference between
  consecutive frames inside the face box: flicker of colour or of the mask.

Each is reported for the original and for the swap, and as the ratio
swap / original (1.0: as steady as the original).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import cv2
import numpy as np

from faceweave.io import atomic_output

#: the issue's target: the swap shakes at most this much more than the original
JITTER_RATIO_TARGET = 1.2


@dataclass(frozen=True)
class TemporalFigures:
    frames: int
    frames_with_face: int
    jitter: float | None
    change: float | None


@dataclass(frozen=True)
class VideoEvaluation:
    original: TemporalFigures
    swapped: TemporalFigures
    jitter_ratio: float | None
    change_ratio: float | None
    swap_fps: float
    output: str

    def as_dict(self) -> dict:
        return asdict(self)


def _same_face(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two meshes of consecutive frames are the same face (their
    boxes overlap by more than half): the largest face can switch to another
    person at a cut or when people cross."""
    (ax1, ay1), (ax2, ay2) = a.min(axis=0), a.max(axis=0)
    (bx1, by1), (bx2, by2) = b.min(axis=0), b.max(axis=0)
    iw, ih = max(0.0, min(ax2, bx2) - max(ax1, bx1)), max(0.0, min(ay2, by2) - max(ay1, by1))
    inter = iw * ih
    union = (ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1) - inter
    return union > 0 and inter / union > 0.5


def temporal_figures(frames: list[np.ndarray | None], meshes: list[np.ndarray | None]) -> TemporalFigures:
    """Jitter and frame-to-frame change from per-frame grey images and
    ``(478, 2)`` meshes (``None`` where no face was found); only runs of the
    same face count."""
    jitter, change = [], []
    for t in range(1, len(meshes) - 1):
        a, b, c = meshes[t - 1], meshes[t], meshes[t + 1]
        if a is None or b is None or c is None or not (_same_face(a, b) and _same_face(b, c)):
            continue
        size = float(np.ptp(b, axis=0).max())
        if size <= 0:
            continue
        jitter.append(float(np.linalg.norm(c - 2 * b + a, axis=1).mean()) / size)
    for t in range(1, len(meshes)):
        prev, cur = meshes[t - 1], meshes[t]
        before, now = frames[t - 1], frames[t]
        if prev is None or cur is None or now is None or before is None or not _same_face(prev, cur):
            continue
        x1, y1 = np.floor(cur.min(axis=0)).astype(int)
        x2, y2 = np.ceil(cur.max(axis=0)).astype(int)
        h, w = now.shape
        x1, y1, x2, y2 = max(x1, 0), max(y1, 0), min(x2, w), min(y2, h)
        if x2 - x1 < 4 or y2 - y1 < 4:
            continue
        diff = np.abs(now[y1:y2, x1:x2].astype(np.float32) - before[y1:y2, x1:x2].astype(np.float32))
        change.append(float(diff.mean()))
    found = sum(m is not None for m in meshes)
    return TemporalFigures(
        frames=len(meshes),
        frames_with_face=found,
        jitter=float(np.mean(jitter)) if jitter else None,
        change=float(np.mean(change)) if change else None,
    )


def measure_video(path: str | os.PathLike, analyser) -> TemporalFigures:
    """:func:`temporal_figures` of a video file, the largest face per frame."""
    from faceweave.video.io import VideoReader

    greys: list[np.ndarray | None] = []
    meshes: list[np.ndarray | None] = []
    with VideoReader(path) as reader:
        for frame in reader:
            faces = analyser.analyse(frame.pixels, small_faces=False)
            face = max(faces, key=lambda f: f.bbox.area) if faces else None
            meshes.append(None if face is None else np.array(face.mesh[:, :2]))
            greys.append(cv2.cvtColor(frame.pixels, cv2.COLOR_RGB2GRAY))
    return temporal_figures(greys, meshes)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b <= 0 else a / b


def evaluate_video(video: Path, source: Path, out_dir: Path, *, swapper, progress=None) -> VideoEvaluation:
    """Swap ``source`` into ``video`` (largest face), measure both videos and
    write ``result.mp4``, ``video_report.json`` and ``video_summary.txt`` to
    ``out_dir``."""
    from faceweave.video.pipeline import VideoSwapper

    out_dir.mkdir(parents=True, exist_ok=True)
    result = out_dir / "result.mp4"
    report = VideoSwapper(swapper).swap_video([source], video, result, progress=progress)
    original = measure_video(video, swapper.analyser)
    swapped = measure_video(result, swapper.analyser)
    evaluation = VideoEvaluation(
        original=original,
        swapped=swapped,
        jitter_ratio=_ratio(swapped.jitter, original.jitter),
        change_ratio=_ratio(swapped.change, original.change),
        swap_fps=report.fps,
        output=str(result),
    )
    for name, text in (
        ("video_report.json", json.dumps(evaluation.as_dict(), indent=2)),
        ("video_summary.txt", format_video_summary(evaluation, video)),
    ):
        with atomic_output(out_dir / name) as tmp:
            Path(tmp).write_text(text + "\n")
    return evaluation


def format_video_summary(e: VideoEvaluation, video: Path | str) -> str:
    def f(v: float | None, digits: int = 4) -> str:
        return "n/a" if v is None else f"{v:.{digits}f}"

    verdict = "n/a" if e.jitter_ratio is None else ("PASS" if e.jitter_ratio <= JITTER_RATIO_TARGET else "FAIL")
    return "\n".join(
        [
            f"faceweave evaluate (video): {video}",
            f"frames:            {e.swapped.frames} (face in {e.original.frames_with_face} original, "
            f"{e.swapped.frames_with_face} swapped)",
            f"landmark jitter:   original {f(e.original.jitter)}  swapped {f(e.swapped.jitter)}  ratio "
            f"{f(e.jitter_ratio, 2)}",
            f"frame change:      original {f(e.original.change, 2)}  swapped {f(e.swapped.change, 2)}  ratio "
            f"{f(e.change_ratio, 2)}",
            f"swap speed:        {e.swap_fps:.1f} fps",
            f"  {verdict}  jitter ratio <= {JITTER_RATIO_TARGET}",
        ]
    )
