"""One browser's live session (:class:`PeerSession`): an aiortc peer
connection whose incoming camera track is pushed into a
:class:`~faceweave.live.endpoints.PushSource`, swapped by a
:class:`~faceweave.live.session.LiveSession` on its own thread, and whose
outgoing track (:class:`SwappedTrack`) sends the newest swapped frame
(:class:`FrameHandoff`, a :class:`~faceweave.live.endpoints.LatestFrame`)
back on the same connection.

Everything but the session's thread runs on the server's event loop.  The
session ends (:meth:`PeerSession.close`, once, whichever comes first) when
the caller deletes it, the browser's track ends or its connection fails or
closes, no frame arrives within ``live.connect_timeout_s``, or none for
``live.frame_timeout_s`` after the first (a stalled peer), it runs for
``live.max_seconds``, or the swap fails; the reason is kept."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from fractions import Fraction

import av
from aiortc import (
    MediaStreamTrack,
    RTCConfiguration,
    RTCIceServer,
    RTCIceTransportPolicy,
    RTCPeerConnection,
    RTCSessionDescription,
)
from aiortc.exceptions import OperationError
from aiortc.mediastreams import MediaStreamError

from faceweave.errors import FaceweaveError, InputError, InvalidOptionError, NoFaceError, NoVideoTrackError
from faceweave.live.endpoints import LatestFrame, PushSource
from faceweave.live.outputs import OutgoingFrame
from faceweave.live.session import LiveSession
from faceweave.pipeline import ImageInput
from faceweave.provenance.audit import AuditInput
from faceweave.service.settings import LiveSettings
from faceweave.service.webrtc.ice import ice_servers_for
from faceweave.service.webrtc.offer import Offer
from faceweave.service.webrtc.sdp import TAKEN
from faceweave.service.webrtc.stats import LiveStats, StatsView
from faceweave.service.webrtc.sync import AvSync

log = logging.getLogger("faceweave.service.live")
#: the clock of the outgoing frames (RTP's for video)
VIDEO_CLOCK = 90_000
#: the most audio frames held for the swapped video (20 ms each: a few times sync.MAX_HOLD_S)
_AUDIO_HELD = 250


def server_configuration(settings: LiveSettings, session_id: str) -> RTCConfiguration:
    """The server side's peer connection settings for session ``session_id``:
    its ICE servers (TURN with fresh time-limited credentials bound to the
    session) and transport policy; none: host candidates only (aiortc's own
    default would be a public STUN server)."""
    config = ice_servers_for(settings, "server", session_id)
    servers = [RTCIceServer(urls=list(s.urls), username=s.username, credential=s.credential) for s in config.servers]
    policy = RTCIceTransportPolicy.RELAY if config.transport_policy == "relay" else RTCIceTransportPolicy.ALL
    return RTCConfiguration(iceServers=servers, iceTransportPolicy=policy)


class FrameHandoff(LatestFrame):
    """The session's output: the newest swapped frame, each one noted in the
    stats and ``wake()`` called (from the encoder thread) so the outgoing
    track sends it."""

    def __init__(self, stats: LiveStats, wake: Callable[[], None]) -> None:
        super().__init__()
        self.stats, self.wake = stats, wake

    def write(self, frame: OutgoingFrame) -> None:
        super().write(frame)
        self.stats.swapped_frame(frame.time)
        self.wake()

    def prepare(self, frame: OutgoingFrame) -> None:
        """The planes the track sends, made on the encoder thread: 4:2:0 in
        BT.601's matrix, which WebRTC's decoders assume (VP8 says none), so
        aiortc's encoder takes them as they are (no RGB conversion, no RGB
        mark: the mark is made on their Y plane)."""
        frame.i420(bt709=False)

    def close(self) -> None:
        super().close()
        self.wake()


class SwappedTrack(MediaStreamTrack):
    """The outgoing video: each new swapped frame once, stamped with the
    time its camera frame arrived (so the browser plays them at that pace);
    each one sent moves ``sync`` on and sets ``progress`` (the held audio waits on it)."""

    kind = "video"

    def __init__(self, handoff: FrameHandoff, changed: asyncio.Event, sync: AvSync, progress: asyncio.Event) -> None:
        super().__init__()
        self.handoff, self.changed, self.sync, self.progress = handoff, changed, sync, progress
        self._number = 0

    async def recv(self) -> av.VideoFrame:
        while True:
            got = self.handoff.get(self._number, timeout=0)
            if got is None and (self.handoff.closed or self.readyState != "live"):
                self.sync.video_ended = True
                self.progress.set()
                self.stop()
                raise MediaStreamError("the live session ended")
            if got is not None:
                break
            self.changed.clear()
            got = self.handoff.get(self._number, timeout=0)  # written between the look and the clear
            if got is not None:
                break
            await self.changed.wait()
        self._number, swapped = got
        t = swapped.time
        frame = av.VideoFrame.from_ndarray(swapped.i420(bt709=False), format="yuv420p")
        frame.pts, frame.time_base = round(t * VIDEO_CLOCK), Fraction(1, VIDEO_CLOCK)
        self.sync.video_sent(t, time.monotonic())
        self.progress.set()
        return frame


class HeldAudioTrack(MediaStreamTrack):
    """The outgoing audio: the browser's own sound (:meth:`put` as it
    arrives), each frame sent as long after its arrival as the swapped
    frames are sent after theirs (:class:`~faceweave.service.webrtc.sync.AvSync`),
    at its own pace, so the browser lines the two up."""

    kind = "audio"

    def __init__(self, sync: AvSync, progress: asyncio.Event, stats: LiveStats) -> None:
        super().__init__()
        self.sync, self.progress, self.stats = sync, progress, stats
        self._held: deque[tuple[av.AudioFrame, float]] = deque(maxlen=_AUDIO_HELD)
        self._arrived = asyncio.Event()
        self._ended = False

    def put(self, frame: av.AudioFrame, arrived: float) -> None:
        self._held.append((frame, arrived))
        self._arrived.set()

    def end(self) -> None:
        """No more sound comes in: what is held still goes out, then the track ends."""
        self._ended = True
        self._arrived.set()

    async def recv(self) -> av.AudioFrame:
        while not self._held:
            if self._ended or self.readyState != "live":
                self.stop()
                raise MediaStreamError("the browser's audio ended")
            self._arrived.clear()
            await self._arrived.wait()
        await self._until_due(self._held[0][1])
        now = time.monotonic()
        stale = self.sync.stale_audio([arrived for _, arrived in self._held], now)
        for _ in range(stale):  # the sender fell behind: the oldest go, the sound stays with the picture
            self._held.popleft()
        frame, arrived = self._held.popleft()
        self.stats.audio_frame(now - arrived, dropped=stale)
        return frame

    async def _until_due(self, arrived: float) -> None:
        """Wait until a frame that arrived at ``arrived`` may go: its due time, looked
        at again whenever a swapped frame is sent (that can move it) or the video ends."""
        while not self.sync.audio_due(arrived, time.monotonic()):
            self.progress.clear()
            if self.sync.audio_due(arrived, time.monotonic()):  # sent between the look and the clear
                return
            wait = max(0.0, self.sync.due_at(arrived) - time.monotonic())
            try:
                await asyncio.wait_for(self.progress.wait(), timeout=wait)
            except TimeoutError:
                continue


class PeerSession:
    """A live session of ``owner`` on one peer connection; :meth:`answer`
    the browser's offer, then it runs until :meth:`close`.  ``on_end`` is
    called once, after the session's thread has finished (its models are
    free again)."""

    def __init__(
        self,
        *,
        session_id: str,
        owner: str,
        live: LiveSession,
        settings: LiveSettings,
        stats: LiveStats,
        on_end: Callable[[PeerSession], None],
    ) -> None:
        self.id, self.owner, self.live, self.settings, self.stats = session_id, owner, live, settings, stats
        self.on_end = on_end
        self.loop = asyncio.get_running_loop()
        self.source = PushSource(rate=30, max_frames=1)
        self._changed = asyncio.Event()
        self.handoff = FrameHandoff(stats, wake=self._wake)
        self.pc: RTCPeerConnection | None = None
        self.end_reason: str | None = None
        #: what the swap raised, when it failed
        self.failure: BaseException | None = None
        #: every source photo the session was given (its audit line names them)
        self.inputs: list[AuditInput] = []
        self._thread: threading.Thread | None = None
        self._tasks: list[asyncio.Task] = []
        self._video_track: MediaStreamTrack | None = None
        self._audio_track: MediaStreamTrack | None = None
        #: the microphone's sound going back, when the offer sends audio
        self.audio_back: HeldAudioTrack | None = None
        self.sync = AvSync()
        self._progress = asyncio.Event()
        self._closed: asyncio.Future | None = None
        #: when the last camera frame arrived (monotonic), ``None`` before the first
        self._last_frame: float | None = None

    def _wake(self) -> None:
        """A swapped frame is ready (called from the session's thread)."""
        try:
            self.loop.call_soon_threadsafe(self._changed.set)
        except RuntimeError:  # the server's loop has stopped
            return

    @property
    def running(self) -> bool:
        return self._closed is None

    # -- signalling -----------------------------------------------------------
    async def answer(self, offer: Offer) -> str:
        """The SDP answer to ``offer``; the session runs from here on.

        Raises:
            InvalidOptionError: aiortc cannot use the offer (the caller closes the session).
            NoVideoTrackError: the offer's tracks have no video (likewise).
        """
        pc = self.pc = RTCPeerConnection(server_configuration(self.settings, self.id))
        pc.on("track", self._on_track)
        pc.on("connectionstatechange", self._on_state)
        try:
            await pc.setRemoteDescription(RTCSessionDescription(sdp=offer.sdp, type=offer.type))
        except OperationError:  # no codec in common
            raise InvalidOptionError(
                "the SDP offer cannot be answered: it offers no video codec this server takes (VP8 or H.264)"
            ) from None
        except Exception as exc:  # noqa: BLE001 - aiortc asserts and indexes its way through an offer
            raise self._unanswerable(exc) from None
        if self._video_track is None:
            raise NoVideoTrackError("the offer sends no video track: allow the camera and offer its video")
        pc.addTrack(SwappedTrack(self.handoff, self._changed, self.sync, self._progress))  # the camera's transceiver
        if self._audio_track is not None:  # the microphone's sound goes back on its own transceiver, held in sync
            self.audio_back = HeldAudioTrack(self.sync, self._progress, self.stats)
            pc.addTrack(self.audio_back)
            self._tasks.append(asyncio.ensure_future(self._receive_audio(self._audio_track, self.audio_back)))
        try:
            await pc.setLocalDescription(await pc.createAnswer())
        except Exception as exc:  # noqa: BLE001 - likewise, for what it read but cannot answer
            raise self._unanswerable(exc) from None
        self._thread = threading.Thread(target=self._run, name=f"faceweave-live-{self.id[:8]}", daemon=True)
        self._thread.start()
        self._tasks.append(asyncio.ensure_future(self._watch()))
        return pc.localDescription.sdp

    def _unanswerable(self, exc: Exception) -> InvalidOptionError:
        """The refusal of an offer aiortc raised ``exc`` on, in our words (its
        own text goes to the server log, once, without a traceback)."""
        log.info("live session %s: aiortc cannot answer the offer (%s: %s)", self.id, type(exc).__name__, exc)
        return InvalidOptionError(
            "the SDP offer cannot be answered: this server takes an offer with a video section (VP8 or H.264) that"
            f" sends, ICE credentials (a=ice-ufrag, a=ice-pwd), a=fingerprint, a=setup and a=rtcp-mux; {TAKEN}"
        )

    def _on_track(self, track: MediaStreamTrack) -> None:
        if track.kind == "video" and self._video_track is None:
            self._video_track = track
            self._tasks.append(asyncio.ensure_future(self._receive(track)))
        elif track.kind == "audio" and self._audio_track is None:
            self._audio_track = track  # relayed back once the answer is made (answer())
        else:  # a second camera or microphone: read and let go, so nothing piles up
            self._tasks.append(asyncio.ensure_future(_drain(track)))

    async def _on_state(self) -> None:
        state = self.pc.connectionState if self.pc is not None else "closed"
        if state in ("failed", "closed"):
            await self.close(f"the browser's connection {state}")

    # -- frames ---------------------------------------------------------------
    async def _receive(self, track: MediaStreamTrack) -> None:
        while self.running:
            try:
                frame = await track.recv()
            except MediaStreamError:
                await self.close("the browser's camera track ended")
                return
            if not isinstance(frame, av.VideoFrame):
                continue
            self._last_frame = time.monotonic()
            pixels = frame.to_ndarray(format="rgb24")
            t = self.stats.arrived()
            self.sync.camera_frame(t, time.monotonic())
            try:
                self.source.push(pixels, t)
            except InputError:
                return  # the swap has ended on its side (its thread closes the session with the reason)

    async def _receive_audio(self, track: MediaStreamTrack, back: HeldAudioTrack) -> None:
        """The browser's sound into ``back`` as it arrives (its end does not end the session)."""
        try:
            while self.running:
                frame = await track.recv()
                if isinstance(frame, av.AudioFrame):
                    back.put(frame, time.monotonic())
        except MediaStreamError:
            return
        finally:
            back.end()

    def _run(self) -> None:
        """The session's thread: swap until the pushed frames end."""
        reason = "the swap ended"
        try:
            self.live.run(self.source, [self.handoff])
        except FaceweaveError as exc:
            reason, self.failure = f"the swap failed: {exc}", exc
            log.warning("live session %s: %s", self.id, reason)
        except Exception as exc:  # noqa: BLE001 - the session ends; the server keeps serving
            self.failure = exc
            reason = "the swap failed (internal error; the details are in the server log)"
            log.error("live session %s failed", self.id, exc_info=exc)
        try:
            self.loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self.close(reason)))
        except RuntimeError:  # the server's loop has stopped: nothing is left to close
            return

    async def _watch(self) -> None:
        """End the session when its first frame is late, its frames stop, or its time is up."""
        started = time.monotonic()
        while self.running:
            reason, wait = self._watchdog(time.monotonic() - started)
            if reason is not None:
                await self.close(reason)
                return
            await asyncio.sleep(wait)

    def _watchdog(self, elapsed: float) -> tuple[str | None, float]:
        """Why the session ends ``elapsed`` s after it started, or ``None``
        and how long until that may change."""
        live = self.settings
        if elapsed >= live.max_seconds:
            return f"the session reached its limit of {live.max_seconds:g} s (live.max_seconds)", 0.0
        if self._last_frame is None:
            if elapsed >= live.connect_timeout_s:
                return (
                    f"no video frame arrived within {live.connect_timeout_s:g} s (live.connect_timeout_s): the"
                    " camera is off, or the browser cannot reach this server over UDP"
                ), 0.0
            # looked at again within frame_timeout_s, so that a first frame and a stall soon after are seen
            return None, min(live.connect_timeout_s, live.max_seconds, elapsed + live.frame_timeout_s) - elapsed
        quiet = time.monotonic() - self._last_frame
        if quiet >= live.frame_timeout_s:
            return (
                f"no video frame arrived for {live.frame_timeout_s:g} s (live.frame_timeout_s): the browser stopped"
                " sending (its camera stopped, or the network dropped)"
            ), 0.0
        return None, min(live.frame_timeout_s - quiet, live.max_seconds - elapsed)

    # -- control --------------------------------------------------------------
    def set_sources(self, sources: Sequence[ImageInput], inputs: Sequence[AuditInput] = ()) -> int:
        """Swap in new source photos from the next frame (on a worker thread);
        returns how many.  ``inputs``: the photos as the audit line names them.

        Raises:
            NoFaceError: a photo has no face; the previous source is kept.
        """
        try:
            self.live.set_sources(sources)
        except NoFaceError as exc:
            raise NoFaceError(f"{exc}; the previous source is kept", role=exc.role, path=exc.path) from None
        self.inputs.extend(inputs)
        return len(self.live.sources)

    def view(self) -> StatsView:
        return self.stats.view()

    async def close(self, reason: str) -> None:
        """End the session (once; later calls wait for the first): the input
        ends, the session's thread finishes, the connection closes, then ``on_end``."""
        if self._closed is not None:
            await asyncio.shield(self._closed)
            return
        self._closed = self.loop.create_future()
        self.end_reason = reason
        self.source.end()
        self.live.stop()
        self.sync.video_ended = True
        self._progress.set()
        if self.audio_back is not None:
            self.audio_back.end()
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()
        try:
            if self.pc is not None:
                await self.pc.close()
        except Exception as exc:  # noqa: BLE001 - the session's thread is still joined and its models given back
            log.warning("live session %s: closing the connection failed: %s", self.id, exc)
        finally:
            if self._thread is not None:
                await asyncio.to_thread(self._thread.join)
            self.handoff.close()
            try:
                self.on_end(self)
            finally:
                self._closed.set_result(None)


async def _drain(track: MediaStreamTrack) -> None:
    try:
        while True:
            await track.recv()
    except MediaStreamError:
        return
