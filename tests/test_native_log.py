"""The library keeps mediapipe's native log lines off stderr, and leaves the
user's own stderr and logging alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from faceweave.analysis.native_log import QuietGraph, silenced_stderr

REPO = Path(__file__).resolve().parents[1]

SWAP_ASTRONAUT = """
import json, logging, sys
from skimage.data import astronaut
from faceweave import FaceSwapper
from faceweave.options import MaskOptions, SwapOptions

root = logging.getLogger()
handler = logging.StreamHandler(sys.stderr)
handler.setFormatter(logging.Formatter("user-log %(name)s %(levelname)s %(message)s"))
root.addHandler(handler)
root.setLevel(logging.INFO)
before = (root.level, list(root.handlers), logging.getLogger("faceweave").level)
print("user-stderr before", file=sys.stderr, flush=True)
pixels = astronaut()
options = SwapOptions(masks=MaskOptions(segmentation=True, hands=True))
with FaceSwapper(options) as swapper:
    result = swapper.swap([pixels], pixels)
print("user-stderr after", file=sys.stderr, flush=True)
logging.getLogger("user.app").warning("still heard")
after = (root.level, list(root.handlers), logging.getLogger("faceweave").level)
print(json.dumps({"swapped": len(result.swapped), "logging_unchanged": before == after}))
"""


def _run(code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("GLOG_minloglevel", "TF_CPP_MIN_LOG_LEVEL")}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env, timeout=300, check=False
    )


@pytest.mark.slow
def test_a_library_swap_writes_nothing_of_its_own_to_stderr():
    """A whole photo swap (detector, mesh, segmentation and hand models) from
    Python: stderr holds exactly what the script wrote itself, the user's
    logging is as it was, and the user's own stderr and log lines get through."""
    done = _run(SWAP_ASTRONAUT)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"swapped": 1, "logging_unchanged": True}
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    # the library's own records (the "faceweave" loggers) go to the user's
    # handler, as the user asked; nothing else is there
    assert [line for line in lines if not line.startswith("user-log faceweave")] == [
        "user-stderr before",
        "user-stderr after",
        "user-log user.app WARNING still heard",
    ]


def _fd2_identity() -> tuple[int, int]:
    st = os.fstat(2)
    return st.st_dev, st.st_ino


def test_silenced_stderr_restores_descriptor_2_when_windows_overlap_across_threads():
    real = _fd2_identity()
    devnull = os.stat(os.devnull)
    entered, release = threading.Barrier(3), threading.Event()

    def window():
        with silenced_stderr():
            entered.wait()
            release.wait()

    threads = [threading.Thread(target=window) for _ in range(2)]
    for t in threads:
        t.start()
    entered.wait()
    assert _fd2_identity() == (devnull.st_dev, devnull.st_ino)
    release.set()
    for t in threads:
        t.join()
    assert _fd2_identity() == real
    with silenced_stderr(), silenced_stderr():
        pass
    assert _fd2_identity() == real


class _Graph:
    """A stand-in solution graph that writes to descriptor 2 on every run."""

    def __init__(self, results):
        self.results = list(results)
        self.closed = False

    def process(self, image):
        os.write(2, b"native noise\n")
        return self.results.pop(0)

    def close(self):
        self.closed = True


@pytest.mark.parametrize(
    "settled, results, heard",
    [
        (None, ["warm", "a", "b"], 2),  # only the warm-up run is silenced
        (lambda r: r == "face", ["warm", "none", "face", "c"], 1),  # silenced until the first face
    ],
)
def test_quiet_graph_silences_its_start(capfd, settled, results, heard):
    graph = _Graph(results)
    quiet = QuietGraph(lambda: graph, settled=settled)
    for _ in results[1:]:
        quiet.process(None)
    quiet.close()
    assert graph.closed and capfd.readouterr().err.count("native noise") == heard
