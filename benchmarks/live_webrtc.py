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

With ``--audio`` each peer also sends a microphone track: silence with a
20 ms burst of tone at every whole second m of the camera's clock (the frames
whose counter is a multiple of 15 are captured at the same moments), its
pitch 600 + 100 * (m mod 10) Hz, so that a burst the server dropped does not
shift the others.  The
server sends it back held for the swapped video; the A/V offset is, for each
burst that comes back, its delay (sent to received) minus the delay of the
swapped frame captured nearest to it: positive when the sound comes later
than the picture.

    .venv/bin/python benchmarks/live_webrtc.py [--data ../shared/data/faces] [--seconds 8] [--counts 1,2,3]
        [--audio] [--out report/live_webrtc.json]
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
#: the microphone: 48 kHz mono, 20 ms frames, a burst of tone at every whole second (its pitch says which)
RATE, SAMPLES = 48_000, 960


def burst_hz(second: int) -> int:
    return 600 + 100 * (second % 10)


def _clock(shared: dict[str, float]) -> float:
    """The moment the peer's tracks count from (set by the first one that asks)."""
    return shared.setdefault("began", time.monotonic())


def make_microphone(shared: dict[str, float]):
    """An aiortc audio track, paced on ``shared``'s clock: silence, and a burst
    of tone in the 20 ms frame that starts at every whole second."""
    import av
    from aiortc import MediaStreamTrack

    per_second = RATE // SAMPLES
    n = np.arange(SAMPLES)

    class Microphone(MediaStreamTrack):
        kind = "audio"

        def __init__(self) -> None:
            super().__init__()
            self.number = -1

        async def recv(self):
            self.number += 1
            began = _clock(shared)
            await asyncio.sleep(max(0.0, began + self.number * SAMPLES / RATE - time.monotonic()))
            second, rest = divmod(self.number, per_second)
            tone = 12000 * np.sin(2 * np.pi * burst_hz(second) * n / RATE)
            samples = tone.astype(np.int16) if rest == 0 else np.zeros(SAMPLES, np.int16)
            frame = av.AudioFrame.from_ndarray(samples[None, :], format="s16", layout="mono")
            frame.sample_rate, frame.pts, frame.time_base = RATE, self.number * SAMPLES, Fraction(1, RATE)
            return frame

    return Microphone()


def av_offsets(video: list[tuple[int, float]], bursts: list[tuple[int, float]], began: float) -> list[float]:
    """For each burst (second m, received at a time), its delay minus the delay
    of the received swapped frame captured nearest to second m; ``video``:
    (counter, received)."""
    if not video or not bursts:
        return []
    numbers = np.array([n for n, _ in video])
    delays = np.array([t - (began + n / FPS) for n, t in video])
    offsets = []
    for second, received in bursts:
        nearest = int(np.argmin(np.abs(numbers / FPS - second)))
        if abs(numbers[nearest] / FPS - second) <= 1 / FPS:
            offsets.append((received - (began + second)) - float(delays[nearest]))
    return offsets


def _bursts(sound: list[tuple[float, np.ndarray]]) -> list[tuple[int, float]]:
    """Each burst that came back, ``(second, received)``: a loud frame after a
    quiet one, its second told by its pitch (mod 10) and the order they came in;
    ``sound``: (received, mono samples)."""
    found: list[tuple[int, float]] = []
    quiet = True
    for received, samples in sound:
        loud = float(np.abs(samples).max()) > 0.1 * 32768
        if loud and quiet:
            spectrum = np.abs(np.fft.rfft(samples - samples.mean()))
            pitch = float(np.fft.rfftfreq(len(samples), 1 / RATE)[int(np.argmax(spectrum))])
            code = int(round((pitch - 600) / 100)) % 10
            second = code if not found else found[-1][0] + 1 + (code - found[-1][0] - 1) % 10
            found.append((second, received))
        quiet = not loud
    return found


def make_camera(frames: list[np.ndarray], sent: dict[int, float], shared: dict[str, float] | None = None):
    """An aiortc video track of ``frames`` (looped, counter drawn) at :data:`FPS`
    (on ``shared``'s clock when given, so that it keeps time with a microphone)."""
    import av
    from aiortc import MediaStreamTrack

    class Camera(MediaStreamTrack):
        kind = "video"

        def __init__(self) -> None:
            super().__init__()
            self.number = 0
            self.began = time.monotonic() if shared is None else None

        async def recv(self):
            self.number += 1
            began = self.began if self.began is not None else _clock(shared or {})
            await asyncio.sleep(max(0.0, began + self.number / FPS - time.monotonic()))
            pixels = draw_counter(frames[self.number % len(frames)], self.number)
            frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
            frame.pts, frame.time_base = self.number * (90_000 // FPS), Fraction(1, 90_000)
            sent[self.number] = time.monotonic()
            return frame

    return Camera()


async def one_stream(http, photo: bytes, frames: list[np.ndarray], seconds: float, audio: bool = False) -> dict:
    """One peer for ``WARM_UP_S + seconds``; its figures."""
    from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
    from aiortc.mediastreams import MediaStreamError

    sent: dict[int, float] = {}
    got: list[tuple[float, float]] = []  # (when, latency)
    video: list[tuple[int, float]] = []  # (counter, when) of every swapped frame back
    sound: list[tuple[float, np.ndarray]] = []  # (when, mono samples) of every audio frame back
    shared: dict[str, float] = {}
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    pc.addTrack(make_camera(frames, sent, shared if audio else None))
    if audio:
        pc.addTrack(make_microphone(shared))

    async def take(track) -> None:
        try:
            while True:
                frame = await track.recv()
                now = time.monotonic()
                if track.kind == "audio":
                    samples = frame.to_ndarray().astype(np.float32).reshape(-1, len(frame.layout.channels))
                    sound.append((now, samples.mean(axis=1)))
                    continue
                number = read_counter(frame.to_ndarray(format="rgb24"))
                video.append((number, now))
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
    figures: dict = {}
    if audio:
        offsets = av_offsets(video, _bursts(sound), shared["began"])[int(WARM_UP_S) :]  # after the warm-up
        figures = {
            "av_offset_ms": [round(o * 1000, 1) for o in offsets],
            "av_offset_p50_ms": round(float(np.median(offsets)) * 1000, 1) if offsets else None,
            "audio_hold_p50_ms": server.get("audio_hold_p50_ms"),
            "audio_frames": server.get("audio_frames"),
            "audio_dropped": server.get("audio_dropped"),
        }
    return {
        "fps_back": round(len(steady) / seconds, 2),
        "glass_to_glass_p50_ms": round(float(p50), 1),
        "glass_to_glass_p95_ms": round(float(p95), 1),
        "server_p50_ms": server["latency_p50_ms"],
        "server_p95_ms": server["latency_p95_ms"],
        "dropped_share": round(server["dropped"] / max(server["received"], 1), 3),
        "swapped": server["swapped"],
        **figures,
    }


async def run_count(
    base: str, count: int, photo: bytes, frames: list[np.ndarray], seconds: float, audio: bool = False
) -> dict:
    import httpx

    async with httpx.AsyncClient(base_url=base, timeout=120) as http:
        streams = await asyncio.gather(*(one_stream(http, photo, frames, seconds, audio) for _ in range(count)))
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
    parser.add_argument("--audio", action="store_true", help="each peer sends a microphone too: the A/V offset")
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
                run = asyncio.run(run_count(server.url, count, photo, frames[::2], args.seconds, args.audio))
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
