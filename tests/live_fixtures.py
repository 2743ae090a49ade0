"""Helpers for the live tests: a stream pushed in real time to a loopback
URL by PyAV's muxers (the camera or server at the other end of the wire)."""

from __future__ import annotations

import socket
import threading
import time
from fractions import Fraction
from pathlib import Path

import av
import numpy as np


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def clip_frames(path: Path, seconds: float) -> tuple[list[np.ndarray], Fraction]:
    """The first ``seconds`` of a video as RGB frames, and its frame rate."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        rate = Fraction(stream.average_rate or 30)
        frames = []
        for frame in container.decode(stream):
            frames.append(frame.to_ndarray(format="rgb24"))
            if len(frames) >= seconds * rate:
                break
    return frames, rate


def gradient_frames(n: int, width: int = 160, height: int = 120) -> list[np.ndarray]:
    """``n`` frames that differ (a moving gradient)."""
    x = np.arange(width, dtype=np.int32)[None, :, None]
    return [np.broadcast_to((x + 7 * i) % 256, (height, width, 3)).astype(np.uint8) for i in range(n)]


class StreamPusher(threading.Thread):
    """Push ``frames`` (looped) to ``url`` as MPEG-TS (H.264, a keyframe
    every 10 frames, and an AAC tone when ``audio``) in real time:
    ``schedule`` is ``[(push_s, pause_s), ...]``; after the last pause, or
    :meth:`stop`, the muxer is closed and nothing more is sent.  ``muxer``:
    another FFmpeg muxer (``flv`` for RTMP)."""

    def __init__(
        self,
        url: str,
        frames: list[np.ndarray],
        rate: Fraction,
        *,
        schedule: list[tuple[float, float]],
        audio: bool = True,
        muxer: str = "mpegts",
    ) -> None:
        super().__init__(name="test-pusher", daemon=True)
        self.url, self.frames, self.rate, self.schedule = url, frames, Fraction(rate), schedule
        self.audio, self.muxer = audio, muxer
        self.halt = threading.Event()
        self.sent = 0
        self.error: BaseException | None = None

    def stop(self) -> None:
        self.halt.set()
        self.join()

    def run(self) -> None:
        try:
            self._push()
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            self.error = exc

    def _push(self) -> None:
        h, w = self.frames[0].shape[:2]
        with av.open(self.url, "w", format=self.muxer) as out:
            video = out.add_stream(
                "libx264", rate=self.rate, options={"preset": "ultrafast", "tune": "zerolatency", "g": "10"}
            )
            video.width, video.height, video.pix_fmt = w, h, "yuv420p"
            sound = out.add_stream("aac", rate=48_000, layout="stereo") if self.audio else None
            began, clock, samples = time.monotonic(), 0.0, 0
            for push_s, pause_s in self.schedule:
                end = clock + push_s
                while clock < end and not self.halt.is_set():
                    samples = self._send(out, video, sound, clock, samples)
                    clock += 1 / float(self.rate)
                    self.halt.wait(max(0.0, began + clock - time.monotonic()))
                if self.halt.wait(pause_s):
                    break
                # the stream's clock goes on through the pause, as a camera's does
                clock += pause_s
                samples += round(pause_s * 48_000)

    def _send(self, out, video, sound, clock: float, samples: int) -> int:
        frame = av.VideoFrame.from_ndarray(self.frames[self.sent % len(self.frames)], format="rgb24")
        frame.pts, frame.time_base = round(clock * 1000), Fraction(1, 1000)
        out.mux(video.encode(frame))
        self.sent += 1
        while sound is not None and samples < (clock + 1 / float(self.rate)) * 48_000:
            t = (samples + np.arange(1024)) / 48_000
            tone = (0.2 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
            chunk = av.AudioFrame.from_ndarray(np.stack([tone, tone]), format="fltp", layout="stereo")
            chunk.sample_rate, chunk.pts, chunk.time_base = 48_000, samples, Fraction(1, 48_000)
            out.mux(sound.encode(chunk))
            samples += 1024
        return samples
