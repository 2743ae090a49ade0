"""faceweave's frame colorizer beside FaceFusion's own ``frame_colorizer``
functions, on the same frame with the same stand-in models (those of
``tests/enhancer_fixtures.py``: the real input and output names and
shapes), for every colorizer, size and two blends.

FaceFusion is not a dependency: give a checkout of it (kept outside this
repository; ``git archive`` of facefusion/facefusion is enough) and a
folder with the two packages it imports that faceweave does not
(``pip install --target DIR tqdm psutil``)::

    .venv/bin/python tools/facefusion_colorizer_check.py --facefusion /tmp/ff --deps /tmp/ffdeps

Prints, per case, the share of identical pixels and the largest difference.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facefusion", type=Path, required=True, help="a FaceFusion checkout (its source folder)")
    parser.add_argument("--deps", type=Path, help="a folder with tqdm and psutil")
    args = parser.parse_args()
    sys.path[:0] = [str(args.facefusion), str(ROOT)]
    if args.deps is not None:
        sys.path.append(str(args.deps))
    from facefusion import state_manager
    from facefusion.processors.modules.frame_colorizer import core
    from skimage.data import astronaut
    from tests.enhancer_fixtures import colorizer_model

    from faceweave import names
    from faceweave.enhancers.colorizer import FrameColorizer

    state_manager.init_item("download_providers", ["github"])
    photo = np.ascontiguousarray(astronaut())
    for name, family in names.FRAME_COLORIZERS.items():
        model = colorizer_model(family)
        core.get_inference_pool = lambda model=model: _Pool(model)
        for size in names.FRAME_COLORIZER_SIZES:
            for blend in (100, 60):
                state_manager.init_item("frame_colorizer_model", name)
                state_manager.init_item("frame_colorizer_size", f"{size}x{size}")
                state_manager.init_item("frame_colorizer_blend", blend)
                theirs = core.colorize_frame(np.ascontiguousarray(photo[..., ::-1]))[..., ::-1]
                ours = FrameColorizer(model, name=name, size=size).colorize(photo, blend=blend / 100)
                diff = np.abs(ours.astype(int) - theirs.astype(int))
                print(f"{name:18s} {size:3d} blend {blend:3d}: identical {np.mean(diff == 0):.4%}, max {diff.max()}")
    return 0


class _Pool:
    """FaceFusion's inference pool, over the stand-in."""

    def __init__(self, model) -> None:
        self.model = model

    def get(self, _key: str) -> _Pool:
        return self

    def run(self, _names, feeds):
        return [self.model.session.run(None, feeds)[0]]


if __name__ == "__main__":
    raise SystemExit(main())
