"""Per-stage timing into a caller-owned dict: wall-clock milliseconds under
the stage's name, and the calling thread's CPU milliseconds under the name
with :data:`CPU_SUFFIX` (``"blend"`` and ``"blend.cpu"``).

Stages run on several threads at once (decode, tracking, two render threads,
encode) that share the cores and the interpreter lock, so a stage's wall
time counts the time it waited for them; its CPU time counts only the work
it did itself (what ``benchmarks/video_swap.py`` budgets)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

#: the suffix of a stage's CPU-time key
CPU_SUFFIX = ".cpu"


@contextmanager
def timed(timings: dict[str, float], key: str) -> Iterator[None]:
    """Add the wall milliseconds spent in the block to ``timings[key]``, and
    the calling thread's CPU milliseconds to ``timings[key + CPU_SUFFIX]``."""
    start, cpu = time.perf_counter(), time.thread_time()
    try:
        yield
    finally:
        add_time(timings, key, wall_s=time.perf_counter() - start, cpu_s=time.thread_time() - cpu)


def add_time(timings: dict[str, float], key: str, *, wall_s: float, cpu_s: float) -> None:
    """Add ``wall_s`` and ``cpu_s`` seconds to ``key``'s two entries (in milliseconds)."""
    timings[key] = timings.get(key, 0.0) + wall_s * 1000.0
    cpu_key = key + CPU_SUFFIX
    timings[cpu_key] = timings.get(cpu_key, 0.0) + cpu_s * 1000.0


def wall_times(timings: Mapping[str, float]) -> dict[str, float]:
    """The wall-clock entries of ``timings`` alone (no CPU keys)."""
    return {k: v for k, v in timings.items() if not k.endswith(CPU_SUFFIX)}


def cpu_times(timings: Mapping[str, float]) -> dict[str, float]:
    """The CPU entries of ``timings``, by stage name (the suffix dropped)."""
    return {k[: -len(CPU_SUFFIX)]: v for k, v in timings.items() if k.endswith(CPU_SUFFIX)}
