"""Keeping the microphone's sound with the swapped video (:class:`AvSync`).

The browser's audio is relayed back on the same connection as the swapped
video, but the video comes back later than it went in (the swap's latency),
and aiortc's RTCP sender reports map each stream's newest RTP time to the
moment it is sent, so the browser lines the two streams up by when they were
sent.  So each audio frame is sent as long after its arrival as the swapped
video's frames are sent after theirs (:attr:`AvSync.hold_s`: the median over
the last :data:`_LATENCIES` sent frames, both on this server's clock).  The
sound goes out at its own even pace, 20 ms a frame: released in bursts as
each video frame went, as it was at first, it made the browser's audio jitter
buffer grow and its lip sync fall short, and Chromium played the sound 200-300
ms after the picture (benchmarks/live_browser_av.py; README, the Live page's Audio).
(The swapped video keeps its camera frame's arrival as its time stamp, so
its pace is the camera's as it reached the server.)  Before the first
swapped frame is sent a frame waits up to :data:`MAX_HOLD_S` (the swap is
warming up: sound then leads); it goes at once when the video has ended.

When the node is overloaded, aiortc's sender can fall behind the 50 audio
frames a second (each one is a few hops between the event loop and its
encoder thread, which the swap threads slow down); the sound would then lag
more and more.  So, as with the video's stale frames, the oldest due frames
past :data:`BACKLOG` are dropped (:meth:`AvSync.stale_audio`): the sound
skips but stays with the picture.

Pure bookkeeping, no aiortc: everything here runs on the server's event loop."""

from __future__ import annotations

import statistics
from collections import OrderedDict, deque
from collections.abc import Sequence

#: the longest an audio frame waits for the swapped video, in seconds
MAX_HOLD_S = 1.0
#: camera frames whose arrival is kept for their swapped frame (frames in flight)
_KEPT = 256
#: the swapped frames whose send latency sets the audio's hold (about two seconds of video)
_LATENCIES = 30
#: the most audio frames let go and still waiting for the sender (15 x 20 ms: the sound a few
#: dropped video frames release at once); older ones are dropped
BACKLOG = 15


class AvSync:
    """The arrivals of the camera's frames and how far the swapped video has been sent."""

    def __init__(self) -> None:
        self._frames: OrderedDict[float, float] = OrderedDict()
        self._latencies: deque[float] = deque(maxlen=_LATENCIES)
        #: when the newest camera frame whose swapped frame was sent arrived (server clock), or ``None``
        self.video_at: float | None = None
        self.video_ended = False

    @property
    def hold_s(self) -> float | None:
        """How long after its arrival an audio frame goes: the median time from a
        camera frame's arrival to its swapped frame being sent, over the last
        :data:`_LATENCIES` sent (``None`` before the first)."""
        return statistics.median(self._latencies) if self._latencies else None

    def camera_frame(self, t: float, arrived: float) -> None:
        """Note the camera frame of stream time ``t`` (the session's own), arrived at
        ``arrived`` (server clock, seconds)."""
        self._frames[t] = arrived
        while len(self._frames) > _KEPT:
            self._frames.popitem(last=False)

    def video_sent(self, t: float, now: float) -> None:
        """The swapped frame of camera time ``t`` is being sent ``now`` (server
        clock): note how far the video has got, and how late it is."""
        arrived = self._frames.pop(t, None)
        while self._frames and next(iter(self._frames)) < t:
            self._frames.popitem(last=False)  # older frames were dropped as stale: they are never sent
        if arrived is not None:
            self.video_at = arrived if self.video_at is None else max(self.video_at, arrived)
            self._latencies.append(max(0.0, now - arrived))

    def due_at(self, arrived: float) -> float:
        """When an audio frame that arrived at ``arrived`` goes (server clock),
        as far as is known now: :attr:`hold_s` after it, at most :data:`MAX_HOLD_S`."""
        hold = self.hold_s
        return arrived + (MAX_HOLD_S if hold is None else min(hold, MAX_HOLD_S))

    def audio_due(self, arrived: float, now: float) -> bool:
        """Whether an audio frame that arrived at ``arrived`` goes out ``now`` (server clock)."""
        return self.video_ended or now >= self.due_at(arrived)

    def stale_audio(self, arrivals: Sequence[float], now: float) -> int:
        """How many of the oldest held audio frames (their ``arrivals``, oldest
        first) to drop: those past :data:`BACKLOG` among the ones due ``now``."""
        due = 0
        for arrived in arrivals:  # arrival order: the due ones come first
            if not self.audio_due(arrived, now):
                break
            due += 1
        return max(0, due - BACKLOG)
