"""mediapipe imported without matplotlib (faceweave/mediapipe_import.py):
each case in a fresh interpreter, as a process's first import."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from types import ModuleType

import pytest

from faceweave.mediapipe_import import DeferredModule


def run_fresh(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_mediapipe_comes_without_matplotlib_and_matplotlib_stays_the_real_one():
    out = run_fresh(
        """
        import sys
        from faceweave.mediapipe_import import DeferredModule, load_mediapipe
        mp = load_mediapipe()
        print("matplotlib" in sys.modules, "matplotlib.pyplot" in sys.modules)
        print(callable(mp.solutions.face_mesh.FaceMesh), len(mp.solutions.face_mesh_connections.FACEMESH_TESSELATION))
        print(load_mediapipe() is mp)
        import matplotlib.pyplot as plt
        print(isinstance(plt, DeferredModule), type(sys.modules["matplotlib"]).__name__)
        # mediapipe's own plotting reads the real pyplot through its stand-in
        print(mp.solutions.drawing_utils.plt.figure is plt.figure)
        """
    )
    assert out.splitlines() == ["False False", "True 2556", "True", "False module", "True"]


def test_a_process_that_imported_matplotlib_imports_mediapipe_as_it_is():
    out = run_fresh(
        """
        import matplotlib.pyplot as plt
        from faceweave.mediapipe_import import load_mediapipe
        print(load_mediapipe().solutions.drawing_utils.plt is plt)
        """
    )
    assert out == "True"


def test_a_stand_in_lacks_what_it_cannot_read_yet():
    stand_in = DeferredModule("faceweave_no_such_module")
    with pytest.raises(AttributeError):
        _ = stand_in.__file__  # the import system's own questions are not forwarded
    sys.modules["faceweave_no_such_module"] = stand_in
    try:
        with pytest.raises(AttributeError):
            _ = stand_in.anything  # it is the module of its name: nothing to read yet
    finally:
        del sys.modules["faceweave_no_such_module"]
    resolved = DeferredModule("json")
    assert isinstance(resolved, ModuleType) and resolved.dumps([1]) == "[1]"
