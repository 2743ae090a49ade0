"""What one live session measures (:class:`LiveStats`), thread-safe: the
browser's frames arrive on the event loop, swapped frames are written on the
session's encoder thread, the figures are read by the routes.

Each frame that arrives gets a time (seconds since the first, strictly
increasing: the :class:`~faceweave.live.endpoints.PushSource` keeps it) and
an index; a swapped frame is matched to its arrival by that time, so its
latency is from arriving here to being ready to send back, and the indexes
skipped between two swapped frames are the stale frames dropped."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass

import numpy as np

from faceweave.service.metrics import Metrics

#: arrivals held for matching (frames in flight; older ones were dropped)
_HELD = 256
#: the newest latencies kept for the percentiles
_KEPT = 256
#: the window of the frame rate, in seconds
FPS_WINDOW_S = 2.0


@dataclass(frozen=True)
class StatsView:
    """A session's figures: frames received from the browser, swapped (and
    handed to the outgoing track), dropped (stale, never swapped); ``fps``:
    swapped frames per second over the last :data:`FPS_WINDOW_S` seconds;
    latencies in milliseconds over the newest 256 frames (``None``: none yet)."""

    received: int
    swapped: int
    dropped: int
    fps: float
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    seconds: float
    #: the microphone's audio frames sent back (0: the offer sent no audio)
    audio_frames: int = 0
    #: how long they were held for the swapped video, median over the newest 256, ms (``None``: none yet)
    audio_hold_p50_ms: float | None = None
    #: audio frames dropped because the sender fell behind (an overloaded node)
    audio_dropped: int = 0


class LiveStats:
    """Counts and latencies of one session, also counted into ``metrics``."""

    def __init__(self, metrics: Metrics | None = None) -> None:
        self.metrics = metrics
        self._lock = threading.Lock()
        self._began = time.monotonic()
        self._first: float | None = None
        self._last_t = -1.0
        self._arrivals: OrderedDict[float, tuple[float, int]] = OrderedDict()
        self._latencies: deque[float] = deque(maxlen=_KEPT)
        self._holds: deque[float] = deque(maxlen=_KEPT)
        self._writes: deque[float] = deque(maxlen=256)
        self._last_index = -1
        self.received = self.swapped = self.dropped = self.audio = self.audio_dropped = 0

    def arrived(self) -> float:
        """Note a frame arriving now; returns its time (seconds since the first)."""
        now = time.monotonic()
        with self._lock:
            self._first = now if self._first is None else self._first
            t = max(now - self._first, self._last_t + 0.001)
            self._last_t = t
            self._arrivals[t] = (now, self.received)
            while len(self._arrivals) > _HELD:
                self._arrivals.popitem(last=False)
            self.received += 1
        if self.metrics is not None:
            self.metrics.live_frames.labels(kind="received").inc()
        return t

    def swapped_frame(self, t: float) -> None:
        """Note the swapped frame of the frame that arrived at time ``t``."""
        now = time.monotonic()
        with self._lock:
            arrival = self._arrivals.pop(t, None)
            self.swapped += 1
            self._writes.append(now)
            latency = gap = None
            if arrival is not None:
                latency = now - arrival[0]
                self._latencies.append(latency * 1000.0)
                gap = max(0, arrival[1] - self._last_index - 1)
                self._last_index = arrival[1]
                self.dropped += gap
        if self.metrics is not None:
            self.metrics.live_frames.labels(kind="swapped").inc()
            if gap:
                self.metrics.live_frames.labels(kind="dropped").inc(gap)
            if latency is not None:
                self.metrics.live_latency.observe(latency)

    def audio_frame(self, held_s: float, dropped: int = 0) -> None:
        """Note an audio frame sent back after being held ``held_s`` seconds,
        and ``dropped`` older ones dropped before it (the sender fell behind)."""
        with self._lock:
            self.audio += 1
            self.audio_dropped += dropped
            self._holds.append(held_s * 1000.0)
        if self.metrics is not None:
            self.metrics.live_frames.labels(kind="audio").inc()
            if dropped:
                self.metrics.live_frames.labels(kind="audio_dropped").inc(dropped)

    def fps(self, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        with self._lock:
            recent = [w for w in self._writes if now - w <= FPS_WINDOW_S]
        if len(recent) < 2:
            return 0.0
        return (len(recent) - 1) / max(recent[-1] - recent[0], 1e-6)

    def view(self) -> StatsView:
        fps = self.fps()
        with self._lock:
            latencies = list(self._latencies)
            counts = (self.received, self.swapped, self.dropped)
            audio, holds, audio_dropped = self.audio, list(self._holds), self.audio_dropped
        p50 = p95 = None
        if latencies:
            p50, p95 = (float(v) for v in np.percentile(np.asarray(latencies), [50, 95]))
        return StatsView(
            *counts,
            fps=round(fps, 2),
            latency_p50_ms=None if p50 is None else round(p50, 1),
            latency_p95_ms=None if p95 is None else round(p95, 1),
            seconds=round(time.monotonic() - self._began, 2),
            audio_frames=audio,
            audio_hold_p50_ms=round(float(np.median(holds)), 1) if holds else None,
            audio_dropped=audio_dropped,
        )
