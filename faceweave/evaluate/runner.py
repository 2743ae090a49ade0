"""Run the swapper over the evaluation pairs of a folder and write the report.

``evaluate_folder`` reads ``identities.csv``, builds the pairs
(:mod:`faceweave.evaluate.pairs`), finds the largest face and its embedding in
every independent photo once, swaps each pair, scores it
(:mod:`faceweave.evaluate.metrics` on the masks of
:mod:`faceweave.evaluate.regions`), and writes ``report.json``,
``summary.txt``, ``contact_sheet.png`` and the swapped images
(``results/``) into the output folder, each file atomically.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from statistics import mean, median
from typing import Any, Protocol

import numpy as np
from pydantic import BaseModel

from faceweave.errors import FaceweaveError, OutputError
from faceweave.evaluate import metrics as M
from faceweave.evaluate import regions as R
from faceweave.evaluate.pairs import Photo, SwapPair, build_pairs, independent_photos, other_photos, read_identities
from faceweave.evaluate.sheet import SheetRow, blank_tile, contact_sheet, encode_png, face_thumbnail
from faceweave.io import atomic_output, read_image, write_image
from faceweave.types import Face, Image, SwapResult

REPORT_VERSION = 1


class _Analyser(Protocol):
    def analyse(self, pixels: np.ndarray, *, embeddings: bool = False) -> list[Face]: ...


class Swapper(Protocol):
    """What the runner needs of :class:`faceweave.pipeline.FaceSwapper`."""

    @property
    def analyser(self) -> _Analyser: ...

    def swap(self, sources: Sequence[Any], target: Any) -> SwapResult: ...


@dataclass(frozen=True)
class EvaluationSettings:
    """Constants of the metrics; saved in ``report.json`` with the results."""

    psnr_box_scale: float = 1.6  #: face box scale left out of psnr_outside
    seam_threshold: float = 6.0  #: grey levels of |result - target| that count as changed
    seam_border_width: int = 1  #: half-width of the border band, pixels
    seam_box_scale: float = 2.5  #: only border pixels inside the face box scaled by this count
    skin_distance: float = 12.0  #: ring pixels this close to the inner-skin median count as skin
    blotch_delta_e: float = 12.0  #: ΔE from the smoothed face that makes a pixel a blotch
    blotch_sigma: float = 0.1  #: smoothing sigma as a fraction of the face size
    match_iou: float = 0.3  #: a result face matches the target face above this box IoU
    thumbnail_scale: float = 2.2
    thumbnail_size: int = 256
    write_results: bool = True  #: also write each swapped image to results/


@dataclass(frozen=True)
class PairResult:
    """Figures of one swap pair; ``None`` where not measurable."""

    index: int
    source: str
    source_identity: str
    target: str
    target_identity: str
    found: bool  #: a face was found in the target and in the result
    swapped: bool  #: the swapper reports swapping the target face
    error: str | None = None
    id_dist_source: float | None = None
    id_dist_target: float | None = None
    nearest_identity: str | None = None
    retrieval: bool | None = None
    pose_error: float | None = None
    expression_error: float | None = None
    mouth_open_error: float | None = None  #: the three parts of expression_error
    mouth_width_error: float | None = None
    eye_open_error: float | None = None
    psnr_outside: float | None = None
    tone_error: float | None = None
    seam_ratio: float | None = None
    blotch_fraction: float | None = None
    sharpness_ratio: float | None = None
    runtime_ms: float | None = None
    result_file: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: _rounded(v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class Check:
    """One target of the check list: ``low <= value <= high``."""

    name: str
    key: str
    value: float | None
    low: float | None = None
    high: float | None = None

    @property
    def passed(self) -> bool:
        if self.value is None or (isinstance(self.value, float) and math.isnan(self.value)):
            return False
        return (self.low is None or self.value >= self.low) and (self.high is None or self.value <= self.high)

    @property
    def goal(self) -> str:
        if self.low is not None and self.high is not None:
            return f"in [{self.low:g}, {self.high:g}]"
        return f">= {self.low:g}" if self.low is not None else f"<= {self.high:g}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "key": self.key,
            "value": _rounded(self.value),
            "goal": self.goal,
            "passed": self.passed,
        }


#: the check list: (label, summary key, low, high)
CHECKS: tuple[tuple[str, str, float | None, float | None], ...] = (
    ("retrieval rate", "retrieval_rate", 0.95, None),
    ("median id_dist_source", "id_dist_source_median", None, 0.45),
    ("mean tone_error", "tone_error_mean", None, 3.0),
    ("median seam_ratio", "seam_ratio_median", None, 1.05),
    ("median sharpness_ratio", "sharpness_ratio_median", 0.85, 1.15),
    ("median pose_error", "pose_error_median", None, 2.0),
    ("median expression_error", "expression_error_median", None, 0.02),
    ("min psnr_outside", "psnr_outside_min", 40.0, None),
)


@dataclass(frozen=True, eq=False)
class EvaluationReport:
    """Everything ``report.json`` holds: options, per-pair results, summary
    statistics and the check list."""

    data_dir: str
    out_dir: str
    options: Mapping[str, Any]
    pairs: tuple[PairResult, ...]
    summary: Mapping[str, Any]
    checks: tuple[Check, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": REPORT_VERSION,
            "data_dir": self.data_dir,
            "options": dict(self.options),
            "summary": {k: _rounded(v) for k, v in self.summary.items()},
            "checks": [c.as_dict() for c in self.checks],
            "pairs": [p.as_dict() for p in self.pairs],
        }


# ------------------------------------------------------------ pure parts


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return None
        return round(value, 4)
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def image_metrics(
    target: np.ndarray, target_face: Face, result: np.ndarray, result_face: Face, *, settings: EvaluationSettings
) -> dict[str, float | None]:
    """Pose, expression, psnr_outside, tone, seam, blotch and sharpness of one
    swap: ``target`` and ``result`` are ``(H, W, 3)`` uint8 RGB, the faces are
    the target's face and the matching face found in the result."""
    shape = target.shape
    target_inner = R.inner_skin_mask(target_face, shape)
    result_inner = R.inner_skin_mask(result_face, shape)
    ring = R.skin_ring_mask(target_face, target, max_distance=settings.skin_distance)
    border = R.seam_border(
        result,
        target,
        threshold=settings.seam_threshold,
        width=settings.seam_border_width,
        within=R.box_mask(shape, target_face.bbox, scale=settings.seam_box_scale),
    )
    expression = M.expression_differences(result_face.mesh, target_face.mesh)
    return {
        "pose_error": M.pose_error(result_face.pose, target_face.pose),
        "expression_error": max(expression.as_tuple()),
        "mouth_open_error": expression.mouth_open,
        "mouth_width_error": expression.mouth_width,
        "eye_open_error": expression.eye_open,
        "psnr_outside": M.psnr(
            result, target, R.outside_box_mask(shape, target_face.bbox, scale=settings.psnr_box_scale)
        ),
        "tone_error": M.tone_error(result, target, result_inner=result_inner, target_inner=target_inner, ring=ring),
        "seam_ratio": M.seam_ratio(result, target, border),
        "blotch_fraction": M.blotch_excess(
            result,
            target,
            result_mask=result_inner,
            target_mask=target_inner,
            sigma=max(settings.blotch_sigma * target_face.size, 1.0),
            threshold=settings.blotch_delta_e,
        ),
        "sharpness_ratio": M.sharpness_ratio(result, target, result_mask=result_inner, target_mask=target_inner),
    }


def identity_metrics(
    embedding: np.ndarray | None,
    pair: SwapPair,
    photos: Sequence[Photo],
    embeddings: Mapping[str, np.ndarray],
) -> dict[str, Any]:
    """id_dist_source, id_dist_target, nearest_identity and retrieval of the
    result's ``(128,)`` embedding.  ``embeddings`` maps photo files to their
    largest face's embedding (photos without a face are absent).

    References leave out the pair's photos: the source person's mean is over
    their other photos, the target person's over theirs, and the retrieval
    centroids (every identity's mean) over all photos but the two used."""
    if embedding is None:
        return {"id_dist_source": None, "id_dist_target": None, "nearest_identity": None, "retrieval": None}

    def centroid(identity: str, exclude: set[str]) -> np.ndarray | None:
        refs = [embeddings[p.file] for p in other_photos(photos, identity, exclude=exclude) if p.file in embeddings]
        return M.mean_embedding(refs)

    used = {pair.source.file, pair.target.file}
    src = centroid(pair.source.identity, {pair.source.file})
    tgt = centroid(pair.target.identity, {pair.target.file})
    centroids = {}
    for identity in sorted({p.identity for p in independent_photos(photos)}):
        c = centroid(identity, used)
        if c is not None:
            centroids[identity] = c
    nearest = M.nearest_identity(embedding, centroids)
    return {
        "id_dist_source": None if src is None else M.embedding_distance(embedding, src),
        "id_dist_target": None if tgt is None else M.embedding_distance(embedding, tgt),
        "nearest_identity": nearest,
        "retrieval": None
        if nearest is None or pair.source.identity not in centroids
        else nearest == pair.source.identity,
    }


def summarize(results: Sequence[PairResult], *, photos_without_face: Sequence[str] = ()) -> dict[str, Any]:
    """Summary statistics; averages are over the pairs with ``found`` and a value."""
    found = [r for r in results if r.found]

    def values(key: str) -> list[float]:
        return [float(getattr(r, key)) for r in found if getattr(r, key) is not None]

    def stat(fn: Callable[[list[float]], float], key: str) -> float | None:
        v = values(key)
        return float(fn(v)) if v else None

    ids = values("id_dist_source")
    retrieval = [bool(r.retrieval) for r in found if r.retrieval is not None]
    runtimes = [r.runtime_ms for r in results if r.runtime_ms is not None]
    return {
        "pairs": len(results),
        "pairs_found": len(found),
        "all_faces_found": len(found) == len(results) and not photos_without_face,
        "pairs_not_found": [r.index for r in results if not r.found],
        "pairs_swapped": sum(1 for r in results if r.swapped),
        "photos_without_face": list(photos_without_face),
        "retrieval_rate": (sum(retrieval) / len(retrieval)) if retrieval else None,
        "id_dist_source_median": stat(median, "id_dist_source"),
        "id_dist_source_mean": stat(mean, "id_dist_source"),
        "id_dist_source_below_0_6": (sum(d < 0.6 for d in ids) / len(ids)) if ids else None,
        "id_dist_target_mean": stat(mean, "id_dist_target"),
        "tone_error_mean": stat(mean, "tone_error"),
        "seam_ratio_median": stat(median, "seam_ratio"),
        "blotch_fraction_mean": stat(mean, "blotch_fraction"),
        "sharpness_ratio_median": stat(median, "sharpness_ratio"),
        "pose_error_median": stat(median, "pose_error"),
        "pose_error_max": stat(max, "pose_error"),
        "expression_error_median": stat(median, "expression_error"),
        "expression_error_max": stat(max, "expression_error"),
        "mouth_open_error_median": stat(median, "mouth_open_error"),
        "mouth_width_error_median": stat(median, "mouth_width_error"),
        "eye_open_error_median": stat(median, "eye_open_error"),
        "psnr_outside_min": stat(min, "psnr_outside"),
        "psnr_outside_median": stat(median, "psnr_outside"),
        "runtime_ms_median": float(median(runtimes)) if runtimes else None,
    }


def run_checks(summary: Mapping[str, Any]) -> tuple[Check, ...]:
    """The :data:`CHECKS` list evaluated on a :func:`summarize` dict."""
    return tuple(Check(name=n, key=k, value=summary.get(k), low=lo, high=hi) for n, k, lo, hi in CHECKS)


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def format_summary(report: EvaluationReport) -> str:
    """Short human-readable summary with PASS/FAIL per check (plain text)."""
    s = report.summary
    lines = [
        f"faceweave evaluate: {s['pairs']} pairs from {report.data_dir} (seed {report.options.get('seed')})",
        f"faces found:     {s['pairs_found']}/{s['pairs']} pairs"
        + (
            ""
            if s["all_faces_found"]
            else f"  (pairs without: {s['pairs_not_found']}; photos without: {s['photos_without_face']})"
        ),
        f"target swapped:  {s['pairs_swapped']}/{s['pairs']}",
        f"identity:        retrieval {_fmt(s['retrieval_rate'])}  id_dist_source median "
        f"{_fmt(s['id_dist_source_median'])}"
        f" mean {_fmt(s['id_dist_source_mean'])}  <0.6 {_fmt(s['id_dist_source_below_0_6'])}"
        f"  id_dist_target mean {_fmt(s['id_dist_target_mean'])}",
        f"blend:           tone mean {_fmt(s['tone_error_mean'], 2)} dE  seam median {_fmt(s['seam_ratio_median'])}"
        f"  blotch mean {_fmt(s['blotch_fraction_mean'], 4)}  sharpness median {_fmt(s['sharpness_ratio_median'])}",
        f"fidelity:        pose median {_fmt(s['pose_error_median'], 2)} max {_fmt(s['pose_error_max'], 2)} deg"
        f"  expression median {_fmt(s['expression_error_median'], 4)} max {_fmt(s['expression_error_max'], 4)}"
        f" (medians: mouth open {_fmt(s['mouth_open_error_median'], 4)}, width "
        f"{_fmt(s['mouth_width_error_median'], 4)},"
        f" eyes {_fmt(s['eye_open_error_median'], 4)})",
        f"untouched:       psnr_outside min {_fmt(s['psnr_outside_min'], 1)} median "
        f"{_fmt(s['psnr_outside_median'], 1)} dB",
        f"runtime:         median {_fmt(s['runtime_ms_median'], 0)} ms per swap",
        "checks:",
    ]
    for c in report.checks:
        lines.append(f"  {'PASS' if c.passed else 'FAIL'}  {c.name:<24} {_fmt(c.value, 4):>8}  {c.goal}")
    lines.append(
        f"{sum(c.passed for c in report.checks)}/{len(report.checks)} checks passed; report in {report.out_dir}"
    )
    return "\n".join(lines)


def pair_label(result: PairResult) -> tuple[str, ...]:
    """The two label lines of a pair on the contact sheet (ASCII)."""
    head = f"#{result.index} {result.source_identity} -> {result.target_identity}"
    if not result.found:
        return head, f"FAILED: {result.error or 'no face'}"[:90]
    ret = "n/a" if result.retrieval is None else ("ok" if result.retrieval else "X")
    return head, (
        f"id {_fmt(result.id_dist_source, 2)} ret {ret} tone {_fmt(result.tone_error, 1)}"
        f" seam {_fmt(result.seam_ratio, 2)} sharp {_fmt(result.sharpness_ratio, 2)}"
        f" pose {_fmt(result.pose_error, 1)} expr {_fmt(result.expression_error, 3)}"
    )


# ------------------------------------------------------------------ I/O


def _largest(faces: Sequence[Face]) -> Face | None:
    return max(faces, key=lambda f: f.bbox.area) if faces else None


def _write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary name, then rename)."""
    try:
        with atomic_output(path) as temp:
            temp.write_bytes(data)
    except OSError as exc:
        raise OutputError(f"cannot write '{path}': {exc.strerror or exc}") from exc


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text)[:60]


def evaluate_folder(
    data_dir: Path,
    out_dir: Path,
    *,
    swapper: Swapper,
    pairs: int = 30,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
    settings: EvaluationSettings = EvaluationSettings(),
) -> EvaluationReport:
    """Swap ``pairs`` deterministic pairs from ``data_dir`` (which holds
    ``identities.csv``), score them and write ``report.json``,
    ``summary.txt``, ``contact_sheet.png`` and ``results/*.jpg`` into
    ``out_dir`` (created).  ``progress(done, total)`` is called after each pair.

    Raises:
        UnreadableFileError, InputError: bad ``identities.csv`` or photo.
        OutputError: the output folder or a file in it cannot be written.
    """
    data_dir, out_dir = Path(data_dir), Path(out_dir)
    photos = read_identities(data_dir / "identities.csv")
    chosen = build_pairs(photos, count=pairs, seed=seed)
    swap_options = getattr(swapper, "options", None)
    max_pixels = int(getattr(swap_options, "max_pixels", 40_000_000))
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create output folder '{out_dir}': {exc.strerror or exc}") from exc

    def load(photo: Photo, role: str) -> Image:
        return read_image(data_dir / photo.file, max_pixels=max_pixels, role=role)

    # the largest face of every independent photo, with its embedding, once
    faces: dict[str, Face | None] = {}
    for photo in independent_photos(photos):
        faces[photo.file] = _largest(swapper.analyser.analyse(load(photo, "photo").pixels, embeddings=True))
    embeddings = {f: face.embedding for f, face in faces.items() if face is not None and face.embedding is not None}
    without_face = sorted(f for f, face in faces.items() if face is None)

    results: list[PairResult] = []
    rows: list[SheetRow] = []
    for pair in chosen:
        outcome = _run_pair(pair, photos, faces, embeddings, swapper, load, settings)
        result = outcome.result
        if outcome.image is not None and settings.write_results:
            name = f"results/{pair.index:03d}_{_slug(pair.source.identity)}_to_{_slug(pair.target.identity)}.jpg"
            write_image(out_dir / name, outcome.image, quality=92)
            result = replace(result, result_file=name)
        results.append(result)
        rows.append(SheetRow(tiles=outcome.tiles, lines=pair_label(result)))
        if progress is not None:
            progress(len(results), len(chosen))

    summary = summarize(results, photos_without_face=without_face)
    options = {
        "data_dir": str(data_dir),
        "pairs": pairs,
        "seed": seed,
        "settings": asdict(settings),
        "swap_options": swap_options.model_dump(mode="json") if isinstance(swap_options, BaseModel) else None,
    }
    report = EvaluationReport(
        data_dir=str(data_dir),
        out_dir=str(out_dir),
        options=options,
        pairs=tuple(results),
        summary=summary,
        checks=run_checks(summary),
    )
    _write_bytes(out_dir / "report.json", (json.dumps(report.as_dict(), indent=2, allow_nan=False) + "\n").encode())
    _write_bytes(out_dir / "summary.txt", (format_summary(report) + "\n").encode())
    sheet = contact_sheet(rows, header=("source | target | result", format_summary(report).splitlines()[0]))
    _write_bytes(out_dir / "contact_sheet.png", encode_png(sheet))
    return report


@dataclass(frozen=True, eq=False)
class _PairOutcome:
    """One pair's figures, its three contact-sheet tiles (source, target,
    result; ``(S, S, 3)`` uint8) and the full result image when there is one."""

    result: PairResult
    tiles: tuple[np.ndarray, np.ndarray, np.ndarray]
    image: np.ndarray | None = None


def _run_pair(
    pair: SwapPair,
    photos: Sequence[Photo],
    faces: Mapping[str, Face | None],
    embeddings: Mapping[str, np.ndarray],
    swapper: Swapper,
    load: Callable[[Photo, str], Image],
    settings: EvaluationSettings,
) -> _PairOutcome:
    """Swap and score one pair; a failure is recorded, not raised, unless it
    is a bug (anything but a :class:`FaceweaveError` from the swapper)."""
    base: dict[str, Any] = dict(
        index=pair.index,
        source=pair.source.file,
        source_identity=pair.source.identity,
        target=pair.target.file,
        target_identity=pair.target.identity,
    )
    size, scale = settings.thumbnail_size, settings.thumbnail_scale
    source_img, target_img = load(pair.source, "source image"), load(pair.target, "target image")
    source_face, target_face = faces.get(pair.source.file), faces.get(pair.target.file)
    source_tile = face_thumbnail(source_img.pixels, source_face.bbox if source_face else None, scale=scale, size=size)
    target_tile = face_thumbnail(target_img.pixels, target_face.bbox if target_face else None, scale=scale, size=size)

    def failed(
        error: str,
        *,
        swapped: bool = False,
        runtime_ms: float | None = None,
        tile: np.ndarray | None = None,
        image: np.ndarray | None = None,
    ) -> _PairOutcome:
        result = PairResult(**base, found=False, swapped=swapped, error=error, runtime_ms=runtime_ms)
        result_tile = tile if tile is not None else blank_tile(size, "no result")
        return _PairOutcome(result, (source_tile, target_tile, result_tile), image)

    if target_face is None or source_face is None:
        return failed(f"no face found in the {'target' if target_face is None else 'source'} photo")

    start = time.perf_counter()
    try:
        swap = swapper.swap([source_img], target_img)
    except FaceweaveError as exc:
        return failed(f"{exc.code}: {exc}", runtime_ms=(time.perf_counter() - start) * 1000.0)
    runtime = (time.perf_counter() - start) * 1000.0

    result_px = np.ascontiguousarray(swap.image)
    result_tile = face_thumbnail(result_px, target_face.bbox, scale=scale, size=size)
    swapped = any(s.bbox.iou(target_face.bbox) >= settings.match_iou for s in swap.swapped)
    if result_px.shape != target_img.pixels.shape:
        return failed(
            f"result shape {result_px.shape} differs from the target's {target_img.pixels.shape}",
            swapped=swapped,
            runtime_ms=runtime,
            tile=result_tile,
        )
    found = swapper.analyser.analyse(result_px, embeddings=True)
    matches = sorted(((f.bbox.iou(target_face.bbox), -i) for i, f in enumerate(found)), reverse=True)
    if not matches or matches[0][0] < settings.match_iou:
        return failed(
            "no face found in the result where the target face was",
            swapped=swapped,
            runtime_ms=runtime,
            tile=result_tile,
            image=result_px,
        )
    result_face = found[-matches[0][1]]
    figures: dict[str, Any] = image_metrics(target_img.pixels, target_face, result_px, result_face, settings=settings)
    figures.update(identity_metrics(result_face.embedding, pair, photos, embeddings))
    result = PairResult(**base, found=True, swapped=swapped, runtime_ms=runtime, **figures)
    return _PairOutcome(result, (source_tile, target_tile, result_tile), result_px)
