"""The Live page's sound and picture as the browser receives them: a fake
camera whose whole frame flashes at every whole second and a fake microphone
with a tone burst at the same moments (tests/browser_av.py) go through the
page to the server and back; the swapped stream is recorded in the page
(MediaRecorder) and probed where the page plays it (requestVideoFrameCallback
and WebAudio).  Both views of the returned stream have video and sound, the
flashes and the bursts are found, and every burst pairs with a flash of its
own second's kind (four colours and pitches in turn) within a generous
window, 0.6 s where the page plays them (but for the first, whose flash may
precede the recording, and one whose flash the server may have dropped as
stale): a sound that does not come back, or is held the whole second the
server may hold it, or comes back a second off, fails.  No figure is held to
a target (benchmarks/live_browser_av.py measures them); the windows are
about twice the largest offsets measured on a loaded machine.

Needs Debian's ``chromium``, ``playwright`` and ``aiortc``; skipped without them."""

from __future__ import annotations

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
from tests.test_service_live_page import _chromium

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SOURCE, CLIP = "single/biden2.jpg", "video/lp_d18_talking_face.mp4"
#: the clip and the WAV loop every this many seconds (a multiple of the four kinds: they stay in turn)
LOOP_S = 4
RECORD_S = 6
#: a burst and its flash at most this far apart where the page plays them (measured: -0.2 to +0.4 s
#: on a loaded machine; a sound held the whole sync.MAX_HOLD_S comes +0.8 s late, one a second off +1 s)
PLAYED_WINDOW_S = 0.6
#: the same in the recording, whose timeline puts the swapped stream's sound up to 0.25 s later still
RECORDED_WINDOW_S = 0.9
#: below this many swapped frames a second, as played (about 8 on this machine), flashes are dropped as stale
#: and the sync cannot be read (one full-suite run met 4.6 fps, another 5.7 twice running): the test records
#: again, up to RETRIES times
MIN_FPS = 6.0
RETRIES = 3


def _check(recording: Recording, what: str, window_s: float) -> None:
    assert recording.video_frames > 0, f"{what}: no picture"
    assert recording.has_audio, f"{what}: no sound"
    assert len(recording.flashes) >= 2, f"{what}: flashes {recording.flashes}"
    assert len(recording.bursts) >= 3, f"{what}: bursts {recording.bursts}"
    pairs, lone = pair_events(recording, window_s)
    # the first burst's flash may come before the recording began, and one flash may be
    # a stale frame the server dropped; a sound a second off pairs with none
    unpaired = [b for b in lone if b != recording.bursts[0]]
    assert len(unpaired) <= 1, f"{what}: bursts with no flash of their kind within {window_s} s: {lone}; {recording}"
    assert len(pairs) >= max(2, len(recording.bursts) - 2), f"{what}: {len(pairs)} pairs; {recording}"


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
            for _ in range(RETRIES):  # the machine fell behind for these seconds: again
                if read_probe(probe, "back").fps >= MIN_FPS:
                    break
                webm, probe = capture(page, RECORD_S, tmp_path)
            page.click("#live-stop")
            page.wait_for_selector("#live-state >> text=stopped")
            assert errors == [], "JavaScript errors on the page"
        finally:
            browser.close()
    # the input is what the test thinks it is
    _check(read_recording(webm["sent"]), "the camera stream, recorded", RECORDED_WINDOW_S)
    _check(read_recording(webm["back"]), "the swapped stream, recorded", RECORDED_WINDOW_S)
    _check(read_probe(probe, "back"), "the swapped stream, as played", PLAYED_WINDOW_S)
