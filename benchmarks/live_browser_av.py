"""Audio/video sync of the Live page as a real browser receives it: headless
Chromium's fake camera plays the talking-head clip (320x320, 15 fps) whose
whole frame flashes for two frames at every whole second, its fake
microphone a WAV with a 40 ms tone burst at the same moments (colour and
pitch in four kinds, in turn, so that a pairing a second off shows); the
Live page sends both to ``faceweave serve`` (its own process, one session)
and plays the swapped stream with its sound.  In the page, for the same
seconds, the swapped stream and the camera stream it sent are each seen two
ways (tests/browser_av.py): recorded by ``MediaRecorder`` (WebM, decoded
here with PyAV), and probed where the page plays them: each frame its
<video> element presents, at its expected display time
(requestVideoFrameCallback), and the sound at the time WebAudio outputs it
(an AudioWorklet, placed by AudioContext.getOutputTimestamp), both on the
page's performance.now() clock.

The A/V offset of an event is its burst's time minus its flash's time in
that view (positive: the sound is later).  The camera stream's own offset
(the fake devices start apart, by 0-140 ms from run to run) is measured the
same way, so what the trip through faceweave adds is the difference of the
two.  Also reported: the server's figures (``GET /v1/live/{id}``), the
browser's jitter buffer delays, and what its lip sync believes (the audio's
estimated playout timestamp minus the video's, from getStats).

    .venv/bin/python benchmarks/live_browser_av.py [--data ../shared/data/faces] [--seconds 10]
        [--warm-up 4] [--keep DIR] [--out report/live_browser_av.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.browser_av import (  # noqa: E402
    KEEP_PEERS,
    RECEIVE_STATS,
    Recording,
    capture,
    chromium_args,
    jitter_buffers,
    make_burst_wav,
    make_flash_clip,
    pair_events,
    playout_gap_ms,
    read_probe,
    read_recording,
)

from live import DEFAULT_DATA, SOURCE, TALK  # noqa: E402
from live_webrtc import Server  # noqa: E402

#: the camera clip and the microphone WAV last this much longer than the warm-up and the recording
MARGIN_S = 30
#: a burst pairs with the flash of its kind nearest to it within this (those are four seconds apart)
PAIR_S = 1.0


def run_page(base: str, photo: Path, clip: Path, wav: Path, seconds: float, warm_up: float, out: Path) -> dict:
    """Drive the Live page with the microphone on; after ``warm_up`` record and
    probe for ``seconds``; the page's, the browser's and the server's figures,
    the recordings' paths and the probe's data."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("Debian's 'chromium' is not installed (apt-get install chromium)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=chromium_args(clip, wav))
        try:
            page = browser.new_context(bypass_csp=True).new_page()  # the probe loads a worklet from a blob
            page.add_init_script(KEEP_PEERS)
            sessions: list[str] = []
            page.on("response", lambda r: _session(r, sessions))
            _start(page, base, photo, warm_up)
            before = page.evaluate(RECEIVE_STATS)
            webm, probe = capture(page, seconds, out)
            figures = _figures(page, before)
            figures["server"] = _server_figures(base, sessions)
            page.click("#live-stop")
        finally:
            browser.close()
    return {**figures, "webm": webm, "probe": probe}


def _start(page, base: str, photo: Path, warm_up: float) -> None:
    """Start a session on the Live page with ``photo`` and the microphone; wait
    for the first swapped frame and ``warm_up`` seconds more."""
    page.goto(base + "/live")
    page.set_input_files("#live-source", str(photo))
    page.check("#live-audio")
    page.click("#live-start")
    page.wait_for_function("() => Number(document.getElementById('live-frames').dataset.value) > 0", timeout=60_000)
    page.wait_for_timeout(int(warm_up * 1000))


def _figures(page, before: dict) -> dict:
    """The page's fps and latency, the browser's jitter buffers over the
    capture, and its lip sync's belief (ten reads a little apart)."""
    reads = []
    for _ in range(10):
        reads.append(page.evaluate(RECEIVE_STATS))
        page.wait_for_timeout(110)
    return {
        "page_fps": float(page.get_attribute("#live-fps", "data-value") or 0),
        "page_latency_ms": float(page.get_attribute("#live-latency", "data-value") or 0),
        "browser_playout_gap_ms": playout_gap_ms(reads),
        "browser_jitter_buffers_ms": jitter_buffers(before, reads[0]),
    }


def _session(response, sessions: list[str]) -> None:
    """Note the live session's link from the page's ``POST /v1/live``."""
    if response.request.method == "POST" and response.url.endswith("/v1/live") and response.status == 201:
        sessions.append(response.json()["links"]["self"])


def _server_figures(base: str, sessions: list[str]) -> dict:
    """The server's figures of the page's session (``GET /v1/live/{id}``)."""
    if not sessions:
        return {}
    with urllib.request.urlopen(base + sessions[-1]) as response:
        body = json.loads(response.read())
    keys = ("received", "swapped", "dropped", "latency_p50_ms", "latency_p95_ms", "audio_frames", "audio_hold_p50_ms")
    return {key: body.get(key) for key in (*keys, "audio_dropped")}


def summary(recording: Recording) -> dict:
    """The figures of one recording: events found, paired, offsets (ms)."""
    pairs, lone = pair_events(recording, PAIR_S)
    offsets = [round(p.offset_s * 1000, 1) for p in pairs]
    return {
        "video_frames": recording.video_frames,
        "fps": round(recording.fps, 2),
        "has_audio": recording.has_audio,
        "flashes": len(recording.flashes),
        "bursts": len(recording.bursts),
        "paired": len(pairs),
        "bursts_without_flash": len(lone),
        "flash_frames": [f.frames for f in recording.flashes],
        "av_offset_ms": offsets,
        "av_offset_p50_ms": round(statistics.median(offsets), 1) if offsets else None,
        "av_offset_range_ms": [min(offsets), max(offsets)] if offsets else None,
    }


def _added(views: dict) -> float | None:
    """What the trip adds: the swapped stream's offset p50 minus the camera stream's."""
    back, sent = views["back"]["av_offset_p50_ms"], views["sent"]["av_offset_p50_ms"]
    return None if back is None or sent is None else round(back - sent, 1)


def table(report: dict) -> str:
    rows = [
        "| view | stream | fps | flashes | bursts | paired | A/V offset p50 (ms) | range (ms) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for view in ("recorder", "playout"):
        for name in ("sent", "back"):
            s = report[view][name]
            span = "-" if s["av_offset_range_ms"] is None else "{} .. {}".format(*s["av_offset_range_ms"])
            rows.append(
                f"| {view} | {name} | {s['fps']} | {s['flashes']} | {s['bursts']} | {s['paired']}"
                f" | {s['av_offset_p50_ms']} | {span} |"
            )
    for view in ("recorder", "playout"):
        rows.append(f"{view}: added by the trip (back - sent, p50): {report[view]['added_p50_ms']} ms")
    return "\n".join(rows)


def measure(args: argparse.Namespace, work: Path) -> dict:
    """One run: the clip and the WAV made, the server and the page driven, the views read."""
    clip, wav = work / "flash.y4m", work / "burst.wav"
    length = int(args.warm_up + args.seconds) + MARGIN_S
    make_flash_clip(args.data / TALK, clip, length)
    make_burst_wav(wav, length)
    server = Server(work / "storage", 1)
    try:
        got = run_page(server.url, args.data / SOURCE, clip, wav, args.seconds, args.warm_up, work)
    finally:
        server.stop()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        for path in got["webm"].values():
            shutil.copy(path, args.keep / path.name)
        (args.keep / "probe.json").write_text(json.dumps(got["probe"]))
    views = {
        "recorder": {name: summary(read_recording(path)) for name, path in got["webm"].items()},
        "playout": {name: summary(read_probe(got["probe"], name)) for name in ("back", "sent")},
    }
    for figures in views.values():
        figures["added_p50_ms"] = _added(figures)
    kept = ("page_fps", "page_latency_ms", "browser_playout_gap_ms", "server", "browser_jitter_buffers_ms")
    return {**{key: got[key] for key in kept}, **views}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--seconds", type=float, default=10.0, help="how long the page records")
    parser.add_argument("--warm-up", type=float, default=4.0, help="seconds after the first frame back")
    parser.add_argument("--keep", type=Path, help="a folder to keep the recordings and the probe's data in")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        figures = measure(args, Path(tmp))
    report = {"seconds": args.seconds, "load_average_at_start": [round(x, 2) for x in load], **figures}
    print(table(report))
    print("server:", json.dumps(report["server"]))
    print("browser jitter buffers (ms):", json.dumps(report["browser_jitter_buffers_ms"]))
    print("browser's lip sync, audio minus video estimated playout (ms):", report["browser_playout_gap_ms"])
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
