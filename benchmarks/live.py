"""Live swap figures: glass-to-glass latency, sustained frame rate and the
share of frames dropped, for 480p and 720p streams with one face, with 1, 2
and 4 streams at once; then how many 480p streams at 15 fps one node holds
with a p95 latency under 200 ms.

Each stream is a real ``faceweave live`` process: its input is pushed to it
over UDP on loopback (MPEG-TS, H.264) by a feeder that draws a frame counter
into the top-left corner of each frame and notes when it encoded the frame;
its output is pushed back over UDP, decoded, and the counter read again:
the latency is the time from the feeder's encoding to the decoded output
frame (the camera's and the viewer's codecs included, the network none).
The feeders and readers run in this process, on the same cores.  Frames are
the talking-head clip centred on a grey 854x480 or 1280x720 canvas.

    .venv/bin/python benchmarks/live.py [--data ../shared/data/faces] [--seconds 10] [--out report/live.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path

import av
import av.error
import cv2
import numpy as np

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "faces"
SOURCE, TALK = "single/biden2.jpg", "video/lp_d18_talking_face.mp4"
SIZES = {"480p": (854, 480), "720p": (1280, 720)}
#: the frame counter: BITS blocks of BLOCK x BLOCK pixels along the top edge
BITS, BLOCK = 16, 16
#: seconds at the start of a run left out of the figures (models loading, first frames)
WARM_UP_S = 3.0


def draw_counter(pixels: np.ndarray, number: int) -> np.ndarray:
    out = pixels.copy()
    for bit in range(BITS):
        out[:BLOCK, bit * BLOCK : (bit + 1) * BLOCK] = 255 if number >> bit & 1 else 0
    return out


def read_counter(pixels: np.ndarray) -> int:
    blocks = pixels[2 : BLOCK - 2, : BITS * BLOCK].reshape(BLOCK - 4, BITS, BLOCK, 3)
    means = blocks[:, :, 2:-2].mean(axis=(0, 2, 3))
    return int(sum(1 << bit for bit in range(BITS) if means[bit] > 128))


def canvas_frames(video: Path, size: tuple[int, int], seconds: float = 3.0) -> tuple[list[np.ndarray], Fraction]:
    """The first seconds of the clip, scaled to the canvas height and centred on grey."""
    width, height = size
    frames = []
    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        rate = Fraction(stream.average_rate or 30)
        for frame in container.decode(stream):
            face = cv2.resize(frame.to_ndarray(format="rgb24"), (height, height), interpolation=cv2.INTER_AREA)
            canvas = np.full((height, width, 3), 128, np.uint8)
            x0 = (width - height) // 2
            canvas[:, x0 : x0 + height] = face
            frames.append(canvas)
            if len(frames) >= seconds * rate:
                break
    return frames, rate


def free_ports(count: int) -> list[int]:
    """``count`` different free UDP ports (all held until all are found)."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


#: the readers' UDP buffer (188-byte packets) and the packets' size on the wire
READ_OPTIONS = "?fifo_size=100000&overrun_nonfatal=1"
SEND_OPTIONS = "?pkt_size=1316"


class Feeder(threading.Thread):
    """The camera: frames with their counter, pushed at ``fps`` in real time."""

    def __init__(self, url: str, frames: list[np.ndarray], rate: Fraction, fps: float) -> None:
        super().__init__(daemon=True)
        self.url, self.frames, self.rate, self.fps = url, frames, rate, fps
        self.sent: dict[int, float] = {}
        self.halt = threading.Event()

    def run(self) -> None:
        with contextlib.suppress(av.error.FFmpegError):  # the session hung up: its --duration is over
            self._push()

    def _push(self) -> None:
        height, width = self.frames[0].shape[:2]
        whole = {"omit_video_pes_length": "0"}  # each frame's length stated: it is read as soon as it is in
        with av.open(self.url + SEND_OPTIONS, "w", format="mpegts", options=whole) as out:
            options = {"preset": "ultrafast", "tune": "zerolatency", "g": str(round(self.fps))}
            stream = out.add_stream("libx264", rate=Fraction(self.fps).limit_denominator(1000), options=options)
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            began, n = time.monotonic(), 0
            while not self.halt.is_set():
                source = self.frames[int(n * float(self.rate) / self.fps) % len(self.frames)]
                frame = av.VideoFrame.from_ndarray(draw_counter(source, n % (1 << BITS)), format="rgb24")
                frame.pts, frame.time_base = round(n * 1000 / self.fps), Fraction(1, 1000)
                self.sent[n % (1 << BITS)] = time.monotonic()
                out.mux(stream.encode(frame))
                n += 1
                self.halt.wait(max(0.0, began + n / self.fps - time.monotonic()))


class Catcher(threading.Thread):
    """The viewer: decodes the pushed output and reads each frame's counter."""

    def __init__(self, url: str, feeder: Feeder) -> None:
        super().__init__(daemon=True)
        self.url, self.feeder = url, feeder
        self.received: list[tuple[float, float]] = []  # (when, latency seconds)

    def run(self) -> None:
        options = {"analyzeduration": "500000"}
        try:
            with av.open(self.url + READ_OPTIONS, format="mpegts", options=options, timeout=(180.0, 4.0)) as container:
                container.streams.video[0].thread_type = "SLICE"  # frame threads would hold frames back
                last = -1  # frames damaged by a lost packet may read as any number
                for frame in container.decode(video=0):
                    now = time.monotonic()
                    number = read_counter(frame.to_ndarray(format="rgb24"))
                    sent = self.feeder.sent.get(number)
                    if sent is not None and 0 <= now - sent < 10 and 0 < number - last < 300:
                        self.received.append((now, now - sent))
                        last = number
        except av.error.FFmpegError:
            pass  # quiet for 4 s: the session ended


@dataclass(frozen=True)
class StreamFigures:
    """Glass-to-glass latency, frames per second read back, the session's
    drop share, and its own latency from decoding to writing."""

    latency_p50_ms: float
    latency_p95_ms: float
    fps: float
    dropped_share: float
    session_p50_ms: float | None = None
    session_p95_ms: float | None = None
    #: frames the session wrote (its whole run, warm-up included)
    frames_out: int = 0
    #: the session process's CPU milliseconds per frame read back after the
    #: warm-up (its start and model loading left out), or None
    steady_cpu_ms: float | None = None


class CpuWatch(threading.Thread):
    """Samples a process's CPU seconds (user + system, all its threads,
    from ``/proc``) every :data:`CPU_EVERY_S` until it ends: ``(when,
    seconds)`` on the feeders' clock."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.samples: list[tuple[float, float]] = []

    def run(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        while True:
            try:
                fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                return  # the process has ended
            if fields[0] == "Z":
                return
            self.samples.append((time.monotonic(), (int(fields[11]) + int(fields[12])) / tick))
            time.sleep(CPU_EVERY_S)


#: how often :class:`CpuWatch` samples
CPU_EVERY_S = 0.25


def steady_cpu_ms(watch: CpuWatch | None, steady: list[tuple[float, float]]) -> float | None:
    """The CPU milliseconds per frame read back between the first sample in
    the steady window and the last sample, or None when too little is there."""
    if watch is None or not steady:
        return None
    inside = [(t, cpu) for t, cpu in watch.samples if t >= steady[0][0]]
    if len(inside) < 2:
        return None
    (t0, c0), (t1, c1) = inside[0], inside[-1]
    frames = sum(1 for t, _ in steady if t0 <= t <= t1)
    return 1000.0 * (c1 - c0) / frames if frames else None


def figures(catcher: Catcher, report: dict, watch: CpuWatch | None = None) -> StreamFigures:
    inside = report.get("latency_p50_ms"), report.get("latency_p95_ms")
    written = int(report.get("frames_out", 0))
    if not catcher.received:
        return StreamFigures(float("nan"), float("nan"), 0.0, 1.0, *inside, frames_out=written)
    first = catcher.received[0][0]
    steady = [(t, lat) for t, lat in catcher.received if t >= first + WARM_UP_S] or catcher.received
    # the reader's MPEG-TS demuxer holds a frame until the next begins: the last ones come at the end
    gaps = [i for i in range(1, len(steady)) if steady[i][0] - steady[i - 1][0] > 1.0]
    steady = steady[: gaps[0]] if gaps else steady
    span = max(steady[-1][0] - steady[0][0], 1e-6)
    p50, p95 = np.percentile([lat * 1000 for _, lat in steady], [50, 95])
    dropped = report.get("dropped", 0) / max(report.get("frames_in", 1), 1)
    return StreamFigures(
        float(p50),
        float(p95),
        (len(steady) - 1) / span,
        dropped,
        *inside,
        frames_out=written,
        steady_cpu_ms=steady_cpu_ms(watch, steady),
    )


def run_streams(count: int, frames: list[np.ndarray], rate: Fraction, fps: float, seconds: float, source: Path):
    """``count`` live sessions at once, each fed and read back; their figures."""
    found = free_ports(2 * count)
    ports = list(zip(found[::2], found[1::2], strict=True))
    feeders = [Feeder(f"udp://127.0.0.1:{pin}", frames, rate, fps) for pin, _ in ports]
    catchers = [Catcher(f"udp://127.0.0.1:{pout}", f) for (_, pout), f in zip(ports, feeders, strict=True)]
    for thread in [*catchers, *feeders]:
        thread.start()  # the sessions read what the feeders send once their models are loaded
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "faceweave.cli", "live", f"udp://127.0.0.1:{pin}", "-s", str(source)]
            + ["-o", f"udp://127.0.0.1:{pout}{SEND_OPTIONS}", "--duration", str(WARM_UP_S + seconds)]
            + ["--timeout", "60", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for pin, pout in ports
    ]
    watches = [CpuWatch(proc.pid) for proc in procs]
    for watch in watches:
        watch.start()
    outputs = [proc.communicate() for proc in procs]
    for feeder in feeders:
        feeder.halt.set()
    for thread in [*feeders, *catchers]:
        thread.join(timeout=30)  # one whose session failed may wait for it still: the error says why
    reports = []
    for proc, (out, err) in zip(procs, outputs, strict=True):
        if proc.returncode != 0:
            raise SystemExit(f"faceweave live failed ({proc.returncode}): {err.strip()}")
        reports.append(json.loads(out))
    for watch in watches:
        watch.join(timeout=5)
    return [figures(c, r, w) for c, r, w in zip(catchers, reports, watches, strict=True)]


def summary(streams: list[StreamFigures]) -> dict:
    """The median stream's p50, the worst p95 (of the streams read back at
    all: ``unread`` counts the others), the mean fps and drop share."""
    read = [s for s in streams if s.fps > 0] or streams
    return {
        "streams": len(streams),
        "unread": len(streams) - len([s for s in streams if s.fps > 0]),
        "latency_p50_ms": round(statistics.median(s.latency_p50_ms for s in read), 1),
        "latency_p95_ms": round(max(s.latency_p95_ms for s in read), 1),
        "fps_per_stream": round(statistics.mean(s.fps for s in streams), 2),
        "dropped_share": round(statistics.mean(s.dropped_share for s in streams), 4),
        "per_stream": [asdict(s) for s in streams],
    }


def capacity(frames, rate, seconds: float, source: Path, most: int) -> tuple[dict[str, int], list[dict]]:
    """The most concurrent 480p streams at 15 fps with at least 95 % of the
    frame rate kept and every p95 under 200 ms: glass to glass, and the
    sessions' own (decoding to writing, without the feeders' and readers' codecs)."""
    held, runs = {"glass_to_glass": 0, "session": 0}, []
    for count in range(1, most + 1):
        result = summary(run_streams(count, frames, rate, 15.0, seconds, source))
        runs.append(result)
        session_p95 = max(s["session_p95_ms"] or float("inf") for s in result["per_stream"])
        print(
            f"  capacity {count} x 480p@15: glass-to-glass p95 {result['latency_p95_ms']} ms, session p95"
            f" {session_p95} ms, {result['fps_per_stream']} fps",
            flush=True,
        )
        if result["fps_per_stream"] < 0.95 * 15:
            break
        if result["latency_p95_ms"] < 200 and held["glass_to_glass"] == count - 1:
            held["glass_to_glass"] = count
        if session_p95 < 200 and held["session"] == count - 1:
            held["session"] = count
        if held["session"] < count:
            break
    return held, runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds measured per run (after the warm-up)")
    parser.add_argument("--counts", default="1,2,4", help="concurrent streams per run")
    parser.add_argument("--most", type=int, default=6, help="the most 480p@15 streams tried for the capacity")
    parser.add_argument("--out", type=Path, default=None, help="write the figures here as JSON")
    args = parser.parse_args()
    source = args.data / SOURCE
    results: dict = {"runs": {}, "seconds": args.seconds, "cores": __import__("os").cpu_count()}
    for name, size in SIZES.items():
        frames, rate = canvas_frames(args.data / TALK, size)
        for count in (int(c) for c in args.counts.split(",") if c.strip()):  # --counts "": the capacity only
            result = summary(run_streams(count, frames, rate, float(rate), args.seconds, source))
            results["runs"][f"{name}x{count}"] = result
            print(
                f"{name} x{count} @{float(rate):g} fps: p50 {result['latency_p50_ms']} ms, p95 "
                f"{result['latency_p95_ms']} ms, {result['fps_per_stream']} fps/stream, "
                f"{result['dropped_share']:.1%} dropped",
                flush=True,
            )
    frames, rate = canvas_frames(args.data / TALK, SIZES["480p"])
    held, runs = capacity(frames, rate, args.seconds, source, args.most)
    results["capacity_480p_15fps"] = {"streams": held, "runs": runs}
    print(f"480p streams at 15 fps held with p95 < 200 ms: {held}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
