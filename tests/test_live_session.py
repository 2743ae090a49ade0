"""The transport-independent live session with real models: frames pushed
in and the newest swapped frame taken out (as a browser transport would),
source photos changed mid-stream (a photo without a face keeps the previous
ones), a stop from another thread that finishes the recording, and faces
tracked across the frames a slow swap drops."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from tests.test_live_cli import largest_face_embedding

from faceweave.errors import NoFaceError
from faceweave.options import SwapOptions
from faceweave.pipeline import FaceSwapper

pytestmark = pytest.mark.slow

SOURCE = "single/biden2.jpg"
OTHER = "single/paul_rudd.jpg"
TALK = "video/lp_d18_talking_face.mp4"


@pytest.fixture(scope="module")
def video():
    from faceweave.video.pipeline import VideoSwapper

    with FaceSwapper(SwapOptions(working_size=192)) as swapper:
        yield VideoSwapper(swapper)


def _run_in_thread(session, source, outputs):
    outcome: dict = {}

    def run():
        try:
            outcome["report"] = session.run(source, outputs)
        except BaseException as exc:  # noqa: BLE001 - the test raises it
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_pushed_frames_come_out_swapped(faces_dir, video, astronaut):
    from faceweave.analysis import embedding_distance
    from faceweave.io import read_image
    from faceweave.live.endpoints import LatestFrame, PushSource
    from faceweave.live.session import LiveSession

    session = LiveSession(video, [faces_dir / SOURCE])
    source, latest = PushSource(rate=15), LatestFrame()
    thread, outcome = _run_in_thread(session, source, [latest])
    got = []
    for i in range(30):
        source.push(astronaut, i / 15)
        frame = latest.get(got[-1][0] if got else 0, timeout=0.1)
        if frame is not None:
            got.append(frame)
    source.end()
    thread.join()
    report = outcome["report"]
    assert report.frames_in == 30 and report.frames_out + report.dropped == 30 and report.frames_out >= 3
    assert report.end_reason == "ended" and report.latency_p95_ms is not None
    number, last = latest.get(0)
    pixels = last.rgb
    assert number == report.frames_out
    analyser = video.swapper.analyser
    src = largest_face_embedding(analyser, read_image(faces_dir / SOURCE).pixels)
    before, after = largest_face_embedding(analyser, astronaut), largest_face_embedding(analyser, pixels)
    assert embedding_distance(after, src) < embedding_distance(before, src)


def test_sources_change_mid_stream_and_a_faceless_photo_keeps_them(tmp_path, faces_dir, video):
    from faceweave.io import write_image
    from faceweave.live.session import LiveSession

    session = LiveSession(video, [faces_dir / SOURCE])
    first = session.sources
    blank = tmp_path / "blank.png"
    write_image(blank, np.full((128, 128, 3), 200, np.uint8))
    with pytest.raises(NoFaceError):
        session.set_sources([blank])
    assert session.sources == first
    session.set_sources([faces_dir / OTHER])
    assert session.sources != first and len(session.sources) == 1


def test_stop_from_another_thread_finishes_the_recording(tmp_path, faces_dir, video):
    from faceweave.live.inputs import parse_input
    from faceweave.live.muxer import StreamMuxer
    from faceweave.live.outputs import parse_output
    from faceweave.live.reader import LiveReader
    from faceweave.live.session import LiveSession
    from faceweave.video.io import probe_video

    session = LiveSession(video, [faces_dir / SOURCE])
    out = tmp_path / "rec.mp4"
    with LiveReader(parse_input(str(faces_dir / TALK), loop=True)) as reader:
        muxer = StreamMuxer(parse_output(str(out)), audio=False)
        timer = threading.Timer(2.0, session.stop)
        timer.start()
        report = session.run(reader, [muxer])
    assert report.end_reason == "stopped" and report.frames_out >= 3
    assert probe_video(out).frame_count == report.frames_out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec.mp4"]


def test_tracking_carries_faces_across_dropped_frames(faces_dir, video):
    from faceweave.video.io import VideoReader
    from faceweave.video.tracker import FaceTracker

    ids = []
    with FaceTracker(video.swapper.analyser, detect_every=8) as tracker, VideoReader(faces_dir / TALK) as reader:
        for frame in reader:
            if frame.index % 3:  # two frames in three dropped, as a slow swap would
                continue
            tracks = tracker.update(frame.pixels, frame.time)
            ids.append([t.id for t in tracks])
            if frame.index >= 90:
                break
    assert all(found == [0] for found in ids), ids  # one face, one track, never lost
