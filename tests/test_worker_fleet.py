"""The pieces of fail-over and of the worker metrics, without a broker:
the store's hand-back and poison guard, :func:`run_job` with a fault check,
the self-test, the supervisor's device watch, the queue-age gauge and the
stage mapping.  (On real workers: ``tests/test_service_failover.py``.)"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from faceweave.errors import DeviceFaultError, InvalidOptionError, NoFaceError, UnreadableFileError
from faceweave.monitoring import DeviceCollector, DeviceReading
from faceweave.service.distributed.fleet import WorkerState
from faceweave.service.distributed.telemetry import stage_seconds
from faceweave.service.distributed.worker_main import Supervisor
from faceweave.service.jobs import RunConfig
from faceweave.service.metrics import Metrics
from faceweave.service.selftest import may_be_device_fault, self_test, self_test_picture
from faceweave.service.storage import LocalStorage
from faceweave.service.store import JobStore
from faceweave.service.worker import run_job


def _claimed(store: JobStore, worker: str = "w1"):
    store.create(owner="alice", kind="image", options={}, inputs={"target": "t"}, now=1.0)
    return store.claim(worker, lease_s=60.0)


# ---------------------------------------------------------------- the store
def test_a_handed_back_job_is_queued_with_its_attempt_counted_then_failed_at_the_limit(store):
    job = _claimed(store)
    state = store.hand_back(
        job.id, worker_id="w1", attempt=1, code="device_fault", message="self-test failed", max_attempts=2, ttl_s=60
    )
    assert state == "queued"
    queued = store.get(job.id)
    assert (queued.state, queued.attempts, queued.worker_id, queued.error_code) == ("queued", 1, None, "device_fault")
    assert queued.error_message == "handed back to the queue: self-test failed"
    again = store.claim("w2", lease_s=60.0)
    assert again.attempts == 2
    kwargs = dict(code="device_fault", message="self-test failed: CUDA", max_attempts=2, ttl_s=60)
    assert store.hand_back(job.id, worker_id="w1", attempt=2, **kwargs) == "lost"  # not w1's any more
    assert store.hand_back(job.id, worker_id="w2", attempt=2, **kwargs) == "failed"
    failed = store.get(job.id)
    assert failed.state == "failed" and failed.error_code == "device_fault"
    assert failed.error_message == "failed on 2 worker(s) in a row; the last: self-test failed: CUDA"


def test_the_oldest_queued_job_gives_the_queue_age(store):
    assert store.oldest_queued() is None
    store.create(owner="a", kind="image", options={}, inputs={"target": "t"}, now=100.0)
    store.create(owner="a", kind="image", options={}, inputs={"target": "t"}, now=50.0)
    assert store.oldest_queued() == 50.0
    text = Metrics().render(store.counts(), oldest_queued=store.oldest_queued()).decode()
    age = next(float(line.split()[1]) for line in text.splitlines() if line.startswith("faceweave_queue_oldest"))
    assert age > 1e9  # seconds since 1970 + 50 s: far in the past
    empty = Metrics().render({"queued": 0}, oldest_queued=None).decode()
    assert "faceweave_queue_oldest_age_seconds 0.0" in empty


# ---------------------------------------------------------------- run_job
class _BrokenSwapper:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def swap(self, *args, **kwargs):
        raise self.error


class _Models:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def swapper(self, options):
        return _BrokenSwapper(self.error)


def _run(tmp_path: Path, store: JobStore, error: Exception, fault: DeviceFaultError | None):
    storage = LocalStorage(tmp_path / "storage")
    (storage.root / "t").write_bytes(b"x")
    job = _claimed(store)
    seen: list[BaseException] = []

    def check(raised: BaseException) -> DeviceFaultError | None:
        seen.append(raised)
        return fault

    config = RunConfig(max_attempts=3, watermark=False)
    outcome = run_job(
        job, _Models(error), store, storage, worker_id="w1", config=config, fault_check=check, stop=threading.Event()
    )
    return outcome, store.get(job.id), seen, storage


def test_a_device_fault_hands_the_job_back_instead_of_failing_it(tmp_path, store):
    fault = DeviceFaultError("self-test failed: RuntimeError: CUDA error 700")
    outcome, row, seen, storage = _run(tmp_path, store, RuntimeError("CUDA error 700"), fault)
    assert outcome.state == "handed_back" and outcome.error_code == "device_fault"
    assert [type(e) for e in seen] == [RuntimeError]
    assert row.state == "queued" and row.attempts == 1 and row.error_code == "device_fault"
    assert not list((storage.jobs / row.id).glob("result-*"))
    assert (storage.root / "t").exists()  # the inputs stay for the next worker


def test_an_error_that_the_self_test_clears_fails_the_job(tmp_path, store):
    outcome, row, seen, storage = _run(tmp_path, store, RuntimeError("bad tensor in this job"), None)
    assert outcome.state == "failed" and row.state == "failed" and row.error_code == "internal_error"
    assert not (storage.root / "t").exists()  # a finished job's inputs go


@pytest.mark.parametrize(
    ("error", "maybe"),
    [
        (RuntimeError("CUDA error"), True),
        (MemoryError(), True),
        (NoFaceError("no face", role="target"), False),
        (UnreadableFileError("truncated"), False),
        (InvalidOptionError("bad"), False),
        (KeyboardInterrupt(), False),
    ],
)
def test_only_errors_that_may_be_the_device_s_are_self_tested(error, maybe):
    assert may_be_device_fault(error) is maybe


# ---------------------------------------------------------------- the self-test
@pytest.mark.slow
def test_the_self_test_swaps_the_bundled_face_and_catches_a_broken_swapper():
    from faceweave.options import SwapOptions
    from faceweave.service.models import JobModels

    picture = self_test_picture()
    assert picture.shape == (220, 180, 3) and picture.dtype == np.uint8
    models = JobModels()
    try:
        models.prepare()
        assert self_test(models, SwapOptions()) > 0
        with pytest.raises(DeviceFaultError, match="self-test failed: RuntimeError: injected"):
            self_test(_Models(RuntimeError("injected")), SwapOptions())  # type: ignore[arg-type]
    finally:
        models.close()


# ---------------------------------------------------------------- the supervisor
@dataclass
class _Control:
    calls: list

    def cancel_consumer(self, queue, destination, reply):
        self.calls.append((queue, tuple(destination), reply))


@dataclass
class _App:
    control: _Control


class _Monitor:
    vendor = "nvidia"

    def __init__(self) -> None:
        self.readings = [
            DeviceReading(vendor="nvidia", device="0", name="H200", healthy=True),
            DeviceReading(vendor="nvidia", device="1", name="H200", healthy=True),
        ]

    def read(self):
        return list(self.readings)

    def close(self) -> None:
        pass


def _watch(monitor: _Monitor) -> tuple[Supervisor, WorkerState, _App]:
    state = WorkerState(1)
    app = _App(_Control([]))
    return Supervisor(app, state, "w@test", devices=DeviceCollector(monitor, worker="w@test")), state, app


def test_a_device_in_an_error_state_makes_the_worker_unhealthy():
    monitor = _Monitor()
    supervisor, state, _ = _watch(monitor)
    supervisor.check_devices()
    assert state.healthy
    monitor.readings[1] = DeviceReading(vendor="nvidia", device="1", name="H200", healthy=False)
    supervisor.check_devices()
    assert not state.healthy and state.fault == "device in an error state: nvidia:1 H200"


def test_a_device_gone_makes_the_worker_unhealthy_and_it_stops_consuming():
    monitor = _Monitor()
    supervisor, state, app = _watch(monitor)
    supervisor.check_devices()
    monitor.readings.pop()
    supervisor.tick_s = 0.05
    with supervisor:
        supervisor.device_check_s = 0.0
        for _ in range(100):
            if app.control.calls:
                break
            threading.Event().wait(0.05)
    assert state.fault == "device gone: 1 of 2 accelerator(s) visible"
    assert app.control.calls == [("faceweave", ("w@test",), False)]


def test_a_host_only_worker_is_never_marked_gone_and_idle_time_counts_after_work():
    class Host(_Monitor):
        vendor = "host"

        def __init__(self) -> None:
            self.readings = [DeviceReading(vendor="host", device="cpu")]

    supervisor, state, _ = _watch(Host())
    supervisor.check_devices()
    supervisor.check_devices()
    assert state.healthy
    supervisor.max_idle_s = 60.0
    state.readiness.mark_ready()
    try:
        with state.task():
            assert state.busy == 1 and state.idle_seconds() == 0.0
        assert 0.0 <= state.idle_seconds() < 5.0 and not supervisor._idle_too_long()
        supervisor.max_idle_s = 0.001
        threading.Event().wait(0.01)
        assert supervisor._idle_too_long()
        state.start_draining()
        assert not supervisor._idle_too_long()  # shutting down already
    finally:
        state.readiness.mark_gone()


def test_stage_seconds_sum_the_pipeline_steps_per_frame():
    timings = {"decode": 100.0, "detect": 20.0, "mesh": 10.0, "swap": 50.0, "paste": 5.0, "blend": 5.0, "x": 9.0}
    assert stage_seconds(timings, per=10) == pytest.approx(
        {"decode": 0.01, "detect": 0.003, "model": 0.005, "composite": 0.001}
    )


# ---------------------------------------------------------------- the embedded pool (serve without a broker)
@pytest.mark.slow
def test_an_embedded_worker_whose_device_fails_hands_back_and_the_node_turns_unhealthy(
    tmp_path, monkeypatch, faces_dir
):
    from tests.service_fixtures import running_app, settings, wait_for

    from faceweave.analysis import FaceAnalyser

    single = faces_dir / "single"
    files = [
        ("source", ("s.jpg", (single / "paul_rudd.jpg").read_bytes(), "image/jpeg")),
        ("target", ("t.jpg", (single / "biden2.jpg").read_bytes(), "image/jpeg")),
    ]
    with running_app(settings(tmp_path, workers=1, watermark=False)) as client:

        def broken(self, *args, **kwargs):
            raise RuntimeError("CUDA error 700: an illegal memory access was encountered")

        monkeypatch.setattr(FaceAnalyser, "analyse", broken)  # the device breaks after start
        job_id = client.post("/v1/jobs", files=files).json()["id"]

        def handed_back():
            job = client.get(f"/v1/jobs/{job_id}").json()
            return job if job["state"] == "queued" and job["error"] else None

        job = wait_for(handed_back, what="the job to be handed back", limit_s=60.0)
        assert job["error"]["code"] == "device_fault" and job["attempts"] == 1
        ready = client.get("/readyz")
        assert ready.status_code == 503 and "1 of 1 worker(s) stopped on a device fault" in ready.text
        assert client.get("/healthz").status_code == 503
        assert 'faceweave_workers{state="unhealthy"} 1.0' in client.get("/metrics").text
