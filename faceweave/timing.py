"""Per-stage wall-clock timing into a caller-owned dict."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def timed(timings: dict[str, float], key: str) -> Iterator[None]:
    """Add the milliseconds spent in the block to ``timings[key]``."""
    start = time.perf_counter()
    try:
        yield
    finally:
        timings[key] = timings.get(key, 0.0) + (time.perf_counter() - start) * 1000.0
