"""Live swap figures over WebRTC (the browser path, ``POST /v1/live``): with
1, 2 and 3 sessions at once on one server, each fed 854x480 frames (the
talking-head clip centred on grey, one face) at 15 fps by an aiortc peer that
stands in for the browser, the swapped video read back on the same peer
connection.

Glass-to-glass latency runs from the peer's camera track handing a frame to
its encoder to the peer decoding the swapped frame (a frame counter drawn in
the top-left corner, as ``benchmarks/live.py`` does): both VP8 encodes and
decodes and the swap.  The server's latency runs from a frame arriving
decoded to its swapped frame being ready (``GET /v1/live/{id}``).  The peers,
their codecs and the server share this machine's cores; the server runs as
its own ``faceweave serve`` process, and its CPU time per swapped frame
(its VP8 decoding and encoding, the swap, the models loading for a session
that starts) is reported too: two cores' worth of it is what an idle node
could swap per second.

    .venv/bin/python benchmarks/live_webrtc.py [--data ../shared/data/faces] [--seconds 8] [--counts 1,2,3]
        [--out report/live_webrtc.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from fractions import Fraction
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live import DEFAULT_DATA, SIZES, SOURCE, TALK, WARM_UP_S, canvas_frames, draw_counter, read_counter  # noqa: E402

FPS = 15
COUNTS = (1, 2, 3)


def make_camera(frames: list[np.ndarray], sent: dict[int, float]):
    """An aiortc video track of ``frames`` (looped, counter drawn) at :data:`FPS`."""
    import av
    from aiortc import MediaStreamTrack

    class Camera(MediaStreamTrack):
        kind = "video"

        def __init__(self) -> None:
            super().__init__()
            self.number = 0
            self.began = time.monotonic()

        async def recv(self):
            self.number += 1
            await asyncio.sleep(max(0.0, self.began + self.number / FPS - time.monotonic()))
            pixels = draw_counter(frames[self.number % len(frames)], self.number)
            frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
            frame.pts, frame.time_base = self.number * (90_000 // FPS), Fraction(1, 90_000)
            sent[self.number] = time.monotonic()
            return frame

    return Camera()


async def one_stream(http, photo: bytes, frames: list[np.ndarray], seconds: float) -> dict:
    """One peer for ``WARM_UP_S + seconds``; its figures."""
    from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
    from aiortc.mediastreams import MediaStreamError

    sent: dict[int, float] = {}
    got: list[tuple[float, float]] = []  # (when, latency)
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    pc.addTrack(make_camera(frames, sent))

    async def take(track) -> None:
        try:
            while True:
                frame = await track.recv()
                now = time.monotonic()
                number = read_counter(frame.to_ndarray(format="rgb24"))
                if number in sent:
                    got.append((now, now - sent.pop(number)))
        except MediaStreamError:
            return

    pc.on("track", lambda track: asyncio.ensure_future(take(track)))
    await pc.setLocalDescription(await pc.createOffer())
    response = await http.post("/v1/live", files={"source": ("s.jpg", photo)}, data={"sdp": pc.localDescription.sdp})
    response.raise_for_status()
    answer = response.json()
    await pc.setRemoteDescription(RTCSessionDescription(sdp=answer["sdp"], type="answer"))
    began = time.monotonic()
    await asyncio.sleep(WARM_UP_S + seconds)
    server = (await http.get(answer["links"]["self"])).json()
    await http.delete(answer["links"]["self"])
    await pc.close()
    steady = [(t, lat) for t, lat in got if t >= began + WARM_UP_S]
    latencies = [lat * 1000 for _, lat in steady] or [float("nan")]
    p50, p95 = np.percentile(latencies, [50, 95])
    return {
        "fps_back": round(len(steady) / seconds, 2),
        "glass_to_glass_p50_ms": round(float(p50), 1),
        "glass_to_glass_p95_ms": round(float(p95), 1),
        "server_p50_ms": server["latency_p50_ms"],
        "server_p95_ms": server["latency_p95_ms"],
        "dropped_share": round(server["dropped"] / max(server["received"], 1), 3),
        "swapped": server["swapped"],
    }


async def run_count(base: str, count: int, photo: bytes, frames: list[np.ndarray], seconds: float) -> dict:
    import httpx

    async with httpx.AsyncClient(base_url=base, timeout=120) as http:
        streams = await asyncio.gather(*(one_stream(http, photo, frames, seconds) for _ in range(count)))
    return {
        "streams": count,
        "fps_per_stream": round(statistics.mean(s["fps_back"] for s in streams), 2),
        "glass_to_glass_p50_ms": round(statistics.median(s["glass_to_glass_p50_ms"] for s in streams), 1),
        "glass_to_glass_p95_ms": max(s["glass_to_glass_p95_ms"] for s in streams),
        "server_p95_ms": max(s["server_p95_ms"] or float("nan") for s in streams),
        "dropped_share": round(statistics.mean(s["dropped_share"] for s in streams), 3),
        "per_stream": streams,
    }


class Server:
    """``faceweave serve`` in its own process (so that its CPU time can be
    read apart from the peers'), with ``sessions`` live places."""

    def __init__(self, storage: Path, sessions: int) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        env = {
            **os.environ,
            "FACEWEAVE_SYNC_SLOTS": "0",
            "FACEWEAVE_LIVE__SESSIONS": str(sessions),
            "FACEWEAVE_LIMITS__RATE_PER_SECOND": "0",
        }
        command = [sys.executable, "-m", "faceweave.cli", "serve", "--port", str(self.port), "--workers", "0"]
        self.process = subprocess.Popen(
            [*command, "--storage", str(storage), "--log-level", "warning"], env=env, stdout=subprocess.DEVNULL
        )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while not self._ready():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("faceweave serve did not start")
            time.sleep(0.2)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/readyz", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def cpu_s(self) -> float:
        """CPU seconds the server has used (user + system, every thread)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--counts", default=",".join(map(str, COUNTS)))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",") if c]
    frames, _ = canvas_frames(args.data / TALK, SIZES["480p"])
    photo = (args.data / SOURCE).read_bytes()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp), max(counts))
        try:
            for count in counts:
                began = server.cpu_s()
                run = asyncio.run(run_count(server.url, count, photo, frames[::2], args.seconds))
                swapped = sum(s["swapped"] for s in run["per_stream"])
                run["server_cpu_ms_per_frame"] = round((server.cpu_s() - began) * 1000 / max(swapped, 1), 1)
                runs.append(run)
                print(json.dumps({k: v for k, v in run.items() if k != "per_stream"}), flush=True)
        finally:
            server.stop()
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"fps_in": FPS, "frame": "854x480", "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
