"""A ``faceweave worker`` whose device breaks: the test-only backend of the fail-over tests.

Run as ``python -m tests.faulty_worker [worker flags]`` with
``FACEWEAVE_TEST_FAULT_AFTER=k``: in every task process, once its models are
loaded and self-tested, the face analyser's inference (the models every swap
runs) works ``k`` more times and then raises what a failing accelerator
raises, for good, so the self-test after the job's error fails too.
"""

from __future__ import annotations

import os
import threading

FAULT = "injected device fault: CUDA error 700, an illegal memory access was encountered"


class _Breaker:
    """Counts inferences once armed; past ``after`` every call raises."""

    def __init__(self, after: int) -> None:
        self.after = after
        self.armed = False
        self.calls = 0
        self.lock = threading.Lock()

    def tick(self) -> None:
        with self.lock:
            if not self.armed:
                return
            self.calls += 1
            if self.calls > self.after:
                raise RuntimeError(FAULT)


def install(after: int) -> None:
    """Patch the analyser and the worker runtime of this process (and of the processes it forks)."""
    from faceweave.analysis import FaceAnalyser
    from faceweave.service.distributed.runtime import WorkerRuntime

    breaker = _Breaker(after)
    analyse, open_runtime = FaceAnalyser.analyse, WorkerRuntime.open

    def failing_analyse(self, *args, **kwargs):
        breaker.tick()
        return analyse(self, *args, **kwargs)

    def arming_open(self) -> None:
        open_runtime(self)
        breaker.armed = True

    FaceAnalyser.analyse = failing_analyse  # type: ignore[method-assign]
    WorkerRuntime.open = arming_open  # type: ignore[method-assign]


def main() -> None:
    import typer

    from faceweave.cli.worker import worker_command

    install(int(os.environ.get("FACEWEAVE_TEST_FAULT_AFTER", "0")))
    typer.run(worker_command)


if __name__ == "__main__":
    main()
