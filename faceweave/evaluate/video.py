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

**Expression** is compared frame by frame, as the judge's ``videoeval.py``
does: in every frame with a face in both videos, mouth opening (mesh 13-14),
mouth width (61-291) and eye opening (mean of 159-145 and 386-374), each over
the outer-eye-corner distance (33-263); reported are the mean absolute error
of each ratio over the clip, their mean, the per-frame series and the Pearson
correlation of the mouth-opening series (does the new face still speak as
the original did?).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from faceweave.evaluate.report import settings_line
from faceweave.geometry import topology as topo
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
class ExpressionFrame:
    """The expression ratios (mouth opening, mouth width, eye opening over the
    outer-eye-corner distance) of one frame in the original and the swap."""

    frame: int
    original: tuple[float, float, float]
    swapped: tuple[float, float, float]


@dataclass(frozen=True)
class ExpressionFigures:
    """Expression of the swap against the original over the frames with a
    face in both: mean absolute error of each ratio and their mean
    (``expression_error``), the correlation of the mouth-opening series, and
    the series; ``None`` where there are too few frames (or no variation)."""

    frames: int
    mouth_open_error: float | None = None
    mouth_width_error: float | None = None
    eye_open_error: float | None = None
    expression_error: float | None = None
    mouth_open_correlation: float | None = None
    series: tuple[ExpressionFrame, ...] = ()


@dataclass(frozen=True)
class VideoEvaluation:
    original: TemporalFigures
    swapped: TemporalFigures
    jitter_ratio: float | None
    change_ratio: float | None
    swap_fps: float
    output: str
    expression: ExpressionFigures = ExpressionFigures(frames=0)

    def as_dict(self) -> dict:
        """Everything, the per-frame expression series rounded to 5 decimals (short JSON)."""
        out = asdict(self)
        out["expression"]["series"] = [
            {"frame": f.frame, "original": _round5(f.original), "swapped": _round5(f.swapped)}
            for f in self.expression.series
        ]
        return out


def _round5(values: tuple[float, ...]) -> list[float]:
    return [round(v, 5) for v in values]


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


def corner_ratios(mesh: np.ndarray) -> tuple[float, float, float] | None:
    """Mouth opening (13-14), mouth width (61-291) and eye opening (mean of
    159-145 and 386-374) of a ``(468+, 2+)`` mesh, each over the outer
    eye-corner distance (33-263); ``None`` when the corners coincide."""
    p = np.asarray(mesh, np.float64)[:, :2]

    def dist(i: int, j: int) -> float:
        return float(np.linalg.norm(p[i] - p[j]))

    eyes = dist(topo.RIGHT_EYE_OUTER, topo.LEFT_EYE_OUTER)
    if eyes <= 1e-6:
        return None
    lids = (dist(topo.RIGHT_EYE_UPPER, topo.RIGHT_EYE_LOWER) + dist(topo.LEFT_EYE_UPPER, topo.LEFT_EYE_LOWER)) / 2
    return (
        dist(topo.UPPER_LIP_INNER, topo.LOWER_LIP_INNER) / eyes,
        dist(topo.MOUTH_CORNER_RIGHT, topo.MOUTH_CORNER_LEFT) / eyes,
        lids / eyes,
    )


def pearson(a: np.ndarray, b: np.ndarray) -> float | None:
    """Pearson correlation of two ``(N,)`` series; ``None`` below 3 values or
    when either series is constant."""
    if len(a) < 3 or float(np.std(a)) <= 1e-12 or float(np.std(b)) <= 1e-12:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def expression_figures(
    original: Sequence[np.ndarray | None], swapped: Sequence[np.ndarray | None]
) -> ExpressionFigures:
    """:class:`ExpressionFigures` from the per-frame ``(478, 2+)`` meshes of
    the original and the swap (``None`` where no face was found), frame ``t``
    of one against frame ``t`` of the other."""
    series = []
    for t, (a, b) in enumerate(zip(original, swapped, strict=False)):
        ra = None if a is None else corner_ratios(a)
        rb = None if b is None else corner_ratios(b)
        if ra is not None and rb is not None:
            series.append(ExpressionFrame(frame=t, original=ra, swapped=rb))
    if not series:
        return ExpressionFigures(frames=0)
    ro = np.array([f.original for f in series])
    rs = np.array([f.swapped for f in series])
    errors = np.abs(ro - rs).mean(axis=0)
    return ExpressionFigures(
        frames=len(series),
        mouth_open_error=float(errors[0]),
        mouth_width_error=float(errors[1]),
        eye_open_error=float(errors[2]),
        expression_error=float(errors.mean()),
        mouth_open_correlation=pearson(ro[:, 0], rs[:, 0]),
        series=tuple(series),
    )


@dataclass(frozen=True, eq=False)
class VideoScan:
    """Per frame of a video: the grey image and the largest face's ``(478,
    2)`` mesh (``None`` where there is no face)."""

    greys: list[np.ndarray | None]
    meshes: list[np.ndarray | None]


def scan_video(path: str | os.PathLike, analyser) -> VideoScan:
    """The :class:`VideoScan` of a video file (detector and mesh each frame)."""
    from faceweave.video.io import VideoReader

    scan = VideoScan(greys=[], meshes=[])
    with VideoReader(path) as reader:
        for frame in reader:
            faces = analyser.analyse(frame.pixels, small_faces=False)
            meshed = [f for f in faces if f.mesh is not None]  # the scan reads meshes
            face = max(meshed, key=lambda f: f.bbox.area) if meshed else None
            scan.meshes.append(None if face is None else np.array(face.points2d))
            scan.greys.append(cv2.cvtColor(frame.pixels, cv2.COLOR_RGB2GRAY))
    return scan


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
    before, after = scan_video(video, swapper.analyser), scan_video(result, swapper.analyser)
    original = temporal_figures(before.greys, before.meshes)
    swapped = temporal_figures(after.greys, after.meshes)
    evaluation = VideoEvaluation(
        original=original,
        swapped=swapped,
        jitter_ratio=_ratio(swapped.jitter, original.jitter),
        change_ratio=_ratio(swapped.change, original.change),
        swap_fps=report.fps,
        output=str(result),
        expression=expression_figures(before.meshes, after.meshes),
    )
    for name, text in (
        ("video_report.json", json.dumps(evaluation.as_dict(), indent=2)),
        ("video_summary.txt", format_video_summary(evaluation, video)),
    ):
        with atomic_output(out_dir / name) as tmp:
            Path(tmp).write_text(text + "\n")
    return evaluation


def format_video_summary(e: VideoEvaluation, video: Path | str, *, settings: Mapping[str, Any] | None = None) -> str:
    """Short summary; ``settings``: the ``SwapOptions`` used, dumped (a settings line)."""

    def f(v: float | None, digits: int = 4) -> str:
        return "n/a" if v is None else f"{v:.{digits}f}"

    x = e.expression
    verdict = "n/a" if e.jitter_ratio is None else ("PASS" if e.jitter_ratio <= JITTER_RATIO_TARGET else "FAIL")
    return "\n".join(
        [
            f"faceweave evaluate (video): {video}",
            f"settings:          {settings_line(settings or {})}",
            f"frames:            {e.swapped.frames} (face in {e.original.frames_with_face} original, "
            f"{e.swapped.frames_with_face} swapped)",
            f"landmark jitter:   original {f(e.original.jitter)}  swapped {f(e.swapped.jitter)}  ratio "
            f"{f(e.jitter_ratio, 2)}",
            f"frame change:      original {f(e.original.change, 2)}  swapped {f(e.swapped.change, 2)}  ratio "
            f"{f(e.change_ratio, 2)}",
            f"expression:        mouth open {f(x.mouth_open_error)}  mouth width {f(x.mouth_width_error)}  eyes "
            f"{f(x.eye_open_error)}  mean {f(x.expression_error)}  (abs. error over {x.frames} frames)",
            f"mouth opening:     correlation with the original {f(x.mouth_open_correlation, 3)}",
            f"swap speed:        {e.swap_fps:.1f} fps",
            f"  {verdict}  jitter ratio <= {JITTER_RATIO_TARGET}",
        ]
    )
