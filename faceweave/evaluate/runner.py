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
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from pydantic import BaseModel

from faceweave.errors import FaceweaveError, OutputError
from faceweave.evaluate.pairs import (
    Photo,
    SwapPair,
    build_pairs,
    independent_photos,
    read_identities,
    read_pair_list,
)
from faceweave.evaluate.report import (
    EvaluationReport,
    EvaluationSettings,
    PairResult,
    format_summary,
    pair_label,
    run_checks,
    summarize,
)
from faceweave.evaluate.scores import identity_metrics, image_metrics
from faceweave.evaluate.sheet import SheetRow, blank_tile, contact_sheet, encode_png, face_thumbnail
from faceweave.io import atomic_output, read_image, write_image
from faceweave.types import Face, Image, SwapResult


class _Analyser(Protocol):
    def analyse(self, pixels: np.ndarray, *, embeddings: bool = False) -> list[Face]: ...


class Swapper(Protocol):
    """What the runner needs of :class:`faceweave.pipeline.FaceSwapper`."""

    @property
    def analyser(self) -> _Analyser: ...

    def swap(self, sources: Sequence[Any], target: Any) -> SwapResult: ...


# ------------------------------------------------------------ pure parts


# ------------------------------------------------------------------ I/O


def _largest(faces: Sequence[Face]) -> Face | None:
    """The largest face with a mesh (the scores read it), or ``None``."""
    meshed = [f for f in faces if f.mesh is not None]
    return max(meshed, key=lambda f: f.bbox.area) if meshed else None


def _write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary name, then rename)."""
    try:
        with atomic_output(path) as temp:
            temp.write_bytes(data)
    except OSError as exc:
        raise OutputError(f"cannot write '{path}': {exc.strerror or exc}") from exc


def _largest_faces(
    photos: Sequence[Photo], swapper: Swapper, load: Callable[[Photo, str], Image]
) -> dict[str, Face | None]:
    """The largest face of each photo, with its embedding (``None`` without a face), by file."""
    return {p.file: _largest(swapper.analyser.analyse(load(p, "photo").pixels, embeddings=True)) for p in photos}


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text)[:60]


def evaluate_folder(
    data_dir: Path,
    out_dir: Path,
    *,
    swapper: Swapper,
    pairs: int = 30,
    seed: int = 0,
    pairs_from: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    settings: EvaluationSettings = EvaluationSettings(),
) -> EvaluationReport:
    """Swap ``pairs`` deterministic pairs from ``data_dir`` (which holds
    ``identities.csv``), score them and write ``report.json``,
    ``summary.txt``, ``contact_sheet.png`` and ``results/*.jpg`` into
    ``out_dir`` (created).  With ``pairs_from`` (a judge's ``results.json`` or
    a ``report.json``) the pairs are the first ``pairs`` it lists instead of
    a seeded pick.  ``progress(done, total)`` is called after each pair.

    Raises:
        UnreadableFileError, InputError: bad ``identities.csv``, pair list or photo.
        OutputError: the output folder or a file in it cannot be written.
    """
    data_dir, out_dir = Path(data_dir), Path(out_dir)
    photos = read_identities(data_dir / "identities.csv")
    chosen = build_pairs(photos, count=pairs, seed=seed) if pairs_from is None else read_pair_list(pairs_from, photos)
    swap_options = getattr(swapper, "options", None)
    max_pixels = int(getattr(swap_options, "max_pixels", 40_000_000))
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create output folder '{out_dir}': {exc.strerror or exc}") from exc

    def load(photo: Photo, role: str) -> Image:
        return read_image(data_dir / photo.file, max_pixels=max_pixels, role=role)

    faces = _largest_faces(independent_photos(photos), swapper, load)
    embeddings = {f: face.embedding for f, face in faces.items() if face is not None and face.embedding is not None}
    without_face = sorted(f for f, face in faces.items() if face is None)
    run = _Run(photos, faces, embeddings, swapper, load, settings)
    results, rows = _run_pairs(chosen[:pairs], run, out_dir, progress)
    summary = summarize(results, photos_without_face=without_face)
    options = {
        "data_dir": str(data_dir),
        "pairs": pairs,
        "seed": seed,
        "pairs_from": None if pairs_from is None else str(pairs_from),
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
    _write_report(out_dir, report, rows)
    return report


@dataclass(frozen=True, eq=False)
class _Run:
    """What every pair of one evaluation shares: the photos, their largest
    faces and embeddings (found once), the swapper, the loader, the settings."""

    photos: Sequence[Photo]
    faces: Mapping[str, Face | None]
    embeddings: Mapping[str, np.ndarray]
    swapper: Swapper
    load: Callable[[Photo, str], Image]
    settings: EvaluationSettings


def _run_pairs(
    chosen: Sequence[SwapPair],
    run: _Run,
    out_dir: Path,
    progress: Callable[[int, int], None] | None,
) -> tuple[list[PairResult], list[SheetRow]]:
    """Swap and score every pair (writing each result image), with its contact-sheet row."""
    results: list[PairResult] = []
    rows: list[SheetRow] = []
    for pair in chosen:
        outcome = _run_pair(pair, run)
        result = outcome.result
        if outcome.image is not None and run.settings.write_results:
            name = f"results/{pair.index:03d}_{_slug(pair.source.identity)}_to_{_slug(pair.target.identity)}.jpg"
            write_image(out_dir / name, outcome.image, quality=92)
            result = replace(result, result_file=name)
        results.append(result)
        rows.append(SheetRow(tiles=outcome.tiles, lines=pair_label(result)))
        if progress is not None:
            progress(len(results), len(chosen))
    return results, rows


def _write_report(out_dir: Path, report: EvaluationReport, rows: Sequence[SheetRow]) -> None:
    """``report.json``, ``summary.txt`` and ``contact_sheet.png``, each atomically."""
    _write_bytes(out_dir / "report.json", (json.dumps(report.as_dict(), indent=2, allow_nan=False) + "\n").encode())
    _write_bytes(out_dir / "summary.txt", (format_summary(report) + "\n").encode())
    sheet = contact_sheet(list(rows), header=("source | target | result", format_summary(report).splitlines()[0]))
    _write_bytes(out_dir / "contact_sheet.png", encode_png(sheet))


@dataclass(frozen=True, eq=False)
class _PairOutcome:
    """One pair's figures, its three contact-sheet tiles (source, target,
    result; ``(S, S, 3)`` uint8) and the full result image when there is one."""

    result: PairResult
    tiles: tuple[np.ndarray, np.ndarray, np.ndarray]
    image: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class _Failures:
    """Builds the outcome of a pair that could not be scored."""

    base: dict[str, Any]
    source_tile: np.ndarray
    target_tile: np.ndarray
    size: int

    def outcome(
        self,
        error: str,
        *,
        swapped: bool = False,
        runtime_ms: float | None = None,
        tile: np.ndarray | None = None,
        image: np.ndarray | None = None,
    ) -> _PairOutcome:
        result = PairResult(**self.base, found=False, swapped=swapped, error=error, runtime_ms=runtime_ms)
        result_tile = tile if tile is not None else blank_tile(self.size, "no result")
        return _PairOutcome(result, (self.source_tile, self.target_tile, result_tile), image)


def _result_face(swapper: Swapper, result: np.ndarray, target_face: Face, match_iou: float) -> Face | None:
    """The face of ``result`` where the target face was (the best box overlap
    of at least ``match_iou``; the first found on a tie), with its embedding."""
    found = [f for f in swapper.analyser.analyse(result, embeddings=True) if f.mesh is not None]
    matches = sorted(((f.bbox.iou(target_face.bbox), -i) for i, f in enumerate(found)), reverse=True)
    if not matches or matches[0][0] < match_iou:
        return None
    return found[-matches[0][1]]


def _run_pair(pair: SwapPair, run: _Run) -> _PairOutcome:
    """Swap and score one pair; a failure is recorded, not raised, unless it
    is a bug (anything but a :class:`FaceweaveError` from the swapper)."""
    base: dict[str, Any] = dict(
        index=pair.index,
        source=pair.source.file,
        source_identity=pair.source.identity,
        target=pair.target.file,
        target_identity=pair.target.identity,
    )
    size, scale = run.settings.thumbnail_size, run.settings.thumbnail_scale
    source_img, target_img = run.load(pair.source, "source image"), run.load(pair.target, "target image")
    source_face, target_face = run.faces.get(pair.source.file), run.faces.get(pair.target.file)
    source_tile = face_thumbnail(source_img.pixels, source_face.bbox if source_face else None, scale=scale, size=size)
    target_tile = face_thumbnail(target_img.pixels, target_face.bbox if target_face else None, scale=scale, size=size)
    failed = _Failures(base, source_tile, target_tile, size).outcome

    if target_face is None or source_face is None:
        return failed(f"no face found in the {'target' if target_face is None else 'source'} photo")

    start = time.perf_counter()
    try:
        swap = run.swapper.swap([source_img], target_img)
    except FaceweaveError as exc:
        return failed(f"{exc.code}: {exc}", runtime_ms=(time.perf_counter() - start) * 1000.0)
    runtime = (time.perf_counter() - start) * 1000.0

    result_px = np.ascontiguousarray(swap.image)
    result_tile = face_thumbnail(result_px, target_face.bbox, scale=scale, size=size)
    swapped = any(s.bbox.iou(target_face.bbox) >= run.settings.match_iou for s in swap.swapped)
    if result_px.shape != target_img.pixels.shape:
        return failed(
            f"result shape {result_px.shape} differs from the target's {target_img.pixels.shape}",
            swapped=swapped,
            runtime_ms=runtime,
            tile=result_tile,
        )
    result_face = _result_face(run.swapper, result_px, target_face, run.settings.match_iou)
    if result_face is None:
        return failed(
            "no face found in the result where the target face was",
            swapped=swapped,
            runtime_ms=runtime,
            tile=result_tile,
            image=result_px,
        )
    figures: dict[str, Any] = image_metrics(
        target_img.pixels, target_face, result_px, result_face, settings=run.settings
    )
    figures.update(identity_metrics(result_face.embedding, pair, run.photos, run.embeddings))
    result = PairResult(**base, found=True, swapped=swapped, runtime_ms=runtime, **figures)
    return _PairOutcome(result, (source_tile, target_tile, result_tile), result_px)
