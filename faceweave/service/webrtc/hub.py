"""The live sessions of one node (:class:`LiveHub`): at most
``live.sessions`` at once (a clear 503 when full) and ``live.sessions_per_caller``
of one caller's (429), counted by :class:`~faceweave.service.webrtc.places.LivePlaces`
with the reservations that hold a place for a session to come, each with its own models
(a face tracker's mesh graphs and the analyser are one thread's at a time),
loaded when first needed and kept for the next session, except a neural
swapper's (``live.swapper``): loaded once for the node and shared, the
sessions' faces batched into one inference (``live.batch_window_ms``); the sessions'
figures exported to ``/metrics``; every session closed when the app stops.

The hub belongs to the :class:`~faceweave.service.node.Service`; its
sessions live on the server's event loop (:meth:`open`, :meth:`close_all`)."""

from __future__ import annotations

import hashlib
import logging
import re
import socket
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from faceweave.errors import (
    AtCapacityError,
    FaceweaveError,
    LiveCallerLimitError,
    LiveSessionElsewhereError,
    NotFoundError,
    NotReadyError,
)
from faceweave.service.jobs import RunConfig
from faceweave.service.metrics import Metrics
from faceweave.service.settings import ServiceSettings
from faceweave.service.webrtc.offer import Offer
from faceweave.service.webrtc.places import LivePlaces, Reservation, places_per_caller
from faceweave.service.webrtc.stats import LiveStats, StatsView

if TYPE_CHECKING:
    from faceweave.live.session import LiveSession
    from faceweave.options import SwapOptions
    from faceweave.pipeline import ImageInput
    from faceweave.provenance.audit import AuditInput, AuditLog
    from faceweave.service.models import JobModels
    from faceweave.service.webrtc.peer import PeerSession
    from faceweave.sessions import ModelSessions

log = logging.getLogger("faceweave.service.live")
_T = TypeVar("_T")
#: ended sessions whose reason is still answered (the newest)
_ENDED_KEPT = 64
#: the hex digits of a node's tag at the start of its session ids
TAG_CHARS = 8
#: a session id: the node's tag, then 32 random hex digits
_SESSION_ID = re.compile(rf"[0-9a-f]{{{TAG_CHARS + 32}}}")


def node_tag(name: str | None = None) -> str:
    """The tag of the node called ``name`` (default the host name): the start of its session ids."""
    node = name or socket.gethostname()
    return hashlib.sha256(node.encode()).hexdigest()[:TAG_CHARS]


@dataclass(frozen=True)
class EndedSession:
    """What is kept of a session that ended: why, and its last figures."""

    owner: str
    reason: str
    stats: StatsView


class LiveHub:
    """The node's live sessions and the models they run on."""

    def __init__(
        self, settings: ServiceSettings, metrics: Metrics, config: RunConfig, *, audit: AuditLog | None = None
    ) -> None:
        self.settings, self.metrics, self.config, self.audit = settings, metrics, config, audit
        self.capacity = settings.live.sessions
        #: the start of every session id this node makes (:func:`node_tag`)
        self.tag = node_tag(settings.live.node)
        self._lock = threading.Lock()
        live = settings.live
        self.places = LivePlaces(
            capacity=live.sessions,
            per_caller=places_per_caller(settings),
            hold_s=live.reservation_s,
            retry_after_s=live.retry_after_s,
        )
        self._sessions: dict[str, PeerSession] = {}
        self._ended: OrderedDict[str, EndedSession] = OrderedDict()
        self._models: list[JobModels] = []  # free ones
        self._all_models: list[JobModels] = []
        #: the neural models all sessions share (one loaded copy each, calls batched), opened on first use
        self._neural: ModelSessions | None = None

    # -- places ---------------------------------------------------------------
    def reserve(self, owner: str) -> Reservation:
        """A place held for a session of ``owner`` to be opened under the
        reservation's id (``POST /v1/live`` naming it, within ``live.reservation_s``).

        Raises:
            NotReadyError: live sessions are off on this node (``live.sessions = 0``).
            LiveCallerLimitError: ``owner`` holds as many places as one caller may (429).
            AtCapacityError: every place is taken (503).
        """
        return self._counted(lambda: self.places.reserve(owner, self.tag + uuid.uuid4().hex))

    def _take(self, owner: str, reservation: str | None) -> str:
        """The id of a session of ``owner`` being opened, and its place: the
        reservation's, or one taken now (raises as :meth:`reserve`, and
        :class:`NotFoundError` or :class:`LiveSessionElsewhereError` for a reservation it does not hold)."""
        if reservation is None:
            self._counted(lambda: self.places.take(owner))
            return self.tag + uuid.uuid4().hex
        if self.elsewhere(reservation):
            raise self._elsewhere(reservation, "reservation")
        self.places.claim(reservation, owner)
        return reservation

    def _counted(self, take: Callable[[], _T]) -> _T:
        """``take()``, each refusal counted in ``/metrics`` by its reason."""
        try:
            return take()
        except FaceweaveError as exc:
            reasons: dict[type[FaceweaveError], str] = {
                AtCapacityError: "full",
                LiveCallerLimitError: "caller",
                NotReadyError: "off",
            }
            reason = reasons.get(type(exc))
            if reason is not None:
                self.metrics.live_refused.labels(reason=reason).inc()
            raise

    # -- models ---------------------------------------------------------------
    def swap_options(self, skin_tone: float | None = None) -> SwapOptions:
        """The options live swaps run with: the job defaults at the video
        working size, with the session's ``skin_tone`` (``None``: the default)."""
        from faceweave.service.jobspec import JobOptions

        given: dict[str, object] = {} if skin_tone is None else {"skin_tone": skin_tone}
        if self.settings.live.swapper is not None:
            given["swapper"] = self.settings.live.swapper
        return JobOptions.model_validate(given).swap_options(
            kind="video",
            has_reference=False,
            max_pixels=self.config.max_pixels,
            video_working_size=self.config.video_working_size,
            runtime=self.config.runtime,
        )

    def _borrow_models(self) -> JobModels:
        with self._lock:
            if self._models:
                return self._models.pop()
        from faceweave.service.models import JobModels

        models = JobModels(sessions=self._shared_sessions())
        try:
            models.swapper(self.swap_options()).prepare()
        except BaseException:
            models.close()
            raise
        with self._lock:
            self._all_models.append(models)
        return models

    def _shared_sessions(self) -> ModelSessions:
        """The neural models' sessions every live session of the node loads
        from (made on first use, on the service's runtime, with the
        ``live.batch_window_ms`` batching)."""
        from faceweave.sessions import ModelSessions

        with self._lock:
            if self._neural is None:
                self._neural = ModelSessions(self.config.runtime, batch_window_ms=self.settings.live.batch_window_ms)
            return self._neural

    def _give_back(self, models: JobModels) -> None:
        with self._lock:
            self._models.append(models)

    def _live_session(
        self, models: JobModels, sources: Sequence[ImageInput], skin_tone: float | None = None
    ) -> LiveSession:
        """A session on ``models`` for the source photos (on a worker thread),
        with the offer's ``skin_tone``.

        Raises:
            NoFaceError: a source photo has no face.
        """
        from faceweave.live.session import LiveOptions, LiveSession
        from faceweave.video.pipeline import VideoSwapper

        video = VideoSwapper(models.swapper(self.swap_options(skin_tone)), kind="live")
        return LiveSession(video, sources, options=LiveOptions(provenance=self.config.provenance()))

    # -- sessions -------------------------------------------------------------
    async def open(
        self, owner: str, offer: Offer, sources: Sequence[ImageInput], inputs: Sequence[AuditInput] = ()
    ) -> tuple[PeerSession, str]:
        """A new running session of ``owner`` and its SDP answer; ``inputs``:
        the source photos as the session's audit line names them.

        Raises:
            NotReadyError: live sessions are off, or aiortc is not installed.
            AtCapacityError: the node is full.
            LiveCallerLimitError: ``owner`` holds as many places as one caller may.
            NotFoundError: the offer names a reservation ``owner`` does not hold (now).
            LiveSessionElsewhereError: the offer names another node's reservation.
            NoFaceError: a source photo has no face.
            NoVideoTrackError: the offer's tracks have no video.
        """
        from starlette.concurrency import run_in_threadpool

        session_id = self._take(owner, offer.reservation)
        models = None
        try:
            peer = _peer_module()
            models = await run_in_threadpool(self._borrow_models)
            live = await run_in_threadpool(self._live_session, models, sources, offer.skin_tone)
        except BaseException:
            if models is not None:
                self._give_back(models)
            self.places.release(owner)
            raise
        session = peer.PeerSession(
            session_id=session_id,
            owner=owner,
            live=live,
            settings=self.settings.live,
            stats=LiveStats(self.metrics),
            on_end=lambda ended: self._ended_session(ended, models),
        )
        session.inputs.extend(inputs)
        with self._lock:
            self._sessions[session.id] = session
        try:
            answer = await session.answer(offer)
        except BaseException as exc:
            session.failure = exc
            await session.close("the offer was refused")
            raise
        self.metrics.live_started.inc()
        return session, answer

    def _ended_session(self, session: PeerSession, models: JobModels) -> None:
        with self._lock:
            self._sessions.pop(session.id, None)
            self._ended[session.id] = EndedSession(session.owner, session.end_reason or "ended", session.view())
            while len(self._ended) > _ENDED_KEPT:
                self._ended.popitem(last=False)
        self._give_back(models)
        self.places.release(session.owner)
        self._write_audit(session)

    def _write_audit(self, session: PeerSession) -> None:
        """One audit line for an ended session: owner, source photos' hashes,
        its figures, how it ended, the watermark; never raised."""
        if self.audit is None:
            return
        from faceweave.provenance.audit import AuditEntry, outcome_of
        from faceweave.provenance.stamp import audit_watermark
        from faceweave.service.errors import clean_message

        provenance = session.live.options.provenance
        stats = session.view()
        outcome = outcome_of(session.failure)
        try:
            self.audit.append(
                AuditEntry(
                    command="service.live",
                    inputs=tuple(session.inputs),
                    options={"session_id": session.id, "end": session.end_reason, **_figures(stats)},
                    watermark=audit_watermark(provenance),
                    user=session.owner,
                    run_id=provenance.run_hex if provenance is not None else None,
                    outcome=outcome["outcome"],
                    code=outcome["code"],
                    message=clean_message(outcome["message"] or "", self.config.hide) or None,
                )
            )
        except Exception:  # noqa: BLE001 - the session has ended either way
            log.exception("cannot write the audit line of live session %s", session.id)

    def session(self, session_id: str, owner: str) -> PeerSession | EndedSession:
        """``owner``'s running session, or what is kept of it once ended.

        Raises:
            LiveSessionElsewhereError: the id is another node's (the request was routed to the wrong node).
            NotFoundError: no such session of ``owner`` (another caller's looks the same).
        """
        with self._lock:
            found: PeerSession | EndedSession | None = self._sessions.get(session_id) or self._ended.get(session_id)
        if found is None and self.elsewhere(session_id):
            raise self._elsewhere(session_id, "session")
        if found is None or found.owner != owner:
            raise NotFoundError(f"no live session {session_id[:64]!r}")
        return found

    def _elsewhere(self, session_id: str, what: str) -> LiveSessionElsewhereError:
        return LiveSessionElsewhereError(
            f"live {what} {session_id[:64]!r} is held by another node, and this request reached node"
            f" {self.tag}: a session's calls go to the node that reserved or opened it (keep the ingress's"
            " affinity cookie that POST /v1/live/reservations or POST /v1/live set, docs/DEPLOY.md)"
        )

    def elsewhere(self, session_id: str) -> bool:
        """Whether ``session_id`` is a session id another node made (its tag is not this node's)."""
        return bool(_SESSION_ID.fullmatch(session_id)) and not session_id.startswith(self.tag)

    def running(self, session_id: str, owner: str) -> PeerSession:
        """``owner``'s running session.

        Raises:
            NotFoundError: no such session, or it has ended (the message says why).
        """
        found = self.session(session_id, owner)
        if not isinstance(found, EndedSession):
            return found
        raise NotFoundError(f"live session {session_id[:64]!r} has ended: {found.reason}")

    def observe(self) -> None:
        """Set the gauges of ``/metrics``: sessions running and their summed frame rate."""
        with self._lock:
            sessions = list(self._sessions.values())
        self.metrics.live_sessions.set(len(sessions))
        self.metrics.live_fps.set(sum(s.stats.fps() for s in sessions))

    async def close_all(self) -> None:
        """End every session (the app is stopping)."""
        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            await session.close("the server is stopping")

    def close(self) -> None:
        """Release the models (after :meth:`close_all`)."""
        with self._lock:
            models, self._all_models, self._models = self._all_models, [], []
            neural, self._neural = self._neural, None
        for item in models:
            item.close()
        if neural is not None:
            neural.close()


def _figures(stats: StatsView) -> dict[str, object]:
    return {"frames_received": stats.received, "frames_swapped": stats.swapped, "frames_dropped": stats.dropped}


def _peer_module():
    """:mod:`faceweave.service.webrtc.peer`, which needs aiortc.

    Raises:
        NotReadyError: aiortc is not installed on this server.
    """
    try:
        from faceweave.service.webrtc import peer
    except ImportError as exc:
        raise NotReadyError(
            f"live sessions need aiortc on the server ({exc.name} is missing): pip install 'faceweave[webrtc]'"
        ) from None
    return peer
