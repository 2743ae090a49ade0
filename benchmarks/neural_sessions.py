"""Several live sessions on one node, their faces batched across sessions.

Each session is a thread with its own :class:`~faceweave.pipeline.FaceSwapper`
(as the service's live hub gives each session its own models), all of them
loading the neural swapper from one shared
:class:`~faceweave.sessions.ModelSessions`, as ``live.swapper`` does: one
loaded copy of the model, and with ``live.batch_window_ms`` above 0 a
:class:`~faceweave.runtime.BatchingModel` that runs the faces the sessions
send together as one inference.  Every session renders a 720p frame with one
face (``FaceRenderer.render`` with the video's profile, a face plan made on
the first frame of every six) as fast as it can, ``--frames`` times.

For each number of sessions (``--sessions 1 4 8``) the same run is made
without batching (window 0: each face its own call) and with it, alternated
over ``--rounds``; printed: the frames per second of all sessions together
(wall clock, medians), the model calls and inferences, and the mean faces
per inference.  The model is the random-weight inswapper_128-sized stand-in
of ``neural_path.py`` on the CPU, where a call's fixed cost is small: an
accelerator's per-call cost (launch, copies, synchronisation) is what
batching saves, not measured here (no GPU).

    .venv/bin/python benchmarks/neural_sessions.py [--sessions 1 4 8] [--frames 24] [--rounds 3] [--window-ms 4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import cv2

sys.path.insert(0, str(Path(__file__).resolve().parent))

from faceweave.compositing.plans import PlanSlot, PlanUse  # noqa: E402
from faceweave.options import RuntimeOptions, SwapOptions  # noqa: E402
from faceweave.pipeline import FaceSwapper  # noqa: E402
from faceweave.provenance.stamp import Provenance  # noqa: E402
from faceweave.sessions import ModelSessions  # noqa: E402
from faceweave.types import Image  # noqa: E402
from neural_frame import PLAN_EVERY, TARGET, frame_720p  # noqa: E402
from neural_path import DEFAULT_DATA, SOURCE, models_folder  # noqa: E402


def session_run(folder: Path, sessions: int, window_ms: float, frames: int, data: Path) -> dict[str, float]:
    """``sessions`` threads rendering ``frames`` frames each on one shared
    model; frames per second (wall) and the model's calls and inferences."""
    runtime = RuntimeOptions(models_dir=str(folder))
    options = SwapOptions(swapper="inswapper_128", runtime=runtime)
    shared = ModelSessions(runtime, batch_window_ms=window_ms)
    unmarked = Provenance.new(watermark=False)
    swappers = [FaceSwapper(options, sessions=shared, provenance=unmarked) for _ in range(sessions)]
    try:
        pixels = frame_720p(data / TARGET)
        source = swappers[0].load_sources([data / SOURCE])[0]
        faces, indices = swappers[0].targets.select(Image(pixels=pixels), {})
        chosen = [(faces[i], source) for i in indices[:1]]
        for swapper in swappers:  # warm: every session has rendered once
            render(swapper, pixels, chosen, 1)
        model = Counted(swappers[0].swapper.model)  # type: ignore[attr-defined]
        for swapper in swappers:  # the one shared model, its calls counted
            swapper.swapper.model = model  # type: ignore[attr-defined]
        start = threading.Barrier(sessions + 1)
        threads = [
            threading.Thread(target=lambda s=s: (start.wait(), render(s, pixels, chosen, frames))) for s in swappers
        ]
        for t in threads:
            t.start()
        start.wait()
        began = time.perf_counter()
        for t in threads:
            t.join()
        wall = time.perf_counter() - began
        return {"fps": sessions * frames / wall, "calls": model.calls, "runs": model.runs()}
    finally:
        for swapper in swappers:
            swapper.close()
        shared.close()


class Counted:
    """The shared model, its calls counted (from the timed rounds only)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.inputs, self.outputs = model.inputs, model.outputs
        self.calls = 0
        self._runs = getattr(model, "runs", None)

    def run(self, feeds: Any) -> Any:
        self.calls += 1
        return self.model.run(feeds)

    def runs(self) -> int:
        """The inferences since it was made: a batching model's own count, else one per call."""
        return self.model.runs - self._runs if self._runs is not None else self.calls


def render(swapper: FaceSwapper, pixels, chosen: list, frames: int) -> None:
    """``frames`` renders of the frame as a live session renders them (a plan every six frames)."""
    profile = swapper.renderer.profile("live")
    slot = PlanSlot(0)
    for n in range(frames):
        if n % PLAN_EVERY == 0:
            slot = PlanSlot(n)
        plans = [PlanUse(slot, makes=n % PLAN_EVERY == 0)]
        swapper.renderer.render(swapper.swapper, pixels, chosen, {}, [None], profile=profile, plans=plans)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--frames", type=int, default=24, help="frames each session renders per run")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each kind, alternated; medians printed")
    parser.add_argument("--window-ms", type=float, default=4.0, help="live.batch_window_ms of the batched runs")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args(argv)
    if not (args.data / TARGET).is_file():
        print(f"test data not found: {args.data / TARGET} (give --data DIR, ../shared/data/faces)", file=sys.stderr)
        return 2
    cv2.setNumThreads(1)
    heads = ("sessions", 8), ("batching", 9), ("fps (all)", 10), ("range", 13), ("calls", 6), ("inferences", 10)
    print(" ".join(f"{name:>{width}}" for name, width in heads), f"{'faces/inf':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = models_folder(Path(tmp))
        for sessions in args.sessions:
            results: dict[float, list[dict[str, float]]] = {0.0: [], args.window_ms: []}
            for _ in range(args.rounds):
                for window in results:
                    results[window].append(session_run(folder, sessions, window, args.frames, args.data))
            for window, runs in results.items():
                fps = [r["fps"] for r in runs]
                calls, inferences = (
                    statistics.median(r["calls"] for r in runs),
                    statistics.median(r["runs"] or r["calls"] for r in runs),
                )
                label = f"{window:g} ms" if window else "off"
                print(
                    f"{sessions:>8} {label:>9} {statistics.median(fps):10.1f} {min(fps):6.1f}-{max(fps):<6.1f}"
                    f" {calls:6.0f} {inferences:10.0f} {calls / max(inferences, 1):9.2f}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
