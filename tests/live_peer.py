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
from pathlib import Path

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


def stalling_camera(frames: list[np.ndarray], sends: int, fps: int = 15):
    """A camera track that sends ``sends`` frames, then none (its connection stays up)."""
    import av
    from aiortc import MediaStreamTrack

    class Stalling(MediaStreamTrack):
        kind = "video"

        def __init__(self) -> None:
            super().__init__()
            self.sent = 0
            self.stalled = asyncio.Event()

        async def recv(self):
            if self.sent >= sends:
                self.stalled.set()
                await asyncio.Event().wait()  # never: the sender waits on the camera for good
            await asyncio.sleep(1 / fps)
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(frames[self.sent % len(frames)]), format="rgb24")
            frame.pts, frame.time_base = self.sent * (90_000 // fps), Fraction(1, 90_000)
            self.sent += 1
            return frame

    return Stalling()


#: the test tone a peer's microphone plays, and its sample rate
TONE_HZ, AUDIO_RATE = 440, 48_000


def microphone_track(samples: int = 960):
    """An aiortc audio track that plays a 440 Hz tone (mono, 16-bit, 20 ms frames) in real time."""
    import av
    from aiortc import MediaStreamTrack

    class Microphone(MediaStreamTrack):
        kind = "audio"

        def __init__(self) -> None:
            super().__init__()
            self.sent = 0

        async def recv(self):
            await asyncio.sleep(samples / AUDIO_RATE)
            n = np.arange(self.sent * samples, (self.sent + 1) * samples)
            tone = (8000 * np.sin(2 * np.pi * TONE_HZ * n / AUDIO_RATE)).astype(np.int16)
            frame = av.AudioFrame.from_ndarray(tone[None, :], format="s16", layout="mono")
            frame.sample_rate, frame.pts, frame.time_base = AUDIO_RATE, self.sent * samples, Fraction(1, AUDIO_RATE)
            self.sent += 1
            return frame

    return Microphone()


async def offer_sdp(
    *,
    video: str | None = "sendrecv",
    audio: bool = False,
    frames: list[np.ndarray] | None = None,
    ice_servers: list | None = None,
    relay: bool = False,
):
    """A new client peer connection and its offer's SDP (ICE gathered):
    ``video``: ``sendrecv`` (a camera of ``frames``), ``recvonly`` or ``None``;
    ``audio``: a microphone playing a tone too; ``ice_servers``: aiortc
    ``RTCIceServer`` objects (none: host candidates only), ``relay``: TURN relay candidates only."""
    from aiortc import RTCConfiguration, RTCIceTransportPolicy, RTCPeerConnection

    policy = RTCIceTransportPolicy.RELAY if relay else RTCIceTransportPolicy.ALL
    pc = RTCPeerConnection(RTCConfiguration(iceServers=ice_servers or [], iceTransportPolicy=policy))
    if video == "sendrecv":
        pc.addTrack(camera_track(frames or [np.zeros((240, 320, 3), np.uint8)]))
    elif video is not None:
        pc.addTransceiver("video", direction=video)
    if audio:
        pc.addTrack(microphone_track())
    await pc.setLocalDescription(await pc.createOffer())
    return pc, pc.localDescription.sdp


class Received:
    """What a client peer gets back, filled by :meth:`take`: the swapped
    frames (RGB) and the audio frames (mono float samples) with the time each came."""

    def __init__(self) -> None:
        self.frames: list[np.ndarray] = []
        self.sound: list[np.ndarray] = []
        self.kinds: list[str] = []

    def on_track(self, track) -> None:
        """The peer connection's ``track`` handler."""
        self.kinds.append(track.kind)
        asyncio.ensure_future(self.take(track))

    async def take(self, track) -> None:
        from aiortc.mediastreams import MediaStreamError

        try:
            while True:
                frame = await track.recv()
                if track.kind == "audio":
                    samples = frame.to_ndarray().astype(np.float32)
                    channels = len(frame.layout.channels)
                    self.sound.append(
                        samples.reshape(-1, channels).mean(axis=1) if frame.format.is_packed else samples[0]
                    )
                else:
                    self.frames.append(frame.to_ndarray(format="rgb24"))
        except MediaStreamError:
            return


@contextmanager
def turn_server(folder, secret: str) -> Iterator[int]:
    """coturn (Debian's ``turnserver``) on loopback with ``use-auth-secret``
    (the TURN REST scheme) and ``secret``, relaying to loopback peers; yields
    its port.  Skips the test when coturn is not installed."""
    import shutil
    import subprocess

    import pytest

    binary = shutil.which("turnserver")
    if binary is None:
        pytest.skip("coturn is not installed (Debian package coturn, in make system-deps)")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    low = 20000 + (port * 7) % 40000  # a relay range of its own, away from the listening port
    command = [
        binary, "-n", "--listening-ip=127.0.0.1", f"--listening-port={port}", "--relay-ip=127.0.0.1",
        f"--min-port={low}", f"--max-port={low + 200}", "--use-auth-secret", f"--static-auth-secret={secret}",
        "--realm=faceweave.test", "--no-tls", "--no-dtls", "--no-cli", "--allow-loopback-peers", "--fingerprint",
        f"--log-file={folder}/turnserver.log", "--simple-log", f"--pidfile={folder}/turnserver.pid",
        f"--userdb={folder}/turndb",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def listening() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            return process.poll() is not None  # ended: reported below

    try:
        wait_for(listening, what="coturn to listen", every_s=0.05)
        if process.poll() is not None:
            logs = " ".join(p.read_text()[-2000:] for p in Path(folder).glob("turnserver*.log"))
            raise RuntimeError(f"coturn did not start: {logs}")
        yield port
    finally:
        process.terminate()
        process.wait(10)
