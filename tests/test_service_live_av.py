"""The Live page's sound and picture as the browser receives them: a fake
camera whose whole frame flashes at every whole second and a fake microphone
with a tone burst at the same moments (tests/browser_av.py) go through the
page to the server and back; the swapped stream is recorded in the page
(MediaRecorder) and probed where the page plays it (requestVideoFrameCallback
and WebAudio).  Both views of the returned stream have video and sound, the
flashes and the bursts are found, and every burst pairs with a flash of its
own second's kind (four colours and pitches in turn) within a generous window: a sound
that does not come back, or comes back a second off, fails.  No timing
figure is checked (benchmarks/live_browser_av.py measures them).

Needs Debian's ``chromium``, ``playwright`` and ``aiortc``; skipped without them."""

from __future__ import annotations

import shutil

import pytest
from tests.browser_av import (
    Recording,
    capture,
    chromium_args,
    make_burst_wav,
    make_flash_clip,
    pair_events,
    read_probe,
    read_recording,
)
from tests.service_fixtures import settings

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SOURCE, CLIP = "single/biden2.jpg", "video/lp_d18_talking_face.mp4"
#: the clip and the WAV loop every this many seconds (a multiple of the four kinds: they stay in turn)
LOOP_S = 4
RECORD_S = 5
#: a burst and its flash at most this far apart (the sound's offset is well under it; a second off is not)
WINDOW_S = 0.9


def _chromium() -> str:
    pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    pytest.importorskip("aiortc", reason="the webrtc extra (aiortc) is not installed")
    path = shutil.which("chromium")
    if path is None:
        pytest.skip("Debian's 'chromium' is not installed (apt-get install chromium)")
    return path


def _check(recording: Recording, what: str) -> None:
    assert recording.video_frames >= 2 * RECORD_S, f"{what}: {recording.video_frames} frames"
    assert recording.has_audio, f"{what}: no sound"
    assert len(recording.flashes) >= 2, f"{what}: flashes {recording.flashes}"
    assert len(recording.bursts) >= 2, f"{what}: bursts {recording.bursts}"
    pairs, lone = pair_events(recording, WINDOW_S)
    # the first burst may belong to a flash from before the recording began
    late = [b for b in lone if b != recording.bursts[0]]
    assert not late, f"{what}: bursts with no flash of their kind within {WINDOW_S} s: {late}; {recording}"
    assert len(pairs) >= len(recording.bursts) - 1


def test_live_page_brings_sound_and_picture_back_together(tmp_path, faces_dir):
    from playwright.sync_api import sync_playwright
    from tests.live_peer import serving

    chromium = _chromium()
    clip, wav = tmp_path / "flash.y4m", tmp_path / "burst.wav"
    make_flash_clip(faces_dir / CLIP, clip, LOOP_S)
    make_burst_wav(wav, LOOP_S)
    with serving(settings(tmp_path, live={"sessions": 1})) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=chromium_args(clip, wav))
        try:
            page = browser.new_context(bypass_csp=True).new_page()  # the probe's worklet comes from a blob
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(base + "/live")
            page.set_input_files("#live-source", str(faces_dir / SOURCE))
            page.check("#live-audio")
            page.click("#live-start")
            page.wait_for_function(
                "() => Number(document.getElementById('live-frames').dataset.value) > 5", timeout=60_000
            )
            webm, probe = capture(page, RECORD_S, tmp_path)
            page.click("#live-stop")
            page.wait_for_selector("#live-state >> text=stopped")
            assert errors == [], "JavaScript errors on the page"
        finally:
            browser.close()
    _check(read_recording(webm["sent"]), "the camera stream, recorded")  # the input is what the test thinks
    _check(read_recording(webm["back"]), "the swapped stream, recorded")
    _check(read_probe(probe, "back"), "the swapped stream, as played")
