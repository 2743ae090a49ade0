"""The failed-authentication limit: too many failures answer 429 for a while.

Failures are counted per client address and per presented credential (a
keyed hash of the key or token; the credential itself is never kept).  When
one of them has ``max_failures`` failures within ``window_s`` seconds, every
request from that address, or with that credential, is refused with
:class:`RateLimitedError` until the oldest of those failures is older than
the window.  Per address means that a correct key sent from a blocked
address is refused too; behind a reverse proxy the address is the one the
ASGI server reports (uvicorn's ``--forwarded-allow-ips`` makes it the
client's).  A success does not clear earlier failures, so that one valid key
cannot reset the count for guessing others.  Memory is bounded: at most
``max_tracked`` addresses and as many credentials, the least recently failed
dropped first.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import OrderedDict, deque

from faceweave.errors import RateLimitedError


class FailureLimiter:
    """Counts failed authentications; one per app (``max_failures`` 0: off)."""

    def __init__(self, *, max_failures: int, window_s: float, max_tracked: int = 10_000) -> None:
        self.max_failures = max_failures
        self.window_s = window_s
        self.max_tracked = max_tracked
        self._salt = os.urandom(16)
        self._addresses: OrderedDict[str, deque[float]] = OrderedDict()
        self._credentials: OrderedDict[bytes, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def check(self, *, address: str | None, credential: str | None, now: float | None = None) -> None:
        """Refuse a request from a blocked address or with a blocked credential.

        Raises:
            RateLimitedError: too many recent failures (``retry_after``: seconds until one ages out).
        """
        if self.max_failures <= 0:
            return
        now = time.monotonic() if now is None else now
        with self._lock:
            waits = [self._wait(table, key, now) for table, key in self._keys(address, credential)]
        wait = max(waits, default=0.0)
        if wait > 0:
            raise RateLimitedError(
                f"too many failed authentications; at most {self.max_failures} in {self.window_s:g} s",
                retry_after=wait,
            )

    def failed(self, *, address: str | None, credential: str | None, now: float | None = None) -> None:
        """Count one failed authentication for the address and the credential."""
        if self.max_failures <= 0:
            return
        now = time.monotonic() if now is None else now
        with self._lock:
            for table, key in self._keys(address, credential):
                times = table.pop(key, None) or deque(maxlen=self.max_failures)
                times.append(now)
                table[key] = times  # now the most recent: evicted last
                while len(table) > self.max_tracked:
                    table.popitem(last=False)

    @property
    def tracked(self) -> tuple[int, int]:
        """How many addresses and credentials are tracked now."""
        return len(self._addresses), len(self._credentials)

    def _keys(self, address: str | None, credential: str | None) -> list[tuple[OrderedDict, object]]:
        keys: list[tuple[OrderedDict, object]] = []
        if address:
            keys.append((self._addresses, address))
        if credential:
            digest = hashlib.blake2b(credential.encode("utf-8", "replace"), key=self._salt, digest_size=16).digest()
            keys.append((self._credentials, digest))
        return keys

    def _wait(self, table: OrderedDict, key: object, now: float) -> float:
        times = table.get(key)
        if times is None or len(times) < self.max_failures:
            return 0.0
        return max(0.0, times[0] + self.window_s - now)
