"""Job files without a job row (issue 33, F18): a process killed between
storing a job's inputs and creating its row left them behind.  The sweeper
deletes a job id's files once no row has the id and they are older than
``orphan_grace_s``; files of jobs with a row, and fresh ones, stay.

The S3 case kills ``kill -9`` a real app process during the multipart upload
of a job's target (its source already stored), against moto's server."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from tests.s3_fixtures import BUCKET, KEYS, keys_under, moto_endpoint, open_uploads
from tests.service_fixtures import settings

from faceweave.service.jobdata import JobInputs
from faceweave.service.node import Service
from faceweave.service.store import new_job_id

GRACE = 600.0
REPO = Path(__file__).resolve().parents[1]


def _stored_job(service: Service, tmp: Path, *, row: bool) -> str:
    """A job id whose ``source-0`` is stored; with a job row when ``row``."""
    job_id, upload = new_job_id(), tmp / f"upload-{time.monotonic_ns()}"
    upload.write_bytes(b"a face photo")
    key = service.storage.adopt(upload, job_id, "source-0")
    if row:
        inputs = JobInputs(sources=[key], target=key)
        service.store.create(job_id=job_id, owner="local", kind="image", options={}, inputs=inputs)
    return job_id


def test_a_job_folder_without_a_row_is_swept_after_the_grace_period(tmp_path: Path):
    config = settings(tmp_path, orphan_grace_s=GRACE)
    service = Service(config)
    try:
        orphan = _stored_job(service, tmp_path, row=False)
        owned = _stored_job(service, tmp_path, row=True)
        (service.storage.root / "jobs" / "not-a-job-id").mkdir()
        now = time.time()
        assert service.sweep(now=now)["orphans"] == []  # within the grace period: perhaps being created
        later = now + GRACE + 60
        assert service.sweep(now=later)["orphans"] == [orphan]
        jobs = service.storage.root / "jobs"
        assert sorted(p.name for p in jobs.iterdir()) == sorted([owned, "not-a-job-id"])
        half = _stored_job(service, tmp_path, row=False)  # an old source, a target stored just now
        old = time.time() - 2 * GRACE
        os.utime(jobs / half / "source-0", (old, old))
        os.utime(jobs / half, (old, old))
        (jobs / half / "target").write_bytes(b"a target")
        assert service.sweep(now=time.time())["orphans"] == []  # the grace counts from the newest file
        assert service.sweep(now=time.time() + GRACE + 60)["orphans"] == [half]
    finally:
        service.close()


_CHILD = """
import json, sys, time
from pathlib import Path
from tests.service_fixtures import png_bytes, running_app, settings

tmp, endpoint = Path(sys.argv[1]), sys.argv[2]
config = settings(tmp, **json.loads(sys.argv[3]))
with running_app(config) as client:
    storage = client.app.state.service.storage
    real_part, parts = storage.client.upload_part, []

    def part(**kwargs):
        parts.append(kwargs["PartNumber"])
        if len(parts) == 2:  # the first part is stored; here the process is killed
            print("UPLOADING", kwargs["Key"], flush=True)
            time.sleep(600)
        return real_part(**kwargs)

    storage.client.upload_part = part
    target = png_bytes(2000, 2000)  # 12 MB of noise: a multipart upload of 5 MiB parts
    files = [("source", ("s.png", png_bytes(96, 96), "image/png")), ("target", ("t.png", target, "image/png"))]
    client.post("/v1/jobs", files=files)
"""


def _first_line(proc: subprocess.Popen, limit_s: float) -> str:
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()  # type: ignore[union-attr]
    try:
        return lines.get(timeout=limit_s)
    except queue.Empty:
        return ""


@pytest.mark.slow
def test_inputs_of_a_process_killed_mid_upload_are_swept(tmp_path: Path):
    pytest.importorskip("moto.server", reason="moto[server] (test extra) is not installed")
    with moto_endpoint() as endpoint:
        changes = {
            "storage": f"s3://{BUCKET}/orphans",
            "local_storage": str(tmp_path / "local"),
            "s3": {"endpoint_url": endpoint, **KEYS, "part_size_mb": 5},
            "watermark": False,
            "orphan_grace_s": GRACE,
        }
        log = (tmp_path / "child.log").open("w")
        proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(tmp_path), endpoint, json.dumps(changes)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        try:
            line = _first_line(proc, limit_s=120)
            assert line.startswith("UPLOADING"), (tmp_path / "child.log").read_text()[-3000:]
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            log.close()
        left = keys_under(endpoint, "orphans/jobs/")
        assert [key.rsplit("/", 1)[1] for key in left] == ["source-0"]  # what the attack run found
        assert [key.rsplit("/", 1)[1] for key in open_uploads(endpoint, "orphans/")] == ["target"]
        job_id = left[0].split("/")[2]

        service = Service(settings(tmp_path, **changes))
        try:
            owned = _stored_job(service, tmp_path, row=True)
            assert service.sweep()["orphans"] == []  # within the grace period
            swept = service.sweep(now=time.time() + GRACE + 60)
            assert swept["orphans"] == [job_id]
            assert [key.split("/")[2] for key in keys_under(endpoint, "orphans/jobs/")] == [owned]
            # the stale-upload sweep (older than an hour) aborted the open upload: moto dates every upload 2010
            assert open_uploads(endpoint, "orphans/") == []
        finally:
            service.close()
