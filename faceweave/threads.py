"""How many threads the numerical libraries may use.

faceweave's linear algebra works on small matrices (3x3 similarity fits, a
few hundred thin-plate-spline points) from several threads at once (video
decode, tracking, render and encode threads).  OpenBLAS's own worker threads
only add contention there: on a 2-core machine the video pipeline runs about
a third faster with one BLAS thread (measured with
``benchmarks/video_swap.py``).  The limit is applied for the duration of a
call and restored afterwards, so a host application keeps its own setting.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Run the ``with`` body with BLAS (OpenBLAS, MKL) limited to one thread."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield
