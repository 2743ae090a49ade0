"""Video jobs that cannot wedge a worker: a failing pipeline thread fails the
job promptly, limits hold for every video (pixels, and length from the
header or while decoding), targets too small to mark are refused up front,
and a dead attempt's files do not outlive it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from service_fixtures import running_app, set_job_fields, settings, wait_for, wait_state

pytestmark = pytest.mark.slow


def _video(path: Path, width: int, height: int, frames: int, *, live: bool = False) -> bytes:
    from video_fixtures import black_video

    options = {"live": "1"} if live else None
    return black_video(path, width, height, frames, fmt="matroska" if live else None, options=options).read_bytes()


@pytest.fixture(scope="module")
def source(faces_dir: Path) -> bytes:
    return (faces_dir / "single/biden2.jpg").read_bytes()


def _post(client, source: bytes, target: bytes, name: str):
    return client.post("/v1/jobs", files=[("source", ("s.jpg", source)), ("target", (name, target))])


def _left_in(folder: Path) -> list[str]:
    """The files under ``folder`` (the job database aside)."""
    return sorted(p.name for p in folder.rglob("*") if p.is_file() and p.name != "jobs.db")


def test_a_failing_pipeline_thread_fails_the_job_and_the_next_job_runs(tmp_path, source, faces_dir, monkeypatch):
    from faceweave.video.pipeline import VideoSwapper

    original = VideoSwapper.render

    def render(self, pixels, plan, timings, **kwargs):
        if getattr(pixels, "shape", (0,))[0] and plan:  # a frame with a face: the render thread fails
            raise RuntimeError("injected render fault")
        return original(self, pixels, plan, timings, **kwargs)

    monkeypatch.setattr(VideoSwapper, "render", render)
    clip = tmp_path / "clip.mp4"
    from faceweave.video.io import VideoReader, VideoWriter

    with (
        VideoReader(faces_dir / "video/lp_d18_talking_face.mp4", end=0.5) as reader,
        VideoWriter(clip, info=reader.info) as writer,
    ):
        for frame in reader:
            writer.write(frame.pixels, frame.time)
    with running_app(settings(tmp_path, workers=1)) as client:
        failing = _post(client, source, clip.read_bytes(), "clip.mp4").json()["id"]
        photo = client.post("/v1/jobs", files=[("source", ("s.jpg", source)), ("target", ("t.jpg", source))])
        job = wait_state(client, failing, ("succeeded", "failed"), limit_s=60)
        assert job["state"] == "failed" and job["attempts"] == 1, job
        assert job["error"]["code"] == "internal_error"
        after = wait_state(client, photo.json()["id"], ("succeeded", "failed"), limit_s=60)
        assert after["state"] == "succeeded", after
        assert _left_in(Path(settings(tmp_path).storage) / "jobs" / failing) == []


@pytest.mark.parametrize("watermark", [True, False])
def test_a_video_too_small_to_mark_is_refused_up_front(tmp_path, source, watermark):
    tiny = _video(tmp_path / "tiny.mp4", 32, 32, 50)
    with running_app(settings(tmp_path, workers=0, watermark=watermark)) as client:
        answer = _post(client, source, tiny, "tiny.mp4")
        if watermark:
            assert answer.status_code == 422, answer.text
            assert answer.json()["error"]["code"] == "too_small_to_mark"
            assert "32x32" in answer.json()["error"]["message"]
        else:
            assert answer.status_code == 202, answer.text
    assert _left_in(Path(settings(tmp_path).storage) / "uploads") == []


def test_the_pixel_limit_applies_to_videos(tmp_path, source):
    huge = _video(tmp_path / "huge.mp4", 8192, 8192, 1)
    assert len(huge) < 100_000  # a tiny file that would decode to 8192x8192
    with running_app(settings(tmp_path, workers=0)) as client:
        answer = _post(client, source, huge, "huge.mp4")
        assert answer.status_code == 413, answer.text
        assert answer.json()["error"]["code"] == "video_too_large"
        assert "8192x8192" in answer.json()["error"]["message"]
    assert _left_in(Path(settings(tmp_path).storage)) == []


@pytest.mark.parametrize("live", [False, True], ids=["mp4", "live-mkv"])
def test_frame_limit_holds_when_the_container_states_no_length(tmp_path, source, live):
    from faceweave.video.io import probe_video

    path = tmp_path / ("long.mkv" if live else "long.mp4")
    data = _video(path, 64, 64, 60, live=live)
    assert (probe_video(path).duration is None) == live
    with running_app(settings(tmp_path, workers=0, limits={"max_video_frames": 40})) as client:
        answer = _post(client, source, data, path.name)
        assert answer.status_code == 413, answer.text
        assert answer.json()["error"]["code"] == "video_too_large"
        assert "40" in answer.json()["error"]["message"]
    assert _left_in(Path(settings(tmp_path).storage)) == []


def test_length_limits_hold_while_the_worker_decodes(tmp_path, source, monkeypatch):
    """Where the upload check cannot see the length (simulated here), the
    worker's reader counts frames as it decodes and fails the job."""
    from faceweave.video.io.probe import VideoLength

    path = tmp_path / "long.mkv"
    data = _video(path, 64, 64, 60, live=True)
    monkeypatch.setattr(
        "faceweave.video.io.probe.measure_length", lambda *a, **k: VideoLength(frames=1, seconds=0.04, complete=True)
    )
    with running_app(settings(tmp_path, workers=1, limits={"max_video_frames": 40})) as client:
        answer = _post(client, source, data, path.name)
        assert answer.status_code == 202, answer.text
        job = wait_state(client, answer.json()["id"], ("succeeded", "failed"), limit_s=60)
        assert job["state"] == "failed" and job["error"]["code"] == "video_too_large", job
        assert job["attempts"] == 1
        assert _left_in(Path(settings(tmp_path).storage) / "jobs" / job["id"]) == []


def test_a_dead_attempts_files_are_removed_by_the_next_attempt(tmp_path, source):
    with running_app(settings(tmp_path, workers=0)) as a:
        job_id = a.post("/v1/jobs", files=[("source", ("s.jpg", source)), ("target", ("t.jpg", source))]).json()["id"]
        store = a.app.state.service.store
        store.claim("dead-worker", lease_s=60)
        folder = Path(settings(tmp_path).storage).resolve() / "jobs" / job_id
        # what a worker killed mid-write leaves: a temporary result, a preview, segment parts
        (folder / ".result-1.png.0123abcd.tmp").write_bytes(b"half")
        (folder / "preview-1.png").write_bytes(b"old preview")
        (folder / "parts-1").mkdir()
        (folder / "parts-1" / "part_00000.mp4").write_bytes(b"part")
        store.heartbeat(
            job_id, worker_id="dead-worker", attempt=1, lease_s=60, preview_path=f"jobs/{job_id}/preview-1.png"
        )
        set_job_fields(store, job_id, lease_expires=time.time() - 1)
        requeued, _ = store.requeue_expired(max_attempts=3)
        assert requeued == [job_id] and store.get(job_id).preview_path is None
    with running_app(settings(tmp_path, workers=1)) as b:
        done = wait_state(b, job_id, ("succeeded", "failed"))
        assert done["state"] == "succeeded" and done["attempts"] == 2, done
        # the worker removes the inputs just after it records the outcome
        left = wait_for(
            lambda: (names := sorted(p.name for p in folder.iterdir())) == ["result-2.png"] and names,
            what="the inputs to be removed",
            limit_s=10.0,
        )
        assert left == ["result-2.png"]
