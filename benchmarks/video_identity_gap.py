"""The video's identity gap to photos (issue 32, item 4): the same frames of a
clip swapped as photos and through the video path, each output's dlib
distance to the source person's other photos (the judge's d_src).

Rows: photos as ``faceweave swap`` makes them (working size 256, the
expression check), photos at the video's working size without the check
(what a frame loses to the size and the check alone), the same with the
target's own lips and folds kept as video keeps them (lip sync), and the
video path at its default working size and at 256.  One run, every row on the same
frames::

    .venv/bin/python benchmarks/video_identity_gap.py --every 12
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import av
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "faces"
CLIP = DATA / "video" / "lp_d18_talking_face.mp4"
SOURCE = DATA / "identity" / "matt_damon" / "df_img29.jpg"
GALLERY = tuple(DATA / "identity" / "matt_damon" / f"df_img{n}.jpg" for n in (30, 31, 32, 33))


def frames_of(path: Path, indices: set[int]) -> dict[int, np.ndarray]:
    """The RGB frames of ``path`` at ``indices``."""
    found: dict[int, np.ndarray] = {}
    with av.open(str(path)) as container:
        for n, frame in enumerate(container.decode(video=0)):
            if n in indices:
                found[n] = frame.to_ndarray(format="rgb24")
    return found


def distances(analyser, centre: np.ndarray, frames: dict[int, np.ndarray]) -> dict[int, float]:
    """Per frame, the largest face's embedding distance to ``centre``."""
    from faceweave.evaluate.metrics import embedding_distance

    out = {}
    for n, pixels in frames.items():
        faces = analyser.analyse(pixels, embeddings=True)
        if faces:
            face = max(faces, key=lambda f: f.bbox.area)
            if face.embedding is not None:
                out[n] = embedding_distance(face.embedding, centre)
    return out


def swap_photos(options, frames: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
    from faceweave.pipeline import FaceSwapper
    from faceweave.provenance.stamp import Provenance

    with FaceSwapper(options, provenance=Provenance.new(watermark=False)) as swapper:
        return {n: swapper.swap(SOURCE, pixels).image for n, pixels in frames.items()}


def swap_video(options, out: Path) -> Path:
    from faceweave.pipeline import FaceSwapper
    from faceweave.provenance.stamp import Provenance
    from faceweave.video.pipeline import VideoOptions, VideoSwapper

    with FaceSwapper(options) as swapper:
        video = VideoSwapper(swapper)
        video.swap_video([SOURCE], CLIP, out, options=VideoOptions(provenance=Provenance.new(watermark=False)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--every", type=int, default=12, help="judge every Nth frame")
    args = ap.parse_args()
    if not CLIP.is_file():
        sys.exit(f"no test clip at {CLIP}: this measurement needs ../shared beside the repository")
    from faceweave.analysis import FaceAnalyser
    from faceweave.evaluate.metrics import mean_embedding
    from faceweave.io.images import read_image
    from faceweave.options import VIDEO_WORKING_SIZE, MaskOptions, SwapOptions

    originals = frames_of(CLIP, set(range(0, 10_000, args.every)))
    photo = SwapOptions()
    rows = {
        f"photos, working size {photo.working_size}, expression check": swap_photos(photo, originals),
        f"photos, working size {VIDEO_WORKING_SIZE}, no check": swap_photos(
            SwapOptions(working_size=VIDEO_WORKING_SIZE, expression_check=False), originals
        ),
        f"photos, size {VIDEO_WORKING_SIZE}, no check, target's lips+folds": swap_photos(
            SwapOptions(
                working_size=VIDEO_WORKING_SIZE, expression_check=False, masks=MaskOptions(target_lips="always")
            ),
            originals,
        ),
    }
    with tempfile.TemporaryDirectory() as tmp:
        for size in (VIDEO_WORKING_SIZE, 256):
            made = swap_video(SwapOptions(working_size=size, expression_check=False), Path(tmp) / f"v{size}.mp4")
            rows[f"video path, working size {size}"] = frames_of(made, set(originals))
    with FaceAnalyser(SwapOptions().analysis) as analyser:
        refs = [analyser.analyse(read_image(p).pixels, embeddings=True) for p in GALLERY]
        centre = mean_embedding([max(r, key=lambda f: f.bbox.area).embedding for r in refs if r])
        base = None
        print(f"{len(originals)} frames of {CLIP.name} (every {args.every}th), source {SOURCE.name}")
        print(f"{'row':<48} {'d_src median':>12} {'mean':>7} {'vs photos':>10}")
        for name, frames in rows.items():
            d = distances(analyser, centre, frames)
            med = statistics.median(d.values())
            base = med if base is None else base
            print(f"{name:<48} {med:12.3f} {statistics.mean(d.values()):7.3f} {med - base:+10.3f}")


if __name__ == "__main__":
    main()
