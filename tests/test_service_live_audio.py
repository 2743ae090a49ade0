"""The microphone's sound back in a live session: each audio frame is held
as long after its arrival as the swapped video's frames are sent after
theirs (``AvSync``, checked on a clock of its own), and with an aiortc peer whose offer has a microphone
(a 440 Hz tone) the answer sends audio back on the same connection and the
tone comes back beside the swapped frames; an offer without audio gets video
alone, as before."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
from tests.service_fixtures import settings


# ------------------------------------------------------------------ the hold (pure)
def test_audio_goes_as_long_after_its_arrival_as_the_swapped_video_does():
    from faceweave.service.webrtc.sync import MAX_HOLD_S, AvSync

    sync = AvSync()
    sync.camera_frame(0.0, arrived=100.0)
    sync.camera_frame(0.066, arrived=100.066)
    sync.camera_frame(0.133, arrived=100.133)
    assert sync.hold_s is None and not sync.audio_due(100.01, now=100.02)  # no swapped frame sent yet
    assert sync.audio_due(100.01, now=100.01 + MAX_HOLD_S)  # held at most MAX_HOLD_S
    sync.video_sent(0.0, now=100.12)  # sent 120 ms after its camera frame arrived
    assert sync.video_at == 100.0 and sync.hold_s == pytest.approx(0.12)
    assert not sync.audio_due(100.05, now=100.16) and sync.audio_due(100.05, now=100.1701)
    assert sync.due_at(100.05) == pytest.approx(100.17)
    sync.video_sent(0.133, now=100.233)  # 0.066 was dropped as stale: forgotten, the video has passed it
    assert sync.video_at == 100.133 and sync.hold_s == pytest.approx(0.11)  # the median of 120 and 100 ms
    sync.video_sent(0.066, now=100.3)  # a frame no longer kept neither moves the video back nor counts
    assert sync.video_at == 100.133 and sync.hold_s == pytest.approx(0.11)
    sync.video_ended = True
    assert sync.audio_due(100.5, now=100.5)  # no more video: nothing to wait for


def test_the_hold_follows_the_recent_frames_and_stays_under_its_bound():
    from faceweave.service.webrtc.sync import _LATENCIES, MAX_HOLD_S, AvSync

    sync = AvSync()
    for i in range(_LATENCIES):  # a stall: every frame sent 5 s late
        sync.camera_frame(i / 15, arrived=i / 15)
        sync.video_sent(i / 15, now=i / 15 + 5)
    assert sync.hold_s == pytest.approx(5) and sync.due_at(10.0) == pytest.approx(10.0 + MAX_HOLD_S)
    for i in range(_LATENCIES, 2 * _LATENCIES):  # the swap caught up: 80 ms; the stall is forgotten
        sync.camera_frame(i / 15, arrived=i / 15)
        sync.video_sent(i / 15, now=i / 15 + 0.08)
    assert sync.hold_s == pytest.approx(0.08)


def test_only_the_frames_in_flight_are_kept():
    from faceweave.service.webrtc.sync import AvSync

    sync = AvSync()
    for i in range(1000):
        sync.camera_frame(i / 30, arrived=i / 30)
    assert len(sync._frames) == 256
    sync.video_sent(999 / 30, now=999 / 30)
    assert len(sync._frames) == 0 and sync.video_at == pytest.approx(999 / 30)


def test_a_sender_that_falls_behind_drops_the_oldest_due_audio():
    from faceweave.service.webrtc.sync import BACKLOG, AvSync

    sync = AvSync()
    sync.camera_frame(0.0, arrived=10.0)
    sync.video_sent(0.0, now=10.0)  # no hold
    arrivals = [9.0 + 0.02 * i for i in range(BACKLOG + 30)]  # 9.00 ... 9.88: all due
    assert sync.stale_audio(arrivals, now=10.01) == 30  # keep the newest BACKLOG of the due ones
    assert sync.stale_audio(arrivals[:BACKLOG], now=10.01) == 0
    later = [10.0 + 0.02 * i for i in range(1, 40)]  # not due yet: held, never dropped
    assert sync.stale_audio(later, now=10.01) == 0
    assert sync.stale_audio(arrivals[:5] + later, now=10.01) == 0


# ------------------------------------------------------------------ with an aiortc peer
def _tone_share(sound: list[np.ndarray], hz: int, rate: int) -> float:
    """The share of the sound's energy within 20 Hz of ``hz``."""
    samples = np.concatenate(sound)
    spectrum = np.abs(np.fft.rfft(samples - samples.mean())) ** 2
    freqs = np.fft.rfftfreq(len(samples), 1 / rate)
    return float(spectrum[np.abs(freqs - hz) < 20].sum() / max(spectrum.sum(), 1e-9))


async def _session(base: str, photo: bytes, frames: list[np.ndarray], *, audio: bool) -> dict:
    import httpx
    from aiortc import RTCSessionDescription
    from tests.live_peer import Received, offer_sdp

    pc, sdp = await offer_sdp(frames=frames, audio=audio)
    received = Received()
    pc.on("track", received.on_track)
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        response = await http.post("/v1/live", files={"source": ("s.jpg", photo)}, data={"sdp": sdp})
        assert response.status_code == 201, response.text
        answer = response.json()
        await pc.setRemoteDescription(RTCSessionDescription(sdp=answer["sdp"], type="answer"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (len(received.frames) < 8 or (audio and len(received.sound) < 50)):
            await asyncio.sleep(0.05)
        stats = (await http.get(answer["links"]["self"])).json()
        metrics = (await http.get("/metrics")).text
        await http.delete(answer["links"]["self"])
    await pc.close()
    return {"answer": answer["sdp"], "received": received, "stats": stats, "metrics": metrics}


def _audio_direction(sdp: str) -> str | None:
    section = None
    for line in sdp.split("\r\n"):
        if line.startswith("m="):
            section = line.split()[0]
        elif section == "m=audio" and line in ("a=sendrecv", "a=sendonly", "a=recvonly", "a=inactive"):
            return line[2:]
    return None


@pytest.mark.slow
def test_the_microphone_comes_back_beside_the_swapped_video(tmp_path, faces_dir, astronaut):
    pytest.importorskip("aiortc", reason="the webrtc extra (aiortc) is not installed")
    from tests.live_peer import AUDIO_RATE, TONE_HZ, serving

    photo = (faces_dir / "single" / "biden2.jpg").read_bytes()
    frames = [np.ascontiguousarray(astronaut)]
    with serving(settings(tmp_path, live={"sessions": 1})) as base:
        with_audio = asyncio.run(_session(base, photo, frames, audio=True))
        without = asyncio.run(_session(base, photo, frames, audio=False))

    got = with_audio["received"]
    assert _audio_direction(with_audio["answer"]) == "sendrecv"
    assert sorted(got.kinds) == ["audio", "video"]
    assert len(got.frames) >= 8 and len(got.sound) >= 50
    # the peer's own tone came back (the server sends the microphone, not a sound of its own)
    assert _tone_share(got.sound[10:], TONE_HZ, AUDIO_RATE) > 0.5
    assert with_audio["stats"]["audio_frames"] >= 50 and with_audio["stats"]["audio_hold_p50_ms"] is not None
    assert "audio_dropped" in with_audio["stats"]  # frames dropped when the sender falls behind (none asked here)
    assert 'faceweave_live_frames_total{kind="audio"}' in with_audio["metrics"]

    # no audio in the offer: video alone, as before
    plain = without["received"]
    assert _audio_direction(without["answer"]) is None and "m=audio" not in without["answer"]
    assert plain.kinds == ["video"] and plain.sound == [] and len(plain.frames) >= 8
    assert without["stats"]["audio_frames"] == 0 and without["stats"]["audio_hold_p50_ms"] is None
