"""The Live page in headless Chromium: a fake camera fed from a test video
(``--use-file-for-fake-video-capture``, a Y4M clip made here from
``video/lp_d18_talking_face.mp4``) goes to the server over WebRTC; the
swapped frames that come back show the source's identity, the page reports
a frame rate and a latency, a faceless photo mid-stream keeps the source
and says so, another photo changes the identity, and Stop ends the session;
the page asks for the API key first, as the server requires one.  With the
microphone ticked, a fake microphone's tone comes back in the swapped stream.
A camera that stops sending ends the session after ``live.frame_timeout_s``,
and the page says why.

Needs Debian's ``chromium``, ``playwright`` and ``aiortc``; skipped without
them (and without ../shared).  The screenshot lands in
``test-artifacts/live_page.png``."""

from __future__ import annotations

import base64
import io
import json
import shutil
import statistics
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from tests.service_fixtures import ALICE_KEY, png_bytes, settings

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
SOURCE, OTHER = "single/biden2.jpg", "single/paul_rudd.jpg"
CLIP = "video/lp_d18_talking_face.mp4"
#: the fake camera's clip: this many seconds at this rate (the browser loops it)
CLIP_S, CLIP_FPS = 2, 15
#: a swapped frame is drawn from the page's <video> into a PNG
GRAB = """() => {
  const video = document.getElementById('swapped');
  const canvas = document.createElement('canvas');
  canvas.width = video.videoWidth;
  canvas.height = video.videoHeight;
  canvas.getContext('2d').drawImage(video, 0, 0);
  return canvas.toDataURL('image/png');
}"""


def _chromium() -> str:
    pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    pytest.importorskip("aiortc", reason="the webrtc extra (aiortc) is not installed")
    path = shutil.which("chromium")
    if path is None:
        pytest.skip("Debian's 'chromium' is not installed (apt-get install chromium)")
    return path


def make_y4m(video: Path, out: Path) -> list[np.ndarray]:
    """The first :data:`CLIP_S` seconds of ``video`` at :data:`CLIP_FPS` as a
    Y4M file (what Chromium's fake camera reads); returns the RGB frames."""
    import av

    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        step = max(1, round(float(stream.average_rate or 30) / CLIP_FPS))
        frames = [f.to_ndarray(format="rgb24") for i, f in enumerate(container.decode(stream)) if i % step == 0]
    frames = frames[: CLIP_S * CLIP_FPS]
    with av.open(str(out), "w", format="yuv4mpegpipe") as y4m:
        raw = y4m.add_stream("rawvideo", rate=CLIP_FPS)
        raw.width, raw.height, raw.pix_fmt = frames[0].shape[1], frames[0].shape[0], "yuv420p"
        for index, pixels in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(pixels, format="rgb24").reformat(format="yuv420p")
            frame.pts = index
            y4m.mux(raw.encode(frame))
        y4m.mux(raw.encode())
    return frames


def _grab(page, count: int = 3) -> list[np.ndarray]:
    """``count`` swapped frames from the page, a few frames apart."""
    grabbed = []
    for _ in range(count):
        head, _, data = page.evaluate(GRAB).partition(",")
        assert head == "data:image/png;base64"
        grabbed.append(np.asarray(Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB")))
        page.wait_for_timeout(250)
    return grabbed


def _frames_back(page, more_than: int) -> int:
    """Wait for more than ``more_than`` frames decoded on the page; their count."""
    page.wait_for_function(
        "(n) => Number(document.getElementById('live-frames').dataset.value) > n", arg=more_than, timeout=60_000
    )
    return int(page.get_attribute("#live-frames", "data-value") or 0)


def test_live_page_swaps_the_camera_and_changes_the_source(tmp_path, faces_dir):
    from playwright.sync_api import sync_playwright
    from tests.live_peer import serving
    from tests.test_live_cli import largest_face_embedding

    from faceweave.analysis import FaceAnalyser, embedding_distance
    from faceweave.io import read_image

    chromium = _chromium()
    clip = tmp_path / "clip.y4m"
    originals = make_y4m(faces_dir / CLIP, clip)
    blank = tmp_path / "blank.png"
    blank.write_bytes(png_bytes(200, 200))
    args = [
        "--use-fake-device-for-media-stream",
        "--use-fake-ui-for-media-stream",
        f"--use-file-for-fake-video-capture={clip}",
    ]
    config = settings(tmp_path, live={"sessions": 2}, auth={"api_keys": [{"user": "alice", "key": ALICE_KEY}]})
    with serving(config) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=args)
        try:
            page = browser.new_context(viewport={"width": 1000, "height": 900}).new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(base + "/live")
            page.click("#live-start")  # no photo yet: the page says so
            assert "Choose a source photo" in page.inner_text("#message")
            page.set_input_files("#live-source", str(faces_dir / SOURCE))
            page.click("#live-start")  # no key yet: refused like the API, and the page asks for one
            page.wait_for_selector("#key-section", state="visible")
            page.wait_for_selector("#message >> text=authentication required")
            page.fill("#api-key", ALICE_KEY)
            page.click("#key-form button[type=submit]")
            page.click("#live-start")
            count = _frames_back(page, 10)
            page.wait_for_function(
                "() => Number(document.getElementById('live-fps').dataset.value) > 0", timeout=30_000
            )
            page.wait_for_function("() => document.getElementById('live-latency').dataset.value !== ''", timeout=30_000)
            fps = float(page.get_attribute("#live-fps", "data-value") or 0)
            latency = float(page.get_attribute("#live-latency", "data-value") or 0)
            assert "fps" in page.inner_text("#live-fps") and "ms" in page.inner_text("#live-latency")
            first = _grab(page)

            page.set_input_files("#live-source", str(blank))  # no face: the source stays
            page.wait_for_selector("#message >> text=the previous source is kept")
            page.set_input_files("#live-source", str(faces_dir / OTHER))
            page.wait_for_selector("#message >> text=Source changed to paul_rudd.jpg")
            _frames_back(page, _frames_back(page, count) + 15)
            after = _grab(page)
            # the photos chosen stay on the page (not the refused one): one click goes back to the first
            recent = page.eval_on_selector_all(
                "#live-recent .recent-source", "(bs) => bs.map((b) => [b.title, b.getAttribute('aria-pressed')])"
            )
            page.click("#live-recent .recent-source[title='biden2.jpg']")
            page.wait_for_selector("#message >> text=Source changed to biden2.jpg")
            pressed = page.get_attribute("#live-recent .recent-source[title='biden2.jpg']", "aria-pressed")
            _frames_back(page, _frames_back(page, count) + 15)
            back = _grab(page)
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "live_page.png"), full_page=True)

            session = page.evaluate("() => document.getElementById('live-state').textContent")
            page.click("#live-stop")
            page.wait_for_selector("#live-state >> text=stopped")
            assert errors == [], "JavaScript errors on the page"
        finally:
            browser.close()
        with urllib.request.urlopen(base + "/metrics") as response:
            metrics = response.read().decode()
    assert session.startswith("Live session ")
    assert fps >= 1.0, f"the page reported {fps} fps"  # a floor: frames do come back, several a second
    assert latency > 0
    assert "faceweave_live_sessions_started_total 1.0" in metrics and "faceweave_live_sessions 0.0" in metrics
    received = next(
        line for line in metrics.splitlines() if line.startswith('faceweave_live_frames_total{kind="received"}')
    )
    assert float(received.split()[-1]) >= count

    with FaceAnalyser() as analyser:

        def distance(frames: list[np.ndarray], to: np.ndarray) -> float:
            return statistics.median(embedding_distance(largest_face_embedding(analyser, f), to) for f in frames)

        biden = largest_face_embedding(analyser, read_image(faces_dir / SOURCE).pixels)
        rudd = largest_face_embedding(analyser, read_image(faces_dir / OTHER).pixels)
        plain = originals[:: max(1, len(originals) // 5)]
        figures = {
            "camera->biden": distance(plain, biden),
            "swapped->biden": distance(first, biden),
            "swapped->rudd": distance(first, rudd),
            "changed->rudd": distance(after, rudd),
            "changed->biden": distance(after, biden),
            "back->biden": distance(back, biden),
        }
    (ARTIFACTS / "live_page.json").write_text(json.dumps({"fps": fps, "latency_ms": latency, **figures}, indent=1))
    assert figures["swapped->biden"] < figures["camera->biden"], figures  # moved toward the source
    assert figures["changed->rudd"] < figures["swapped->rudd"], figures  # the new source's identity
    assert figures["changed->biden"] > figures["swapped->biden"], figures
    assert recent == [["paul_rudd.jpg", "true"], ["biden2.jpg", "false"]] and pressed == "true"
    assert figures["back->biden"] < figures["changed->biden"], figures  # the first source again


#: the peak of the swapped stream's sound on the page, through an AnalyserNode (0: silence), listened to
#: until it passes 0.2 or for 3 s (on a loaded machine the sound can stall for a second)
SOUND_LEVEL = """async () => {
  const stream = document.getElementById('swapped').srcObject;
  const context = new AudioContext();
  const analyser = context.createAnalyser();
  context.createMediaStreamSource(stream).connect(analyser);
  const samples = new Float32Array(analyser.fftSize);
  let peak = 0;
  for (let i = 0; i < 60 && peak <= 0.2; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    analyser.getFloatTimeDomainData(samples);
    for (const value of samples) peak = Math.max(peak, Math.abs(value));
  }
  await context.close();
  return peak;
}"""


def _tone_wav(path: Path, seconds: float = 3.0, hz: int = 440, rate: int = 48_000) -> None:
    import wave

    n = np.arange(int(seconds * rate))
    tone = (12000 * np.sin(2 * np.pi * hz * n / rate)).astype("<i2")
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(tone.tobytes())


def test_live_page_sends_the_microphone_back_with_the_swapped_video(tmp_path, faces_dir):
    """ "Send the microphone too": the page offers its fake microphone (a tone
    from a WAV), and the swapped stream the page plays carries the sound
    back beside the video; the server counts the audio frames it sent."""
    from playwright.sync_api import sync_playwright
    from tests.live_peer import serving

    chromium = _chromium()
    clip, tone = tmp_path / "clip.y4m", tmp_path / "tone.wav"
    make_y4m(faces_dir / CLIP, clip)
    _tone_wav(tone)
    args = [
        "--use-fake-device-for-media-stream",
        "--use-fake-ui-for-media-stream",
        "--autoplay-policy=no-user-gesture-required",
        f"--use-file-for-fake-video-capture={clip}",
        f"--use-file-for-fake-audio-capture={tone}",
    ]
    with serving(settings(tmp_path, live={"sessions": 1})) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=args)
        try:
            page = browser.new_context().new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(base + "/live")
            page.set_input_files("#live-source", str(faces_dir / SOURCE))
            page.check("#live-audio")
            page.click("#live-start")
            _frames_back(page, 5)
            tracks = page.evaluate(
                "() => { const s = document.getElementById('swapped').srcObject;"
                " return [s.getVideoTracks().length, s.getAudioTracks().length]; }"
            )
            muted = page.evaluate("() => document.getElementById('swapped').muted")
            level = page.evaluate(SOUND_LEVEL)
            page.click("#live-stop")
            page.wait_for_selector("#live-state >> text=stopped")
            assert errors == [], "JavaScript errors on the page"
        finally:
            browser.close()
        with urllib.request.urlopen(base + "/metrics") as response:
            metrics = response.read().decode()
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "live_page_audio.json").write_text(json.dumps({"tracks": tracks, "sound_peak": level}) + "\n")
    assert tracks == [1, 1]  # one stream: the swapped video and the microphone's sound, played together
    assert muted is False
    assert level > 0.05, f"the swapped stream's sound peaks at {level}"  # the tone, not silence
    audio = next(line for line in metrics.splitlines() if line.startswith('faceweave_live_frames_total{kind="audio"}'))
    assert float(audio.split()[-1]) > 0


#: every RTCPeerConnection the page makes, kept where the test can reach it
KEEP_PEERS = """(() => {
  const Native = window.RTCPeerConnection;
  window.__peers = [];
  window.RTCPeerConnection = function (...args) {
    const pc = new Native(...args);
    window.__peers.push(pc);
    return pc;
  };
  window.RTCPeerConnection.prototype = Native.prototype;
})();"""


def test_live_page_says_why_a_stalled_session_ended(tmp_path, faces_dir):
    """The camera stops sending (``replaceTrack(null)``: the connection stays
    up, no frame comes): the server ends the session after
    ``live.frame_timeout_s`` and the page says so, with the setting's name."""
    from playwright.sync_api import sync_playwright
    from tests.live_peer import serving

    chromium = _chromium()
    clip = tmp_path / "clip.y4m"
    make_y4m(faces_dir / CLIP, clip)
    args = [
        "--use-fake-device-for-media-stream",
        "--use-fake-ui-for-media-stream",
        f"--use-file-for-fake-video-capture={clip}",
    ]
    with serving(settings(tmp_path, live={"sessions": 1, "frame_timeout_s": 2.0})) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=args)
        try:
            page = browser.new_context().new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.add_init_script(KEEP_PEERS)
            page.goto(base + "/live")
            page.set_input_files("#live-source", str(faces_dir / SOURCE))
            page.click("#live-start")
            _frames_back(page, 5)
            page.evaluate(
                "() => Promise.all(window.__peers[0].getSenders()"
                ".filter((s) => s.track && s.track.kind === 'video').map((s) => s.replaceTrack(null)))"
            )
            page.wait_for_selector("#message >> text=The live session ended", timeout=30_000)
            message = page.inner_text("#message")
            page.wait_for_selector("#live-state >> text=stopped")
            assert errors == [], "JavaScript errors on the page"
        finally:
            browser.close()
    assert "no video frame arrived for 2 s (live.frame_timeout_s)" in message, message
