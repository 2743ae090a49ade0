"""Batch jobs: many targets (photos or videos, from glob patterns) swapped
with one set of models and one prepared source, each written to a name made
from a template.  A bad file does not stop the batch; the report says which
failed and why."""

from __future__ import annotations

import glob
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from faceweave.errors import FaceweaveError, InputError, InvalidOptionError, NoFaceError
from faceweave.io import probe_kind, read_image, write_image
from faceweave.pipeline import FaceSwapper, ImageInput
from faceweave.provenance.stamp import Provenance, attach_manifest, image_metadata, stamp_image
from faceweave.selection import select_faces

PLACEHOLDERS = ("{name}", "{index}", "{source_name}")


@dataclass(frozen=True)
class BatchItem:
    """One target of a batch and where its result goes."""

    index: int
    target: Path
    output: Path


@dataclass(frozen=True)
class BatchOutcome:
    """``code`` is the error's :attr:`FaceweaveError.code` when the item failed."""

    item: BatchItem
    ok: bool
    message: str
    code: str | None = None


def expand_targets(patterns: Sequence[str]) -> list[Path]:
    """Files matched by the glob patterns (``**`` recursive), sorted, each
    once; a pattern that matches nothing is an error naming it."""
    found: list[Path] = []
    for pattern in patterns:
        matches = sorted(Path(p) for p in glob.glob(str(pattern), recursive=True) if Path(p).is_file())
        if not matches:
            raise InvalidOptionError(f"--target {pattern!r} matches no file")
        found += [m for m in matches if m not in found]
    return found


def plan_batch(targets: Sequence[Path], template: str, *, source_name: str) -> list[BatchItem]:
    """The output path of every target from ``template`` with ``{name}``
    (target file name without extension), ``{index}`` (position, from 0) and
    ``{source_name}``; two targets may not map to the same output."""
    if "{name}" not in template and "{index}" not in template and len(targets) > 1:
        raise InvalidOptionError(
            f"--output {template!r} would give every target the same name; use {{name}} or {{index}} in it"
        )
    items: list[BatchItem] = []
    seen: dict[Path, Path] = {}
    for index, target in enumerate(targets):
        try:
            rendered = template.format(name=target.stem, index=index, source_name=source_name)
        except (KeyError, IndexError, ValueError) as exc:
            raise InvalidOptionError(
                f"--output {template!r}: unknown placeholder {exc}; use {', '.join(PLACEHOLDERS)}"
            ) from None
        output = Path(rendered)
        if output in seen:
            raise InvalidOptionError(f"{seen[output]} and {target} would both be written to {output}")
        seen[output] = target
        items.append(BatchItem(index=index, target=target, output=output))
    return items


def _swap_image(swapper: FaceSwapper, sources, item: BatchItem, reference, quality: int, provenance, screener) -> str:
    image = read_image(item.target, max_pixels=swapper.options.max_pixels, role="target image")
    if screener is not None:
        image = screener.screen_image(image, role="target")
    faces = swapper.find_faces(image.pixels)
    if not faces:
        raise NoFaceError(f"no face found in target image {item.target}", role="target", path=str(item.target))
    if reference is not None:
        faces = [swapper.analyser.embed(image.pixels, f) for f in faces]
    indices = select_faces(faces, swapper.options.selection, reference=reference)
    done = swapper.swap_faces(image.pixels, faces, indices, sources, alpha=image.alpha)
    pixels = stamp_image(done.pixels, provenance)
    write_image(item.output, pixels, alpha=done.alpha, quality=quality, **image_metadata(provenance, item.output))
    attach_manifest(item.output, provenance)
    return f"{len(done.swapped)} of {len(faces)} face(s) swapped"


def run_batch(
    swapper: FaceSwapper,
    sources: Sequence[ImageInput],
    items: Sequence[BatchItem],
    *,
    reference: ImageInput | None = None,
    image_quality: int = 95,
    video_options=None,
    on_item: Callable[[BatchOutcome], None] | None = None,
    provenance: Provenance | None = None,
    screener=None,
) -> list[BatchOutcome]:
    """Swap every item; a :class:`FaceweaveError` fails that item only.

    ``provenance`` marks every output (watermark and label); ``None``: the
    swapper's (:meth:`FaceSwapper.run_provenance`: one new run for the whole
    batch, watermark on).  ``screener``
    (``screen_image(image, role=...)`` and ``video(path)``, see
    :class:`faceweave.cli.marking.Screener`) screens each target first.
    """
    from dataclasses import replace

    from faceweave.video.pipeline import VideoOptions, VideoSwapper

    provenance = provenance if provenance is not None else swapper.run_provenance()
    prepared = swapper.load_sources(sources)
    ref = None
    if swapper.options.selection.mode == "reference":
        if reference is None:
            raise InputError("selection mode 'reference' needs a reference face image")
        ref = swapper.reference_embedding(reference)
    video = VideoSwapper(swapper)
    outcomes = []
    for item in items:
        try:
            item.output.parent.mkdir(parents=True, exist_ok=True)
            if probe_kind(item.target) == "video":
                if screener is not None:
                    screener.video(item.target)
                options = replace(video_options or VideoOptions(), provenance=provenance)
                report = video.swap_video(prepared, item.target, item.output, reference=reference, options=options)
                attach_manifest(item.output, provenance)
                message = f"{report.frames} frames, faces swapped in {report.frames_with_swap}"
            else:
                message = _swap_image(swapper, prepared, item, ref, image_quality, provenance, screener)
            outcome = BatchOutcome(item=item, ok=True, message=message)
        except FaceweaveError as exc:
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            outcome = BatchOutcome(item=item, ok=False, message=message, code=exc.code)
        except OSError as exc:
            message = f"cannot write {item.output}: {exc.strerror or exc}"
            outcome = BatchOutcome(item=item, ok=False, message=message, code="output_error")
        outcomes.append(outcome)
        if on_item is not None:
            on_item(outcome)
    return outcomes
