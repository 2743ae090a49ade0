"""The live places of one node (:class:`LivePlaces`): at most
``live.sessions`` sessions opening, running or reserved at once, and at most
``live.sessions_per_caller`` of them one caller's (:func:`places_per_caller`),
so that no caller can hold every place.  A reservation
(``POST /v1/live/reservations``) holds a place, under the id of the session
it will open, for ``live.reservation_s``; ``POST /v1/live`` naming it turns it
into that session's place (:meth:`LivePlaces.claim`), and one never claimed
gives its place back when its time is up."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from faceweave.errors import AtCapacityError, LiveCallerLimitError, NotFoundError, NotReadyError
from faceweave.service.settings import ServiceSettings


def places_per_caller(settings: ServiceSettings) -> int:
    """``live.sessions_per_caller``, or its default: 1 when the service
    requires authentication (callers are told apart), else every place (all
    callers are the one ``local`` caller)."""
    live = settings.live
    if live.sessions_per_caller is not None:
        return live.sessions_per_caller
    return 1 if settings.auth.required else max(1, live.sessions)


@dataclass(frozen=True)
class Reservation:
    """A place held for ``owner``'s session ``session_id`` until ``until`` (on the places' clock)."""

    session_id: str
    owner: str
    until: float


class LivePlaces:
    """The places of a node with ``capacity`` of them, ``per_caller`` at
    most one caller's; reservations held ``hold_s``; refusals say
    ``retry_after_s`` (``Retry-After``).  Thread-safe; ``clock`` is monotonic seconds."""

    def __init__(
        self,
        *,
        capacity: int,
        per_caller: int,
        hold_s: float,
        retry_after_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capacity, self.per_caller, self.hold_s, self.retry_after_s = capacity, per_caller, hold_s, retry_after_s
        self._clock = clock
        self._lock = threading.Lock()
        self._held: Counter[str] = Counter()  # owner -> sessions opening or running
        self._reserved: dict[str, Reservation] = {}

    def take(self, owner: str) -> None:
        """One place for a session of ``owner`` being opened now.

        Raises:
            NotReadyError: the node has no places (``live.sessions = 0``).
            AtCapacityError: every place is taken (503).
            LiveCallerLimitError: ``owner`` holds ``per_caller`` places already (429; looked at
                once the node has a free place).
        """
        with self._lock:
            self._check(owner)
            self._held[owner] += 1

    def reserve(self, owner: str, session_id: str) -> Reservation:
        """A place held for ``owner``'s session ``session_id`` (raises as :meth:`take`)."""
        with self._lock:
            self._check(owner)
            reservation = Reservation(session_id, owner, self._clock() + self.hold_s)
            self._reserved[session_id] = reservation
            return reservation

    def claim(self, session_id: str, owner: str) -> None:
        """The reservation of ``session_id`` becomes the place of the session being opened.

        Raises:
            NotFoundError: no such reservation of ``owner`` (never made, another
                caller's, already used, or its time is up).
        """
        with self._lock:
            self._expire()
            found = self._reserved.get(session_id)
            if found is None or found.owner != owner:
                raise NotFoundError(
                    f"no live reservation {session_id[:64]!r}: it was used, or its {self.hold_s:g} s"
                    " (live.reservation_s) are up; reserve again (POST /v1/live/reservations)"
                )
            del self._reserved[session_id]
            self._held[owner] += 1

    def cancel(self, session_id: str, owner: str) -> None:
        """Let ``owner``'s reservation of ``session_id`` go, if it is still held (its offer was refused first)."""
        with self._lock:
            found = self._reserved.get(session_id)
            if found is not None and found.owner == owner:
                del self._reserved[session_id]

    def release(self, owner: str) -> None:
        """Give back one place of ``owner``'s (a session that ended, or was never opened)."""
        with self._lock:
            self._held[owner] -= 1
            if self._held[owner] <= 0:
                del self._held[owner]

    def taken(self) -> int:
        """Places held now: sessions opening or running, and reservations not yet used or expired."""
        with self._lock:
            self._expire()
            return self._total()

    def _total(self) -> int:
        return sum(self._held.values()) + len(self._reserved)

    def _expire(self) -> None:
        now = self._clock()
        for session_id in [key for key, held in self._reserved.items() if held.until <= now]:
            del self._reserved[session_id]

    def _check(self, owner: str) -> None:
        self._expire()
        if self.capacity == 0:
            raise NotReadyError("live sessions are off on this node (live.sessions = 0)")
        if self._total() >= self.capacity:
            raise AtCapacityError(
                f"this node carries at most {self.capacity} live session(s) at once (live.sessions) and all are"
                " in use; try again when one ends",
                retry_after=self.retry_after_s,
            )
        mine = self._held[owner] + sum(1 for held in self._reserved.values() if held.owner == owner)
        if mine >= self.per_caller:
            raise LiveCallerLimitError(
                f"you hold {mine} live place(s) (sessions and reservations), as many as one caller may"
                f" (live.sessions_per_caller = {self.per_caller}); end one first (DELETE /v1/live/{{id}})",
                retry_after=self.retry_after_s,
            )
