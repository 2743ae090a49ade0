"""faceweave's frame colorizer and background remover beside FaceFusion's
own ``frame_colorizer`` and ``background_remover`` functions, on the same
frame with the same stand-in models (``tests/enhancer_fixtures.py``: the real
input and output names and shapes): every colorizer at every size and two
blends, every background remover with four fill and despill colours.

FaceFusion is not a dependency: give a checkout of it (kept outside this
repository; ``git archive`` of facefusion/facefusion is enough) and a
folder with the two packages it imports that faceweave does not
(``pip install --target DIR tqdm psutil``)::

    .venv/bin/python tools/facefusion_processor_check.py --facefusion /tmp/ff --deps /tmp/ffdeps

Prints, per case, the share of identical pixels and the largest difference.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
#: (fill, despill) RGBA colours the removers are run with
COLOURS = (
    ((0, 0, 0, 0), (0, 0, 0, 0)),
    ((0, 255, 0, 255), (0, 0, 0, 0)),
    ((10, 20, 200, 128), (0, 255, 0, 200)),
    ((255, 255, 255, 255), (30, 200, 60, 255)),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facefusion", type=Path, required=True, help="a FaceFusion checkout (its source folder)")
    parser.add_argument("--deps", type=Path, help="a folder with tqdm and psutil")
    args = parser.parse_args()
    sys.path[:0] = [str(args.facefusion), str(ROOT)]
    if args.deps is not None:
        sys.path.append(str(args.deps))
    from facefusion import state_manager
    from skimage.data import astronaut

    state_manager.init_item("download_providers", ["github"])
    photo = np.ascontiguousarray(astronaut())
    colorizers(state_manager, photo)
    removers(state_manager, photo)
    return 0


def colorizers(state_manager, photo: np.ndarray) -> None:
    from facefusion.processors.modules.frame_colorizer import core
    from tests.enhancer_fixtures import colorizer_model

    from faceweave import names
    from faceweave.enhancers.colorizer import FrameColorizer

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
                _report(f"{name} {size} blend {blend}", ours, theirs)


def removers(state_manager, photo: np.ndarray) -> None:
    from facefusion.processors.modules.background_remover import core
    from tests.enhancer_fixtures import remover_model

    from faceweave import names
    from faceweave.enhancers.background import BackgroundRemover

    for name, family in names.BACKGROUND_REMOVERS.items():
        model = remover_model(family)
        core.get_inference_pool = lambda model=model: _Pool(model)
        for fill, despill in COLOURS:
            state_manager.init_item("background_remover_model", name)
            state_manager.init_item("background_remover_fill_color", fill)
            state_manager.init_item("background_remover_despill_color", despill)
            pixels, mask = core.remove_background(np.ascontiguousarray(photo[..., ::-1]))
            removed = BackgroundRemover(model, name=name, fill=fill, despill=despill).remove(photo)
            _report(f"{name} fill {fill} despill {despill}", removed.pixels, pixels[..., ::-1], removed.mask, mask)


def _report(case: str, ours: np.ndarray, theirs: np.ndarray, *more: np.ndarray) -> None:
    pairs = [(ours, theirs), *zip(more[::2], more[1::2], strict=True)]
    same = min(float(np.mean(a == b)) for a, b in pairs)
    worst = max(int(np.abs(a.astype(int) - b.astype(int)).max()) for a, b in pairs)
    print(f"{case:60s} identical {same:.4%}, max {worst}")


class _Pool:
    """FaceFusion's inference pool, over a stand-in: every output, as its sessions give them."""

    def __init__(self, model) -> None:
        self.model = model

    def get(self, _key: str) -> _Pool:
        return self

    def run(self, _names, feeds):
        return self.model.session.run(None, feeds)


if __name__ == "__main__":
    raise SystemExit(main())
