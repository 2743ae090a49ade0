"""Running the same work on several threads at once (the compiled kernels
release the interpreter lock): each thread's results must be its own."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np


def side_by_side(jobs: Sequence[Callable[[], np.ndarray]], *, repeats: int) -> list[np.ndarray]:
    """Each of ``jobs`` run ``repeats`` times on a thread of its own, all at
    once; the last result of each, in order."""
    got: list[np.ndarray | None] = [None] * len(jobs)

    def run(k: int) -> None:
        for _ in range(repeats):
            got[k] = jobs[k]()

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(g is not None for g in got), "a thread did not finish its work"
    return [g for g in got if g is not None]
