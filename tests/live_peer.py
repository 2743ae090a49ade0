"""Helpers for the WebRTC live tests: a real uvicorn server on loopback, and
a peer made with aiortc that stands in for a browser (a camera track of
given frames, the swapped frames it gets back kept)."""

from __future__ import annotations

import asyncio
import socket
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction

import numpy as np
from tests.service_fixtures import wait_for


@contextmanager
def serving(config) -> Iterator[str]:
    """A uvicorn server of the app for ``config`` on a free loopback port,
    ready; yields its base URL."""
    import uvicorn

    from faceweave.service.app import create_app

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(config), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="live-test-server", daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            with urllib.request.urlopen(base + "/readyz", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    try:
        wait_for(ready, what="the server to be ready", every_s=0.1)
        yield base
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def camera_track(frames: list[np.ndarray], fps: int = 15):
    """An aiortc video track that plays ``frames`` (looped) at ``fps``."""
    import av
    from aiortc import MediaStreamTrack

    class Camera(MediaStreamTrack):
        kind = "video"

        def __init__(self) -> None:
            super().__init__()
            self.sent = 0

        async def recv(self):
            await asyncio.sleep(1 / fps)
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(frames[self.sent % len(frames)]), format="rgb24")
            frame.pts, frame.time_base = self.sent * (90_000 // fps), Fraction(1, 90_000)
            self.sent += 1
            return frame

    return Camera()


async def offer_sdp(*, video: str | None = "sendrecv", audio: bool = False, frames: list[np.ndarray] | None = None):
    """A new client peer connection and its offer's SDP (ICE gathered):
    ``video``: ``sendrecv`` (a camera of ``frames``), ``recvonly`` or ``None``."""
    from aiortc import RTCConfiguration, RTCPeerConnection

    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    if video == "sendrecv":
        pc.addTrack(camera_track(frames or [np.zeros((240, 320, 3), np.uint8)]))
    elif video is not None:
        pc.addTransceiver("video", direction=video)
    if audio:
        pc.addTransceiver("audio", direction="sendrecv")
    await pc.setLocalDescription(await pc.createOffer())
    return pc, pc.localDescription.sdp


class Received:
    """The swapped frames a client peer gets back (RGB), filled by :meth:`take`."""

    def __init__(self) -> None:
        self.frames: list[np.ndarray] = []

    async def take(self, track) -> None:
        from aiortc.mediastreams import MediaStreamError

        try:
            while True:
                frame = await track.recv()
                self.frames.append(frame.to_ndarray(format="rgb24"))
        except MediaStreamError:
            return
