"""Keep mediapipe's native log lines off the user's stderr.

mediapipe 0.10 (C++ with TensorFlow Lite and absl logging) writes lines such
as ``INFO: Created TensorFlow Lite XNNPACK delegate for CPU``, ``WARNING: All
log messages before absl::InitializeLog() is called are written to STDERR``,
``W0000 ... inference_feedback_manager.cc ... Feedback manager requires a
model with a single signature inference`` and ``W0000 ...
landmark_projection_calculator.cc ... Using NORM_RECT without
IMAGE_DIMENSIONS`` straight to file descriptor 2.  Python's logging never
sees them, and ``GLOG_minloglevel`` / ``TF_CPP_MIN_LOG_LEVEL`` do not stop
them in this mediapipe (measured: every line stays), so they are not set.

They come only while a graph starts: its models start on mediapipe's own
threads once the graph is made, and have logged by the end of its first
run; and the face mesh logs once more on the first face it finds.
:class:`QuietGraph` makes the graph and runs it once on a small blank
picture with descriptor 2 pointed at ``/dev/null`` (:func:`silenced_stderr`),
then runs it as usual (the face mesh: silenced until its first face).
While such a window is open (milliseconds to tens of milliseconds, when a
model is loaded), anything else the process writes to descriptor 2, from any
thread, is lost too, including the user's own ``sys.stderr`` writes and log
records made at that moment on other threads; outside the windows stderr is
untouched.  Python's logging configuration is never changed.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from faceweave.analysis.solution import run_image

#: side of the blank picture a graph is first run on, inside the window
WARM_UP_SIDE = 64
#: at most this many runs of a graph are made silenced while waiting for
#: ``settled`` (a face mesh that sees no face logs its last line later)
MAX_QUIET_RUNS = 8


class _DescriptorTwo:
    """Descriptor 2 pointed at ``/dev/null`` while at least one window is open.

    Descriptor 2 belongs to the whole process, so this guard does too: one
    instance, shared by every thread.  Windows may overlap (graphs on several
    threads); the first to open saves the real descriptor, the last to close
    puts it back, so overlapping windows cannot leave stderr at /dev/null.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = 0
        self._saved: int | None = None

    @contextmanager
    def silenced(self) -> Iterator[None]:
        self._enter()
        try:
            yield
        finally:
            self._exit()

    def _enter(self) -> None:
        with self._lock:
            if self._open == 0:
                self._saved = _point_at_devnull()
            self._open += 1

    def _exit(self) -> None:
        with self._lock:
            self._open -= 1
            if self._open == 0 and self._saved is not None:
                saved, self._saved = self._saved, None
                os.dup2(saved, 2)
                os.close(saved)


def _point_at_devnull() -> int | None:
    """Point descriptor 2 at ``/dev/null``; return a copy of what it was
    (``None`` when there is no descriptor 2 to save, and nothing was changed)."""
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()  # the user's text written before the window goes out now
        except (OSError, ValueError):
            pass
    try:
        saved = os.dup(2)
    except OSError:
        return None
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        os.close(saved)
        return None
    try:
        os.dup2(devnull, 2)
    finally:
        os.close(devnull)
    return saved


_STDERR = _DescriptorTwo()


def silenced_stderr():
    """A context manager: descriptor 2 at ``/dev/null`` inside, restored after
    (safe to nest and to use from several threads at once).  Keep the block
    short: the process's other stderr output during it is lost as well."""
    return _STDERR.silenced()


class QuietGraph:
    """A mediapipe solution graph (``FaceDetection``, ``FaceMesh``,
    ``SelfieSegmentation``, ``Hands``) whose start is silenced: ``make()``
    builds it and it is run once on a blank ``WARM_UP_SIDE`` square, both
    inside :func:`silenced_stderr`.  With ``settled``, later runs are
    silenced too until ``settled(result)`` is true (the face mesh: a result
    with a face), at most :data:`MAX_QUIET_RUNS` of them.  Same life as the
    graph: :meth:`process`, :meth:`close`; one thread at a time.
    """

    def __init__(self, make: Callable[[], Any], *, settled: Callable[[Any], bool] | None = None) -> None:
        with silenced_stderr():
            self._graph = make()
            try:
                # the graph starts its models, and logs, on threads of its own
                # from here until its first run is over
                self._graph.process(np.zeros((WARM_UP_SIDE, WARM_UP_SIDE, 3), np.uint8))
            except BaseException:
                self._graph.close()
                raise
        self._settled = settled
        self._quiet_runs = 0 if settled is None else MAX_QUIET_RUNS

    def process(self, image: Any) -> Any:
        """The graph's outputs for one RGB image (:func:`~faceweave.analysis.solution.run_image`)."""
        if self._quiet_runs <= 0:
            return run_image(self._graph, image)
        with silenced_stderr():
            result = run_image(self._graph, image)
        self._quiet_runs = 0 if self._settled is None or self._settled(result) else self._quiet_runs - 1
        return result

    def close(self) -> None:
        self._graph.close()
