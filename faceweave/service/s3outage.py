"""When the bucket does not answer: :func:`storage_errors` turns botocore's
connection errors and the server's "try later" answers into
:class:`~faceweave.errors.StorageUnavailableError` (HTTP 503
``storage_unavailable`` with ``Retry-After``), and :class:`BucketProbe` tells
``/readyz`` whether the bucket answers (one ``HEAD`` with a short timeout,
its verdict kept ``s3.probe_cache_s`` seconds).

The messages say "the job storage" and nothing of the endpoint or the
bucket: they reach clients.  The server log has the details.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from faceweave.errors import StorageUnavailableError

log = logging.getLogger("faceweave.service")

#: what a client is told to wait after the storage failed (seconds)
STORAGE_RETRY_S = 10.0
#: S3 error codes that say "not now" rather than "never"
_TRANSIENT_CODES = frozenset({"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "503", "500"})
UNAVAILABLE = "the job storage does not answer; nothing was stored or changed, try again later"


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` says the bucket cannot be reached or cannot serve now
    (a connection refused, closed or timed out; a 5xx or SlowDown answer)."""
    from boto3.exceptions import RetriesExceededError, S3UploadFailedError
    from botocore.exceptions import BotoCoreError, ClientError

    if isinstance(exc, BotoCoreError | RetriesExceededError | S3UploadFailedError):
        return True
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        return status >= 500 or str(error.get("Code", "")) in _TRANSIENT_CODES
    return False


@contextmanager
def storage_errors(on_outage: Callable[[str], None] | None = None) -> Iterator[None]:
    """Inside: an outage of the bucket (:func:`is_outage`) is raised as
    :class:`StorageUnavailableError`; ``on_outage`` hears its one-line reason."""
    try:
        yield
    except StorageUnavailableError:
        raise
    except Exception as exc:  # the client's errors are sorted here: outages become StorageUnavailableError
        if not is_outage(exc):
            raise
        reason = _reason(exc)
        log.warning("object storage outage: %s", reason)
        if on_outage is not None:
            on_outage(reason)
        raise StorageUnavailableError(UNAVAILABLE, retry_after=STORAGE_RETRY_S) from exc


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


@dataclass(frozen=True)
class _Verdict:
    at: float  # time.monotonic()
    problem: str | None  # None: the bucket answered


class BucketProbe:
    """Whether ``bucket`` answers ``client`` (made with a short timeout and
    one attempt), asked at most once per ``cache_s`` seconds; an outage met
    by any other call (:meth:`saw_outage`) counts as a fresh verdict."""

    def __init__(self, client: Any, bucket: str, *, cache_s: float) -> None:
        self.client, self.bucket, self.cache_s = client, bucket, cache_s
        self._verdict = _Verdict(at=-float("inf"), problem=None)
        self._lock = threading.Lock()

    def check(self) -> None:
        """Raises :class:`StorageUnavailableError` while the bucket does not answer."""
        with self._lock:  # one probe at a time; the others wait for its verdict
            verdict = self._verdict
            if time.monotonic() - verdict.at >= self.cache_s:
                verdict = _Verdict(at=time.monotonic(), problem=self._ask())
                if verdict.problem != self._verdict.problem and verdict.problem is None:
                    log.info("object storage answers again")
                self._verdict = verdict
        if verdict.problem is not None:
            raise StorageUnavailableError(UNAVAILABLE, retry_after=STORAGE_RETRY_S)

    def saw_outage(self, reason: str) -> None:
        with self._lock:
            self._verdict = _Verdict(at=time.monotonic(), problem=reason)

    def _ask(self) -> str | None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.head_bucket(Bucket=self.bucket)
        except (BotoCoreError, ClientError) as exc:  # a missing bucket or denied access: not usable either
            reason = _reason(exc)
            log.warning("object storage probe failed: %s", reason)
            return reason
        return None
