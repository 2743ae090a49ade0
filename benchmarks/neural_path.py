"""The neural swap's rendering, old route against new, alternating in one run.

Old route: the working crop (face capped at ``working_size``) cut from the
frame, the swapper warping it again onto its template, its output warped
back into the crop, faceweave's compositing, paste-back
(``FaceRenderer._batched``, what every neural swap ran before).  New route:
the face warped once from the frame onto the template and pasted back from
there (``FaceRenderer.render``), with ``--compositing faceweave`` (the same
compositing as the old route) and ``facefusion``.

The swapper is a random-weight stand-in of inswapper_128's size (``target``
``[1, 3, 128, 128]``, a 512-D ``source`` latent, a few 3x3 convolutions of
32 channels), imported into a temporary model folder with an ArcFace
stand-in, on the CPU.  Face detection is done once per photo, outside the
timing; the timed work is one ``render`` of the chosen faces (swap, masks,
compositing, paste-back).  Routes alternate within each round so that drift
on a shared machine hits all of them alike; the figures are medians.

    .venv/bin/python benchmarks/neural_path.py [--rounds 15] [--data ../shared/data/faces]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from faceweave.options import SwapOptions
from faceweave.pipeline import FaceSwapper
from faceweave.provenance.stamp import Provenance

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "faces"
TARGETS = ("single/astronaut_eileen_collins.png", "single/woman_east_asian.png", "single/attr_1996_asian_man.jpg")
SOURCE = "single/biden2.jpg"


def inswapper_sized(seed: int = 0):
    """A random-weight model with inswapper_128's inputs and output: three
    3x3 convolutions (3 -> 32 -> 32 -> 3) of the target plus a per-channel
    term of the latent, and the ``(512, 512)`` emap initializer last."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)

    def weight(name: str, shape: tuple[int, ...], scale: float) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.normal(0, scale, shape).astype(np.float32), name)

    inits = [
        weight("w1", (32, 3, 3, 3), 0.2),
        weight("w2", (32, 32, 3, 3), 0.05),
        weight("w3", (3, 32, 3, 3), 0.05),
        weight("ws", (512, 3), 0.05),
        numpy_helper.from_array(np.array([-1, 3, 1, 1], np.int64), "rows"),
    ]
    nodes = [
        helper.make_node("Conv", ["target", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3"], ["c3"], pads=[1, 1, 1, 1]),
        helper.make_node("MatMul", ["source", "ws"], ["sb"]),
        helper.make_node("Reshape", ["sb", "rows"], ["sb4"]),
        helper.make_node("Add", ["c3", "sb4"], ["sum"]),
        helper.make_node("Sigmoid", ["sum"], ["output"]),
    ]
    inits.append(weight("emap", (512, 512), 0.05))
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        "inswapper_sized",
        [value("target", TensorProto.FLOAT, ["N", 3, 128, 128]), value("source", TensorProto.FLOAT, ["N", 512])],
        [value("output", TensorProto.FLOAT, ["N", 3, 128, 128])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def arcface_sized(seed: int = 1):
    """An ArcFace stand-in: ``[N, 3, 112, 112]`` -> 8x8 average pool -> ``(N, 512)``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.normal(0, 1, (3 * 14 * 14, 512)).astype(np.float32), "w")
    nodes = [
        helper.make_node("AveragePool", ["input"], ["p"], kernel_shape=[8, 8], strides=[8, 8]),
        helper.make_node("Flatten", ["p"], ["f"], axis=1),
        helper.make_node("MatMul", ["f", "w"], ["embedding"]),
    ]
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        "arcface_sized",
        [value("input", TensorProto.FLOAT, ["N", 3, 112, 112])],
        [value("embedding", TensorProto.FLOAT, ["N", 512])],
        initializer=[w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def models_folder(root: Path) -> Path:
    """The stand-ins imported into a model folder as a user would."""
    import onnx

    from faceweave.models import ModelStore, import_model

    store = ModelStore(root / "models")
    onnx.save(inswapper_sized(), root / "inswapper.onnx")
    onnx.save(arcface_sized(), root / "arcface.onnx")
    import_model(store, "inswapper_128", root / "inswapper.onnx")
    import_model(store, "arcface_w600k_r50", root / "arcface.onnx")
    return root / "models"


def timed_ms(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return (time.perf_counter() - start) * 1000.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = models_folder(Path(tmp))
        routes: dict[str, FaceSwapper] = {}
        for mode in ("faceweave", "facefusion"):
            options = SwapOptions.model_validate(
                {"swapper": "inswapper_128", "compositing": mode, "runtime": {"models_dir": str(folder)}}
            )
            routes[mode] = FaceSwapper(options, provenance=Provenance.new(watermark=False))
        base = routes["faceweave"]
        source = base.load_sources([args.data / SOURCE])[0]
        cases = []
        for name in TARGETS:
            pixels = base.read(args.data / name, role="target").pixels
            faces, indices = base.targets.select(base.read(args.data / name, role="target"), {})
            cases.append((name, pixels, [(faces[i], source) for i in indices]))
        work = {
            "old (working crop, faceweave compositing)": lambda px, ch: base.renderer._batched(
                base.swapper, px, ch, {}, [None] * len(ch), [None] * len(ch), profile=base.renderer.profile("photo")
            ),
            "new, faceweave compositing": lambda px, ch: base.renderer.render(
                base.swapper, px, ch, {}, [None] * len(ch), profile=base.renderer.profile("photo")
            ),
            "new, facefusion compositing": lambda px, ch: routes["facefusion"].renderer.render(
                routes["facefusion"].swapper,
                px,
                ch,
                {},
                [None] * len(ch),
                profile=routes["facefusion"].renderer.profile("photo"),
            ),
        }
        times: dict[tuple[str, str], list[float]] = {}
        for round_ in range(args.rounds + 1):
            for name, pixels, chosen in cases:
                for label, run in work.items():
                    ms = timed_ms(lambda run=run, px=pixels, ch=chosen: run(px, ch))
                    if round_:  # the first round warms up
                        times.setdefault((name, label), []).append(ms)
        for swapper in routes.values():
            swapper.close()
    print(f"{'target (face px)':44s} " + " ".join(f"{label[:29]:>31s}" for label in work))
    for name, _, chosen in cases:
        size = int(chosen[0][0].size)
        medians = [statistics.median(times[(name, label)]) for label in work]
        ratios = " ".join(f"{m:>22.1f} ms {m / medians[0]:4.2f}x" for m in medians)
        print(f"{name + f' ({size})':44s} {ratios}")
    total = [sum(statistics.median(times[(n, label)]) for n, _, _ in cases) for label in work]
    print(f"{'all three':44s} " + " ".join(f"{t:>22.1f} ms {t / total[0]:4.2f}x" for t in total))
    return 0


if __name__ == "__main__":
    sys.exit(main())
