"""How many threads the numerical libraries may use.

faceweave's linear algebra works on small matrices (3x3 similarity fits, a
few hundred thin-plate-spline points) from several threads at once (video
decode, tracking, render and encode threads).  OpenBLAS's own worker threads
only add contention there: on a 2-core machine the video pipeline runs about
a third faster with one BLAS thread (measured with
``benchmarks/video_swap.py``).

OpenCV splits one call (a warp, a resize, a blur of a frame) over its own
pool of threads.  A video or a live stream already renders several frames
at once on threads of its own, so that pool only adds hand-offs and waiting:
the 720p one-face clip took 8-10 % less CPU per frame, and ran 5-10 %
faster, with OpenCV held to one thread (``benchmarks/budget.py``, three rounds
in alternation); the output is the same to the bit.  A single photo's swap
holds OpenCV to one thread too where the process may use at most
:data:`PHOTO_POOL_CPUS` CPUs: on the 2-core machine the pool took about 14 %
more CPU per 1080p swap (spinning workers, hand-offs) for no shorter swap
(the wall time the same within the machine's drift, four rounds in
alternation); on more cores its one swap keeps the pool, which has cores
to spare there.

Both libraries' settings are process-wide, and several videos or live
sessions may run at once in one process (the service's workers): the limits
are taken when the first such call starts and given back, as they were,
when the last one ends (:class:`LibraryThreads`).  A host application keeps
its own setting outside those calls.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class LibraryThreads:
    """Reference-counted limits on BLAS's and OpenCV's own thread pools
    (one thread each while held): the first holder of a kind sets it, the
    last one out restores what was there before."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._blas_holders = 0
        self._opencv_holders = 0
        self._blas_restore: Any = None
        self._opencv_before = 0

    @contextmanager
    def held(self, *, opencv: bool) -> Iterator[None]:
        """BLAS on one thread, and OpenCV too when ``opencv``, for the ``with`` body."""
        self._take(opencv)
        try:
            yield
        finally:
            self._give_back(opencv)

    def _take(self, opencv: bool) -> None:
        with self._lock:
            if self._blas_holders == 0:
                from threadpoolctl import ThreadpoolController

                self._blas_restore = ThreadpoolController().limit(limits=1, user_api="blas")
            self._blas_holders += 1
            if opencv:
                if self._opencv_holders == 0:
                    import cv2

                    self._opencv_before = cv2.getNumThreads()
                    cv2.setNumThreads(1)
                self._opencv_holders += 1

    def _give_back(self, opencv: bool) -> None:
        with self._lock:
            if opencv:
                self._opencv_holders -= 1
                if self._opencv_holders == 0:
                    import cv2

                    cv2.setNumThreads(self._opencv_before)
            self._blas_holders -= 1
            if self._blas_holders == 0 and self._blas_restore is not None:
                self._blas_restore.restore_original_limits()
                self._blas_restore = None


#: the one coordinator of the process: the settings it guards are the
#: libraries' own process-wide state, not faceweave's
_LIBRARY_THREADS = LibraryThreads()


#: at most this many usable CPUs, a photo's swap holds OpenCV to one thread
PHOTO_POOL_CPUS = 2


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, else the machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@contextmanager
def photo_threads() -> Iterator[None]:
    """Run a photo's swap with BLAS on one thread, and OpenCV too where the
    process has at most :data:`PHOTO_POOL_CPUS` CPUs (elsewhere OpenCV keeps
    its pool)."""
    with _LIBRARY_THREADS.held(opencv=usable_cpus() <= PHOTO_POOL_CPUS):
        yield


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Run the ``with`` body with BLAS (OpenBLAS, MKL) limited to one thread
    (a photo's swap: OpenCV keeps its pool)."""
    with _LIBRARY_THREADS.held(opencv=False):
        yield


@contextmanager
def frame_parallel_threads() -> Iterator[None]:
    """Run the ``with`` body with BLAS and OpenCV each on one thread: for
    the pipelines that render several frames at once on threads of their
    own (video, live)."""
    with _LIBRARY_THREADS.held(opencv=True):
        yield
