"""What every worker kind does with a job it holds, written once for the
embedded worker (:mod:`faceweave.service.worker`) and the Celery tasks
(:mod:`faceweave.service.distributed.tasks`):

* :class:`Lease`: renews the lease every interval on its own thread, with
  the progress written since the last beat (a :class:`ProgressSink`), and
  stops, setting the run's ``stop``, once the lease is lost (cancelled, or
  taken back as presumed dead);
* :func:`job_problem` and :func:`record_failure`: the error a job ended
  with, as the API shows it (logged when it is faceweave's own fault), and
  the failed outcome recorded under the lease's holder.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from faceweave.service.errors import JobProblem, job_error
from faceweave.service.jobdata import JobState
from faceweave.service.store import JobRecord, JobStore

log = logging.getLogger("faceweave.service.lease")

#: ``renew(values) -> still held``: one beat, with the values to write (may be empty)
Renew = Callable[[Mapping[str, Any]], bool]


class Lease:
    """Renews a lease every ``interval_s`` on its own thread while the job
    runs (``with lease:``), writing the values :meth:`update` gathered.
    ``renew`` returns whether the lease is still held; when it is not,
    :attr:`lost` is set, ``stop`` is set and the beats end.  A beat that
    raises is logged and retried at the next: the lease's expiry decides."""

    def __init__(self, renew: Renew, *, interval_s: float, stop: threading.Event, name: str) -> None:
        self.renew, self.interval_s, self.stop, self.name = renew, interval_s, stop, name
        self.values: dict[str, Any] = {}
        self.lost = False
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def __enter__(self) -> Lease:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def update(self, **values: Any) -> None:
        """Values for the next beat to write (progress, a preview's path)."""
        with self._lock:
            self.values.update(values)

    def flush(self) -> None:
        """Beat now: renew the lease with the values gathered so far."""
        with self._lock:
            values = dict(self.values)
        try:
            held = self.renew(values)
        except Exception:  # noqa: BLE001 - a failed beat is retried at the next; the lease's expiry decides
            log.warning("%s: a lease renewal failed", self.name, exc_info=True)
            return
        if not held:
            if not self.lost:
                log.info("%s: the lease is lost (cancelled or taken back)", self.name)
            self.lost = True
            self.stop.set()

    def _run(self) -> None:
        while not self.lost and not self._done.wait(self.interval_s):
            self.flush()


def beat_interval(progress_interval_s: float, lease_s: float) -> float:
    """How often a lease of ``lease_s`` is renewed: the progress interval,
    at most a third of the lease (two beats may fail before it expires)."""
    return min(progress_interval_s, lease_s / 3.0)


def job_problem(
    job: JobRecord, error: BaseException | None, hide: tuple[str, ...], *, code: str = "", message: str = ""
) -> JobProblem:
    """What ``job`` failed with, as the API shows it (``code``/``message``
    when there is no exception); an internal error is logged with its traceback."""
    problem = job_error(error, hide) if error is not None else JobProblem(code, message)
    if problem.code == "internal_error":
        log.error("job %s failed", job.id, exc_info=error)
    return problem


def record_failure(store: JobStore, job: JobRecord, problem: JobProblem, *, holder: str, ttl_s: float) -> bool:
    """Record ``job`` as failed with ``problem``, under ``holder``'s lease;
    ``False`` when the job is no longer ``holder``'s (nothing recorded)."""
    return store.finish(
        job.id,
        worker_id=holder,
        attempt=job.attempts,
        state=JobState.FAILED,
        ttl_s=ttl_s,
        error_code=problem.code,
        error_message=problem.message,
    )
