"""Render steps before and after, interleaved in one process: the CPU time
per face of one step in its earlier formulation and in today's, on the
faces of the 720p one-face clip (``benchmarks/video_swap.py``'s
``derive_720p``), alternating the two every round so the machine's drift
falls on both alike (whole-process figures move by 10-40 % from minute to
minute on the 2-core machine; a step's 1-2 ms does not show through that).

- ``colour chain``: the end of ``blend_face`` before the compiled kernel
  (the statistics transfer, the offsets added, ``cvtColor`` Lab -> RGB,
  the rounding, ``copyTo`` over the crop behind) against
  ``kernels.shade_face`` (the same values within one level);
- ``occlusion test``: ``target_occlusion`` on a frame that reuses its
  track's plan, with the skin model measured on the frame (before) and read
  from the plan (``OcclusionPlan.skin``);
- ``blend masks``: ``blend_masks`` on a frame that reuses its plan, with
  the feathered boxes made anew and the paste mask's dilation in float32
  (before) against the boxes made once per size and the dilation in uint8
  (the same values);
- ``watermark``: the encoder thread's ``FrameMarker.mark_luma`` on the
  clip's 720p Y planes, the perceptual mask upscaled, multiplied and added
  by OpenCV (before) against ``kernels.pixels.mark_luma`` (one pass, the
  same values); per frame.
- ``detail step``: ``match_detail_planned`` on a frame that reuses its
  plan (no softening), the detail mask warped by OpenCV, float copies of
  the window, ``GaussianBlur`` and ``put_detail`` (before) against
  ``kernels.detail_grain`` (one pass; within a level); each call on a new
  copy of the pasted frame, in both.
- ``multi-band blend``: ``blend.laplacian_blend`` with each level mixed
  by NumPy (a difference, a mask spread over three channels, a product and
  a sum) against ``kernels.mix_band`` (one pass; the same values).
- ``islands``: ``occlusion.without_islands`` with the covered parts and
  the face's outside labelled together and ``np.unique``/``np.isin`` over
  the grid (before) against one labelling and ``masks.edge_reaching`` (the
  same masks).
- ``paste-back walk`` and ``detail step walk``: ``kernels.paste_warped``
  and ``kernels.detail_grain`` on the clip's faces with the working crop's
  matrix given a 1e-300 turn (before: the kernels' general walk, each
  pixel's position from warpAffine's fixed-point steps; the same
  positions, so the same frames, checked) against the matrix as it is (the
  walk for a matrix that scales and shifts only: rows, then columns).

    .venv/bin/python benchmarks/render_steps.py [--frames 40] [--rounds 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "faces"
SOURCE = "single/biden2.jpg"


def _copies(args: tuple) -> tuple:
    """``args`` with each array copied (a frame is changed in place after the call)."""
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


def capture(data: Path, frames: int) -> tuple[list, list, list, list, list, list, list]:
    """The arguments of ``blend_face``, ``composite``, ``match_detail_planned``
    (frames that reuse a plan, with the frames as pasted), ``without_islands``,
    ``laplacian_blend``, ``kernels.paste_warped`` and ``kernels.detail_grain``
    for the first ``frames`` faces of the clip: ``(args, kwargs)`` each."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import faceweave.compositing.blend as blend_module
    import faceweave.compositing.composite as composite_module
    import faceweave.compositing.occlusion as occlusion_module
    import faceweave.render as render_module
    from video_swap import swap_720p_start

    # (module, name, keep this call?, how its kwargs are kept)
    spied = [
        (composite_module, "blend_face", lambda kw: True, dict),
        (render_module, "composite", lambda kw: True, lambda kw: {**kw, "plan": None}),
        (render_module, "match_detail_planned", lambda kw: kw.get("plan") is not None, dict),
        (occlusion_module, "without_islands", lambda kw: True, dict),
        (composite_module, "laplacian_blend", lambda kw: True, dict),
        (blend_module, "paste_warped", lambda kw: True, dict),
        (blend_module, "detail_grain", lambda kw: True, dict),
    ]
    found: list[list] = [[] for _ in spied]
    originals = [getattr(module, name) for module, name, _, _ in spied]

    def spy(k: int) -> Callable:
        def call(*args, **kw):
            if len(found[k]) < frames and spied[k][2](kw):
                found[k].append((_copies(args), spied[k][3](kw)))
            return originals[k](*args, **kw)

        return call

    for k, (module, name, _, _) in enumerate(spied):
        setattr(module, name, spy(k))
    try:
        swap_720p_start(data, frames)
    finally:
        for (module, name, _, _), original in zip(spied, originals, strict=True):
            setattr(module, name, original)
    blends, composites, details, islands, multiband, pastes, grains = found
    return blends, composites, details, islands, multiband, pastes, grains


def turned(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` with a 1e-300 turn: the kernels take their general walk,
    whose positions are the same (1e-300 of a pixel rounds away)."""
    m = np.array(matrix, np.float64)
    m[0, 1] = 1e-300
    return m


def walk_steps(pastes: list, grains: list, rounds: int) -> tuple[dict[str, float], dict[str, float]]:
    """``paste_warped`` and ``detail_grain`` by the general walk (before) and the upright one (after)."""
    from faceweave.kernels import detail_grain, paste_warped

    def paste(before: bool) -> list[np.ndarray]:
        done = []
        for (out, crop, mask, window, box, matrix), _ in pastes:
            frame = out.copy()
            paste_warped(frame, crop, mask, window, box, turned(matrix) if before else matrix)
            done.append(frame)
        return done

    def grain(before: bool) -> list[np.ndarray]:
        done = []
        for (original, frame, mask, window, box, matrix), kw in grains:
            out = frame.copy()
            detail_grain(original, out, mask, window, box, turned(matrix) if before else matrix, **kw)
            done.append(out)
        return done

    for run in (paste, grain):
        if any(not np.array_equal(a, b) for a, b in zip(run(True), run(False), strict=True)):
            raise AssertionError(f"the two walks of {run.__name__} gave different frames")
    paste_times = interleaved([("before", lambda: paste(True)), ("after", lambda: paste(False))], rounds, len(pastes))
    grain_times = interleaved([("before", lambda: grain(True)), ("after", lambda: grain(False))], rounds, len(grains))
    return paste_times, grain_times


def colour_chain_before(out, behind, mask, plan, box) -> np.ndarray:
    """``blend_face``'s colour chain as it was before ``kernels.shade_face``."""
    from faceweave.compositing.colour import to_lab, to_rgb
    from faceweave.compositing.composite import matched_colour
    from faceweave.compositing.resample import upsampled_window

    x0, y0, x1, y1 = box
    roi = (slice(y0, y1), slice(x0, x1))
    matched = matched_colour(to_lab(out.face[roi]), plan.match, plan.share)
    shaded = matched + upsampled_window(plan.regional + plan.amount * plan.shading, (mask.shape[1], mask.shape[0]), box)
    covered = (out.coverage[roi] > 0.5).view(np.uint8)
    background = behind[roi].astype(np.float32)
    return np.asarray(cv2.copyTo(to_rgb(shaded).astype(np.float32), covered, background), np.float32)


def colour_chain_after(out, behind, mask, plan, box) -> np.ndarray:
    """``blend_face``'s colour chain today."""
    from faceweave.compositing.colour import to_lab
    from faceweave.compositing.composite import colour_map
    from faceweave.compositing.resample import upsampled_window
    from faceweave.kernels import shade_face

    x0, y0, x1, y1 = box
    offset = upsampled_window(plan.regional + plan.amount * plan.shading, (mask.shape[1], mask.shape[0]), box)
    lab = to_lab(out.face[y0:y1, x0:x1])
    return shade_face(lab, offset, out.coverage, behind, box, colour_map(plan.match, plan.share))


def paste_mask_before(mask_h, face_size, *, boxed, changed, hands, full):
    """``composite.paste_mask`` before: its dilation in float32 and a new box each call."""
    from faceweave.compositing.masks import _box_mask, feather
    from faceweave.compositing.resample import upsample

    size = (mask_h.shape[1], mask_h.shape[0])
    grow = int(round(0.05 * face_size)) * 2 + 1
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (grow, grow))
    touched = cv2.dilate((mask_h > 0.002).astype(np.float32), kernel)
    paste_h = feather(touched, erode=0, blur=0.015 * face_size)
    if boxed:
        paste_h = np.minimum(paste_h, _box_mask.__wrapped__(size[0], size[1], 0.0, 0.04))
    paste = upsample(paste_h, full)
    if changed is not None:
        paste = np.maximum(paste, changed)
    if hands is not None:
        paste = paste * (1.0 - hands)
    return np.clip(paste, 0.0, 1.0)


def masks_steps(composites: list, rounds: int) -> dict[str, float]:
    """``blend_masks`` on each captured face with its own plan (a reusing frame), before and after."""
    import faceweave.compositing.composite as comp
    from faceweave.compositing.masks import _box_mask

    cases = []
    for a, kw in composites:
        view = comp.half_crop(a[1], a[1].background, face_size=a[0].face_size)
        made = comp.mask_plan(view, options=kw["mask_options"])
        cases.append((view, a[1], kw["mask_options"], a[0].size, made))

    def run(before: bool) -> None:
        paste_mask, box_mask = comp.paste_mask, comp.box_mask
        if before:
            comp.paste_mask = paste_mask_before
            comp.box_mask = lambda size, *, inset, blur: _box_mask.__wrapped__(size[0], size[1], inset, blur)
        try:
            for view, out, options, full, made in cases:
                comp.blend_masks(view, out, options=options, person_mask=None, hands=None, full=full, plan=made)
        finally:
            comp.paste_mask, comp.box_mask = paste_mask, box_mask

    return interleaved([("before", lambda: run(True)), ("after", lambda: run(False))], rounds, len(cases))


def mark_before(marker, luma: np.ndarray) -> None:
    """``FrameMarker.mark_luma``'s end before the kernel: OpenCV's upscale, product and sum."""
    from faceweave.provenance import pattern as pat

    delta = cv2.multiply(marker._luma_pattern, pat.perceptual_mask(luma, marker._luma_masking), dtype=cv2.CV_16S)
    cv2.add(luma, delta, dst=luma, dtype=cv2.CV_8U)


def luma_planes(data: Path, frames: int) -> list[np.ndarray]:
    """The 720p clip's first ``frames`` Y planes, as the encoder gets them."""
    import av

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from video_swap import derive_720p

    planes = []
    with tempfile.TemporaryDirectory() as tmp:
        clip_path = Path(tmp) / "clip_720p.mp4"
        derive_720p(data / "video" / "lp_d18_talking_face.mp4", clip_path)
        with av.open(str(clip_path)) as clip:
            for frame in clip.decode(video=0):
                planes.append(frame.reformat(format="yuv420p").to_ndarray()[: frame.height].copy())
                if len(planes) == frames:
                    break
    return planes


def watermark_steps(data: Path, frames: int, rounds: int) -> dict[str, float]:
    from faceweave.provenance import Payload, Watermarker

    planes = luma_planes(data, frames)
    height, width = planes[0].shape
    marker = Watermarker().frame_marker(width, height, Payload(run_id=Payload.new_run_id()))
    marker.mark_luma(planes[0].copy())  # builds its pattern in Y levels
    return interleaved(
        [
            ("before", lambda: [mark_before(marker, p.copy()) for p in planes]),
            ("after", lambda: [marker.mark_luma(p.copy()) for p in planes]),
        ],
        rounds,
        len(planes),
    )


def detail_before(original, frame, mask, matrix, *, blur_mask, plan, sigma=0.6) -> None:
    """``match_detail_planned`` on a reusing frame before ``kernels.detail_grain``."""
    from faceweave.compositing import blend

    window = blend._detail_window(frame.shape, mask, None if plan.blur <= 0 else blur_mask, matrix)
    if window is None:
        return
    (x1, y1, x2, y2), m, whole = window
    sel = (m > 0.5).astype(np.uint8)
    if cv2.countNonZero(sel) < 64:
        return
    orig = original[y1:y2, x1:x2].astype(np.float32)
    new = frame[y1:y2, x1:x2].astype(np.float32)
    if whole is not None:
        new = blend.soften(new, whole, plan.blur)
    blend._put_grain_step(frame, (x1, y1), new, orig, m, plan.grain, plan.add_grain, sigma)


def detail_steps(details: list, rounds: int) -> dict[str, float]:
    from faceweave.compositing.blend import match_detail_planned

    def run(before: bool) -> None:
        for (original, frame, *args), kw in details:
            (detail_before if before else match_detail_planned)(original, frame.copy(), *args, **kw)

    return interleaved([("before", lambda: run(True)), ("after", lambda: run(False))], rounds, len(details))


def multiband_before(front: np.ndarray, back: np.ndarray, mask: np.ndarray, *, levels: int = 5) -> np.ndarray:
    """``blend.laplacian_blend`` before ``kernels.mix_band``: each level mixed by NumPy."""
    from faceweave.compositing.blend import per_channel

    h, w = mask.shape
    levels = max(1, min(levels, int(np.log2(max(1, min(h, w) // 8))) + 1))
    back = back.astype(np.float32)
    gm, gd = [mask.astype(np.float32)], [front.astype(np.float32) - back]
    for _ in range(levels - 1):
        gm.append(cv2.pyrDown(gm[-1]))
        gd.append(cv2.pyrDown(gd[-1]))
    channels = gd[0].shape[2]
    out = gd[-1] * per_channel(gm[-1], channels)
    for i in range(levels - 2, -1, -1):
        size = (gd[i].shape[1], gd[i].shape[0])
        band = gd[i] - cv2.pyrUp(gd[i + 1], dstsize=size)
        band *= per_channel(gm[i], channels)
        out = cv2.pyrUp(out, dstsize=size) + band
    out += back
    return out


def multiband_steps(multiband: list, rounds: int) -> dict[str, float]:
    from faceweave.compositing.blend import laplacian_blend

    return interleaved(
        [
            ("before", lambda: [multiband_before(*a, **kw) for a, kw in multiband]),
            ("after", lambda: [laplacian_blend(*a, **kw) for a, kw in multiband]),
        ],
        rounds,
        len(multiband),
    )


def islands_before(skin: np.ndarray, mesh: np.ndarray, face_size: float) -> np.ndarray:
    """``occlusion.without_islands`` before: the parts and the outside labelled together."""
    from faceweave.compositing.occlusion import ISLAND_MAX
    from faceweave.compositing.regions import outside_face

    size = (skin.shape[1], skin.shape[0])
    edge = outside_face(size, mesh)
    covered = ((skin < 0.5) & (edge == 0)).astype(np.uint8)
    n, labels, stats, _ = cv2.connectedComponentsWithStats(covered, connectivity=8)
    if n <= 1:
        return skin
    _, joined = cv2.connectedComponents(np.maximum(covered, edge).astype(np.uint8), connectivity=8)
    touching = np.unique(joined[edge > 0])
    reaching = np.isin(joined, touching[touching > 0]) & (edge == 0)
    small = stats[:, cv2.CC_STAT_AREA] < ISLAND_MAX * face_size * face_size
    small[0] = False
    islands = small[labels] & ~reaching
    if not islands.any():
        return skin
    k = max(3, int(round(0.02 * face_size)) * 2 + 1)
    grown = cv2.dilate(islands.astype(np.uint8), cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))
    return np.maximum(skin, grown.astype(np.float32))


def islands_steps(islands: list, rounds: int) -> dict[str, float]:
    from faceweave.compositing.occlusion import without_islands

    return interleaved(
        [
            ("before", lambda: [islands_before(*a) for a, _ in islands]),
            ("after", lambda: [without_islands(*a) for a, _ in islands]),
        ],
        rounds,
        len(islands),
    )


def interleaved(pairs: Sequence[tuple[str, Callable[[], None]]], rounds: int, per: int) -> dict[str, float]:
    """Median CPU milliseconds (this thread) per item of each callable, alternating their order every round."""
    times: dict[str, list[float]] = {name: [] for name, _ in pairs}
    for r in range(rounds):
        for name, run in pairs if r % 2 == 0 else pairs[::-1]:
            start = time.thread_time()
            run()
            times[name].append(1000.0 * (time.thread_time() - start) / per)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--frames", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    if not (args.data / SOURCE).is_file():
        print(f"test data not found under {args.data}", file=sys.stderr)
        return 2
    from faceweave.compositing.composite import blend_window, composite, half_crop
    from faceweave.compositing.occlusion import target_occlusion

    cv2.setNumThreads(1)  # as a video's render threads run
    blends, composites, details, islands, multiband, pastes, grains = capture(args.data, args.frames)
    faces = [(a[0], a[1], a[2], a[3], blend_window(a[2])) for a, _ in blends]
    faces = [f for f in faces if f[4] is not None]
    chain = interleaved(
        [
            ("before", lambda: [colour_chain_before(*f) for f in faces]),
            ("after", lambda: [colour_chain_after(*f) for f in faces]),
        ],
        args.rounds,
        len(faces),
    )
    tests = []
    for a, kw in composites:
        made = composite(*a, **kw).plan.masks
        view = half_crop(a[1], a[1].background, face_size=a[0].face_size)
        tests.append((view, made))

    def occlusion(measured: bool) -> None:
        for view, made in tests:
            plan = replace(made.occlusion, skin=None) if measured else made.occlusion
            target_occlusion(view.behind_lab, view.mesh, made.skin, view.face_size, None, plan)

    occl = interleaved(
        [("before", lambda: occlusion(True)), ("after", lambda: occlusion(False))], args.rounds, len(tests)
    )
    masks = masks_steps(composites, args.rounds)
    mark = watermark_steps(args.data, args.frames, args.rounds)
    detail = detail_steps(details, args.rounds)
    island = islands_steps(islands, args.rounds)
    levels = multiband_steps(multiband, args.rounds)
    paste_walk, grain_walk = walk_steps(pastes, grains, args.rounds)
    print(f"CPU ms per face (per frame: the watermark), medians of {args.rounds} interleaved rounds over")
    print(f"{len(faces)} faces / {args.frames} frames of the 720p clip")
    print(f"{'step':<42}{'before':>8}{'after':>8}{'ratio':>8}")
    steps = (
        ("colour chain (shade_face)", chain),
        ("occlusion test, reused plan (skin model)", occl),
        ("blend masks, reused plan (box, dilation)", masks),
        ("watermark on the Y plane (mark_luma)", mark),
        ("detail step, reused plan (detail_grain)", detail),
        ("islands (one labelling)", island),
        ("multi-band blend (mix_band)", levels),
        ("paste-back walk (paste_warped)", paste_walk),
        ("detail step walk (detail_grain)", grain_walk),
    )
    for name, found in steps:
        print(f"{name:<42}{found['before']:8.2f}{found['after']:8.2f}{found['after'] / found['before']:8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
