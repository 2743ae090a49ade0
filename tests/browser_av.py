"""Audio/video sync as the browser receives it, for the Live page: a fake
camera clip whose whole frame flashes for two frames at every whole second,
and a fake microphone WAV with a short tone burst at the same moments; the
page's streams are recorded with ``MediaRecorder`` (WebM: VP8 + Opus), the
recordings decoded with PyAV, the flashes and bursts found and paired.

Events come in four kinds, one per second in turn, so that a pairing one
event off (sound a whole second late, say) shows: second m flashes in the
colour and beeps at the pitch of kind m mod 4 (:data:`KINDS`).  The clip and
the WAV last as long as the run needs: Chromium loops them, and its fake
camera adds a frame at each turn (the two would drift apart).

The playout probe (:data:`CAPTURE`) looks at the same streams where the page
plays them: each frame the <video> element presents, at its expected display
time, and the sound at the time WebAudio outputs it, both on the page's
``performance.now()`` clock.

Shared by ``benchmarks/live_browser_av.py`` and
``tests/test_service_live_av.py``."""

from __future__ import annotations

import base64
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FPS = 15
#: the camera's frames: the clip's, resized to this square
SIZE = 320
FLASH_FRAMES = 2
RATE = 48_000
BURST_S = 0.04
#: per kind (second mod 4): the flash colour (RGB: white, yellow, cyan, magenta) and the burst's pitch (Hz)
KINDS = (((255, 255, 255), 800), ((255, 255, 0), 1200), ((0, 255, 255), 1800), ((255, 0, 255), 2600))
#: a frame with two colour channels' means above this is a flash (the clip's frames are far below)
FLASH_LEVEL = 200.0
#: a window of samples louder than this (peak, full scale 1) is sound; silence between bursts
LOUD = 0.05


def chromium_args(clip: Path, wav: Path) -> list[str]:
    """Chromium's flags for a fake camera and microphone read from files, and sound played unprompted."""
    return [
        "--use-fake-device-for-media-stream",
        "--use-fake-ui-for-media-stream",
        "--autoplay-policy=no-user-gesture-required",
        f"--use-file-for-fake-video-capture={clip}",
        f"--use-file-for-fake-audio-capture={wav}",
    ]


def make_flash_clip(video: Path, out: Path, seconds: int, size: int = SIZE) -> None:
    """``seconds`` of video at :data:`FPS` as Y4M (what the fake camera reads):
    the first two seconds of ``video`` (resized to ``size`` square) over and
    over, the whole frame flashed in the kind's colour for :data:`FLASH_FRAMES`
    frames at every whole second."""
    import av
    import cv2

    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        step = max(1, round(float(stream.average_rate or 30) / FPS))
        frames = [f.to_ndarray(format="rgb24") for i, f in enumerate(container.decode(stream)) if i % step == 0]
    frames = [cv2.resize(f, (size, size), interpolation=cv2.INTER_AREA) for f in frames[: 2 * FPS]]
    with av.open(str(out), "w", format="yuv4mpegpipe") as y4m:
        raw = y4m.add_stream("rawvideo", rate=FPS)
        raw.width, raw.height, raw.pix_fmt = size, size, "yuv420p"
        for index in range(seconds * FPS):
            second, frame_in = divmod(index, FPS)
            pixels = frames[index % len(frames)]
            if frame_in < FLASH_FRAMES:
                pixels = np.full_like(pixels, KINDS[second % len(KINDS)][0])
            frame = av.VideoFrame.from_ndarray(pixels, format="rgb24").reformat(format="yuv420p")
            frame.pts = index
            y4m.mux(raw.encode(frame))
        y4m.mux(raw.encode())


def make_burst_wav(out: Path, seconds: int) -> None:
    """``seconds`` of silence (mono, 16-bit) with a :data:`BURST_S` tone burst
    starting at every whole second, at the kind's pitch."""
    sound = np.zeros(seconds * RATE)
    n = np.arange(int(BURST_S * RATE))
    for second in range(seconds):
        sound[second * RATE : second * RATE + len(n)] = 0.5 * np.sin(
            2 * np.pi * KINDS[second % len(KINDS)][1] * n / RATE
        )
    with wave.open(str(out), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(RATE)
        wav.writeframes((sound * 32767).astype("<i2").tobytes())


#: an AudioWorklet that hands on what it is given, in blocks, with the context frame each starts at
TAP = """
class Tap extends AudioWorkletProcessor {
  constructor() { super(); this.block = new Float32Array(4096); this.n = 0; this.start = 0; }
  flush() {
    if (this.n) this.port.postMessage({ frame: this.start, samples: this.block.slice(0, this.n) });
    this.n = 0;
  }
  process(inputs) {
    const samples = inputs[0] && inputs[0][0];
    if (!samples || (this.n && currentFrame !== this.start + this.n)) this.flush();
    if (samples) {
      if (!this.n) this.start = currentFrame;
      this.block.set(samples, this.n);
      this.n += samples.length;
      if (this.n > this.block.length - 128) this.flush();
    }
    return true;
  }
}
registerProcessor('tap', Tap);
"""

#: For ``ms`` at once, on the page's swapped stream (``back``) and its camera
#: stream (``sent``): a MediaRecorder WebM (base64), and the playout probe:
#: every frame the <video> element presents (requestVideoFrameCallback: its
#: expected display time and mean RGB) and the sound through WebAudio (the
#: context frame of each block of samples, and the context's output
#: timestamps, to put the blocks on the same performance.now() clock).
CAPTURE = """async ([ms, tap]) => {
  const record = (stream) => new Promise((resolve, reject) => {
    const recorder = new MediaRecorder(stream, { mimeType: 'video/webm;codecs=vp8,opus' });
    const chunks = [];
    recorder.ondataavailable = (event) => chunks.push(event.data);
    recorder.onerror = (event) => reject(new Error('MediaRecorder: ' + event.error));
    recorder.onstop = () => {
      const reader = new FileReader();
      reader.onload = () => resolve(reader.result.split(',')[1]);
      reader.readAsDataURL(new Blob(chunks, { type: 'video/webm' }));
    };
    recorder.start(500);
    setTimeout(() => recorder.stop(), ms);
  });
  const until = performance.now() + ms;
  const frames = (video) => new Promise((resolve) => {
    const canvas = document.createElement('canvas');
    canvas.width = canvas.height = 16;
    const g = canvas.getContext('2d', { willReadFrequently: true });
    const seen = [];
    const step = (now, meta) => {
      g.drawImage(video, 0, 0, 16, 16);
      const d = g.getImageData(0, 0, 16, 16).data;
      const rgb = [0, 0, 0];
      for (let i = 0; i < d.length; i += 4) { rgb[0] += d[i]; rgb[1] += d[i + 1]; rgb[2] += d[i + 2]; }
      seen.push([meta.expectedDisplayTime, ...rgb.map((v) => v / 256), meta.presentedFrames]);
      if (performance.now() < until) video.requestVideoFrameCallback(step); else resolve(seen);
    };
    video.requestVideoFrameCallback(step);
  });
  const context = new AudioContext();
  await context.audioWorklet.addModule(URL.createObjectURL(new Blob([tap], { type: 'text/javascript' })));
  const sound = async (stream) => {
    const node = new AudioWorkletNode(context, 'tap');
    const silent = context.createGain();
    silent.gain.value = 0;
    context.createMediaStreamSource(stream).connect(node).connect(silent).connect(context.destination);
    const blocks = [];
    node.port.onmessage = (event) => {
      const pcm = Int16Array.from(event.data.samples, (v) => Math.max(-32767, Math.min(32767, v * 32767)));
      let text = '';
      const bytes = new Uint8Array(pcm.buffer);
      for (let i = 0; i < bytes.length; i += 8192) text += String.fromCharCode(...bytes.subarray(i, i + 8192));
      blocks.push([event.data.frame, btoa(text)]);
    };
    await new Promise((resolve) => setTimeout(resolve, ms));
    node.port.onmessage = null;
    return blocks;
  };
  const clock = [];
  const timer = setInterval(() => {
    const t = context.getOutputTimestamp();
    clock.push([t.contextTime, t.performanceTime]);
  }, 100);
  const swapped = document.getElementById('swapped');
  const camera = document.getElementById('camera');
  const [back, sent, backFrames, sentFrames, backSound, sentSound] = await Promise.all([
    record(swapped.srcObject), record(camera.srcObject), frames(swapped), frames(camera),
    sound(swapped.srcObject), sound(camera.srcObject),
  ]);
  clearInterval(timer);
  const rate = context.sampleRate;
  await context.close();
  return { back, sent, probe: { rate, clock, back: [backFrames, backSound], sent: [sentFrames, sentSound] } };
}"""


def capture(page, seconds: float, out: Path) -> tuple[dict[str, Path], dict]:
    """Record and probe the page's swapped and camera streams for ``seconds``
    (:data:`CAPTURE`): the WebM files written under ``out`` (``back.webm``,
    ``sent.webm``) by name, and the probe's data."""
    got = page.evaluate(CAPTURE, [int(seconds * 1000), TAP])
    paths = {name: out / f"{name}.webm" for name in ("back", "sent")}
    for name, path in paths.items():
        path.write_bytes(base64.b64decode(got[name]))
    return paths, got["probe"]


@dataclass(frozen=True)
class Event:
    """A flash or a burst in a recording: its time (seconds, the recording's
    timeline), its kind (the second mod 4: :data:`KINDS`) and, for a flash, how many
    bright frames it lasted."""

    at: float
    kind: int
    frames: int = 0


@dataclass(frozen=True)
class Recording:
    """What one recording holds: its flashes and bursts, its video frame count
    and span (seconds), and whether it had an audio stream."""

    flashes: tuple[Event, ...]
    bursts: tuple[Event, ...]
    video_frames: int
    video_span_s: float
    has_audio: bool

    @property
    def fps(self) -> float:
        return (self.video_frames - 1) / self.video_span_s if self.video_span_s > 0 else 0.0


def read_recording(path: Path) -> Recording:
    """Decode a MediaRecorder WebM with PyAV and find its flashes and bursts."""
    import av

    with av.open(str(path)) as container:
        video = [s for s in container.streams.video][:1]
        audio = [s for s in container.streams.audio][:1]
        frames: list[tuple[float, np.ndarray]] = []
        chunks: list[tuple[float, np.ndarray]] = []
        for frame in container.decode(*video, *audio):
            if frame.time is None:
                continue
            if isinstance(frame, av.VideoFrame):
                frames.append((frame.time, frame.to_ndarray(format="rgb24")[::8, ::8].mean(axis=(0, 1))))
            else:
                chunks.append(
                    (frame.time, frame.to_ndarray().astype(np.float32).reshape(len(frame.layout.channels), -1)[0])
                )
                rate = frame.sample_rate
    frames.sort(key=lambda f: f[0])
    return _recording(frames, chunks, rate)


def _recording(frames: list[tuple[float, np.ndarray]], chunks: list[tuple[float, np.ndarray]], rate: int) -> Recording:
    """The events found in a view's frames (time-sorted) and sound chunks."""
    times = [t for t, _ in frames]
    return Recording(
        flashes=tuple(find_flashes(frames)),
        bursts=tuple(find_bursts(chunks, rate)) if chunks else (),
        video_frames=len(frames),
        video_span_s=(times[-1] - times[0]) if times else 0.0,
        has_audio=bool(chunks),
    )


def find_flashes(frames: list[tuple[float, np.ndarray]]) -> list[Event]:
    """The flashes among ``frames`` ((time, mean RGB), in time order): runs of
    bright frames, each at its first frame's time, its kind told by its colour.
    A run the recording starts in is left out (its start is not seen)."""
    found: list[Event] = []
    run: list[np.ndarray] = []
    start = 0.0
    for index, (at, rgb) in enumerate([*frames, (0.0, np.zeros(3))]):
        if int(np.sum(rgb > FLASH_LEVEL)) >= 2:
            if not run:
                start = at if index > 0 else np.nan
            run.append(rgb)
            continue
        if run and not np.isnan(start):
            found.append(Event(at=start, kind=_colour_kind(np.mean(run, axis=0)), frames=len(run)))
        run = []
    return found


def find_bursts(chunks: list[tuple[float, np.ndarray]], rate: int) -> list[Event]:
    """The tone bursts in decoded audio (``(time, samples)`` per frame): a loud
    5 ms window after 0.3 s of quiet, at its first loud sample's time;
    its pitch (the nearest of the :data:`KINDS`) gives its kind."""
    chunks = sorted(chunks, key=lambda c: c[0])
    origin = chunks[0][0]
    sound = np.zeros(int((chunks[-1][0] - origin) * rate) + len(chunks[-1][1]) + 1, np.float32)
    for at, samples in chunks:  # placed by their time stamps: a gap stays a gap
        start = int(round((at - origin) * rate))
        sound[start : start + len(samples)] = samples[: len(sound) - start]
    step = rate // 200
    loud = [float(np.abs(sound[i : i + step]).max()) > LOUD for i in range(0, len(sound) - step, step)]
    quiet = int(0.3 * 200)  # windows of quiet before an onset (the recording's start is not quiet)
    found: list[Event] = []
    for index in range(quiet, len(loud)):
        if loud[index] and not any(loud[index - quiet : index]):
            window = np.abs(sound[index * step : (index + 1) * step])
            first = index * step + int(np.argmax(window > LOUD))
            kind = _pitch_kind(sound[first : first + int(BURST_S * rate)], rate)
            found.append(Event(at=origin + first / rate, kind=kind))
    return found


def _pitch_kind(samples: np.ndarray, rate: int) -> int:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    pitch = float(np.fft.rfftfreq(len(samples), 1 / rate)[int(np.argmax(spectrum))])
    return int(np.argmin([abs(pitch - hz) for _, hz in KINDS]))


def _colour_kind(rgb: np.ndarray) -> int:
    """The kind whose flash colour is nearest to the mean ``rgb`` of a flash."""
    return int(np.argmin([float(np.abs(rgb - np.array(colour)).sum()) for colour, _ in KINDS]))


@dataclass(frozen=True)
class Pair:
    """A burst and its flash: ``offset_s`` is the burst's time minus the
    flash's (positive: the sound comes later than the picture)."""

    burst: Event
    flash: Event

    @property
    def offset_s(self) -> float:
        return self.burst.at - self.flash.at


def pair_events(recording: Recording, window_s: float = 1.0) -> tuple[list[Pair], list[Event]]:
    """Each burst with the flash of its kind nearest to it within ``window_s``
    (flashes of a kind are four seconds apart, so that one is unambiguous); the
    pairs, and the bursts with no flash of their kind that near."""
    pairs: list[Pair] = []
    lone: list[Event] = []
    for burst in recording.bursts:
        kin = [f for f in recording.flashes if f.kind == burst.kind]
        nearest = min(kin, key=lambda f: abs(f.at - burst.at), default=None)
        if nearest is None or abs(nearest.at - burst.at) > window_s:
            lone.append(burst)
        else:
            pairs.append(Pair(burst=burst, flash=nearest))
    return pairs, lone


def read_probe(probe: dict, name: str) -> Recording:
    """The playout probe's view of stream ``name`` (``back`` or ``sent``):
    frames at their expected display time, sound at its WebAudio output time."""
    shown, blocks = probe[name]
    frames = sorted(((row[0] / 1000, np.array(row[1:4], dtype=float)) for row in shown), key=lambda f: f[0])
    rate = int(probe["rate"])
    clock = [perf - ctx * 1000 for ctx, perf in probe["clock"] if perf > 0]
    shift_ms = float(np.median(clock)) if clock else 0.0
    chunks = [
        ((frame / rate * 1000 + shift_ms) / 1000, np.frombuffer(base64.b64decode(data), "<i2") / 32767)
        for frame, data in blocks
    ]
    return _recording(frames, chunks, rate)


#: (init script) keep the page's peer connections where :data:`RECEIVE_STATS` finds them
KEEP_PEERS = """(() => {
  const Native = window.RTCPeerConnection;
  if (!Native) return;
  window.__peers = [];
  window.RTCPeerConnection = class extends Native {
    constructor(...args) { super(...args); window.__peers.push(this); }
  };
})();"""
#: the receiving side's jitter buffer counters, per kind (cumulative, seconds)
RECEIVE_STATS = """async () => {
  const out = {};
  for (const pc of window.__peers || []) {
    (await pc.getStats()).forEach((s) => {
      if (s.type !== 'inbound-rtp') return;
      out[s.kind] = {
        emitted: s.jitterBufferEmittedCount, delay: s.jitterBufferDelay,
        target: s.jitterBufferTargetDelay, minimum: s.jitterBufferMinimumDelay,
        processing: s.totalProcessingDelay, decoded: s.framesDecoded,
        playout: s.estimatedPlayoutTimestamp,
      };
    });
  }
  return out;
}"""


def playout_gap_ms(reads: list[dict]) -> float | None:
    """The median, over :data:`RECEIVE_STATS` reads, of the audio's estimated
    playout timestamp minus the video's (the sender's clock, as the browser maps it
    by the sender reports): what the browser's lip sync believes (positive: it
    plays the sound ahead of the picture)."""
    gaps = [
        r["audio"]["playout"] - r["video"]["playout"]
        for r in reads
        if r.get("audio", {}).get("playout") and r.get("video", {}).get("playout")
    ]
    return round(float(np.median(gaps)), 1) if gaps else None


def jitter_buffers(before: dict, after: dict) -> dict:
    """The mean jitter buffer delay, target and minimum (ms) per kind between two
    :data:`RECEIVE_STATS` reads (the minimum is where the browser's lip sync adds delay)."""
    out = {}
    for kind, end in after.items():
        start = before.get(kind, {})
        emitted = (end.get("emitted") or 0) - (start.get("emitted") or 0)
        if emitted <= 0:
            continue
        out[kind] = {
            key: round(((end.get(key) or 0) - (start.get(key) or 0)) * 1000 / emitted, 1)
            for key in ("delay", "target", "minimum")
        }
    return out
