"""The service API with real models and real photos: synchronous swaps, the
job life cycle (image and video), range downloads, cancelling, restarts,
dead workers and expiry.  One app (models loaded once) serves the module."""

from __future__ import annotations

import base64
import io
import json
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from tests.service_fixtures import (
    png_bytes,
    running_app,
    set_job_fields,
    settings,
    wait_for,
    wait_state,
)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("api")
    config = settings(tmp, workers=1, sync_slots=1)
    with running_app(config) as c:
        c.storage = Path(config.storage).resolve()
        c.audit = c.storage / "audit.jsonl"
        yield c


@pytest.fixture(scope="module")
def photos(faces_dir: Path) -> dict[str, bytes]:
    single = faces_dir / "single"
    return {"source": (single / "paul_rudd.jpg").read_bytes(), "target": (single / "biden2.jpg").read_bytes()}


def _files(photos, target: bytes | None = None, target_name: str = "target.jpg"):
    return [
        ("source", ("source.jpg", photos["source"], "image/jpeg")),
        ("target", (target_name, photos["target"] if target is None else target, "application/octet-stream")),
    ]


def _error(response) -> dict:
    assert "Traceback" not in response.text
    return response.json()["error"]


def test_health_ready_and_openapi(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready", "workers": 1, "sync_slots": 1}
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/swap", "/v1/jobs", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/result"} <= set(paths)


def test_sync_swap_answers_a_png(client, photos):
    response = client.post("/v1/swap", files=_files(photos))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"
    assert response.headers["x-faceweave-faces-swapped"] == "1"
    image = Image.open(io.BytesIO(response.content))
    target = Image.open(io.BytesIO(photos["target"]))
    assert (image.format, image.size) == ("PNG", target.size)
    # the face changed, the corners did not
    out = np.asarray(image.convert("RGB")).astype(int)
    ref = np.asarray(target.convert("RGB")).astype(int)
    assert np.abs(out - ref).mean() > 0.5
    assert np.abs(out[:40, :40] - ref[:40, :40]).mean() < 3.0


@pytest.mark.parametrize(("query", "headers"), [("?format=json", {}), ("", {"Accept": "application/json"})])
def test_sync_swap_answers_json_with_base64(client, photos, query, headers):
    response = client.post(f"/v1/swap{query}", files=_files(photos), data={"format": "jpg"}, headers=headers)
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["media_type"], body["faces_swapped"], body["format"]) == ("image/jpeg", 1, "jpg")
    image = Image.open(io.BytesIO(base64.b64decode(body["image"])))
    assert image.format == "JPEG" and image.size == (body["width"], body["height"])


def test_no_face_is_422(client, photos):
    response = client.post("/v1/swap", files=_files(photos, target=png_bytes(320, 240)))
    assert response.status_code == 422
    assert _error(response)["code"] == "no_face"


def test_unknown_option_and_video_to_sync_swap_are_refused(client, photos, faces_dir):
    bad = client.post("/v1/swap", files=_files(photos), data={"options": json.dumps({"swapper_name": "x"})})
    assert bad.status_code == 422 and "swapper_name" in _error(bad)["message"]
    video = (faces_dir / "video" / "lp_d18_talking_face.mp4").read_bytes()
    refused = client.post("/v1/swap", files=_files(photos, target=video, target_name="v.mp4"))
    assert refused.status_code == 415 and "/v1/jobs" in _error(refused)["message"]


def test_image_job_life_cycle_with_range_downloads(client, photos):
    created = client.post("/v1/jobs", files=_files(photos), data={"format": "png"})
    assert created.status_code == 202, created.text
    job = created.json()
    assert job["state"] in ("queued", "running") and created.headers["location"] == f"/v1/jobs/{job['id']}"
    done = wait_state(client, job["id"], ("succeeded", "failed"))
    assert done["state"] == "succeeded", done
    assert (done["progress"], done["result"]["faces_swapped"], done["attempts"]) == (100.0, 1, 1)
    assert done["links"]["result"] == f"/v1/jobs/{job['id']}/result"
    preview = client.get(done["links"]["preview"])
    assert preview.status_code == 200 and preview.headers["content-type"] == "image/png"

    whole = client.get(done["links"]["result"])
    assert whole.status_code == 200 and whole.headers["accept-ranges"] == "bytes"
    data = whole.content
    assert Image.open(io.BytesIO(data)).format == "PNG"
    part = client.get(done["links"]["result"], headers={"Range": "bytes=100-1099"})
    assert part.status_code == 206 and part.content == data[100:1100]
    assert part.headers["content-range"] == f"bytes 100-1099/{len(data)}"
    tail = client.get(done["links"]["result"], headers={"Range": "bytes=-64"})
    assert tail.status_code == 206 and tail.content == data[-64:]
    beyond = client.get(done["links"]["result"], headers={"Range": f"bytes={len(data)}-"})
    assert beyond.status_code == 416 and beyond.headers["content-range"] == f"bytes */{len(data)}"
    assert _error(beyond)["code"] == "range_not_satisfiable"

    listed = [j["id"] for j in client.get("/v1/jobs").json()["jobs"]]
    assert job["id"] in listed
    lines = [json.loads(line) for line in client.audit.read_text().splitlines()]
    mine = [line for line in lines if line["options"].get("job_id") == job["id"]]
    assert len(mine) == 1 and mine[0]["outcome"] == "ok" and mine[0]["user"] == "local"
    assert sorted(i["role"] for i in mine[0]["inputs"]) == ["source", "target"]
    assert all(len(i["sha256"]) == 64 for i in mine[0]["inputs"])

    metrics = client.get("/metrics").text
    assert 'faceweave_jobs{state="succeeded"}' in metrics and "faceweave_faces_swapped_total" in metrics
    assert 'route="/v1/jobs/{job_id}"' in metrics


def test_video_job_reports_progress_and_a_preview(client, photos, faces_dir):
    video = (faces_dir / "video" / "lp_d18_talking_face.mp4").read_bytes()
    created = client.post(
        "/v1/jobs", files=_files(photos, target=video, target_name="clip.mp4"), data={"trim": "0-1", "format": "mp4"}
    )
    assert created.status_code == 202, created.text
    job_id = created.json()["id"]
    seen: list[dict] = []

    def finished():
        body = client.get(f"/v1/jobs/{job_id}").json()
        seen.append(body)
        return body if body["state"] in ("succeeded", "failed", "cancelled") else None

    done = wait_for(finished, what="the video job", limit_s=120)
    assert done["state"] == "succeeded", done
    assert done["frames_total"] == 30 and done["frames_done"] == 30 and done["result"]["frames"] == 30
    assert done["result"]["frames_with_swap"] > 0
    assert any(s["state"] == "running" for s in seen)
    preview = client.get(f"/v1/jobs/{job_id}/preview")
    assert preview.status_code == 200 and Image.open(io.BytesIO(preview.content)).size == (480, 480)
    result = client.get(f"/v1/jobs/{job_id}/result")
    assert result.headers["content-type"] == "video/mp4"
    from faceweave.video.io import probe_output

    out = client.storage / "check.mp4"
    out.write_bytes(result.content)
    info = probe_output(out)
    assert (info.width, info.height) == (480, 480) and abs(info.duration - 1.0) < 0.1


def test_cancel_a_running_video_job(client, photos, faces_dir):
    video = (faces_dir / "video" / "lp_d18_talking_face.mp4").read_bytes()
    created = client.post(
        "/v1/jobs", files=_files(photos, target=video, target_name="clip.mp4"), data={"format": "webm"}
    )
    job_id = created.json()["id"]
    wait_for(lambda: client.get(f"/v1/jobs/{job_id}").json()["frames_done"] > 0, what="frames to be done")
    cancelled = client.delete(f"/v1/jobs/{job_id}")
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    folder = client.storage / "jobs" / job_id
    wait_for(lambda: not folder.exists(), what="the job's files to be deleted")
    wait_for(lambda: client.get("/readyz").status_code == 200 and not _busy(client), what="the worker to be idle")
    after = client.get(f"/v1/jobs/{job_id}").json()
    assert after["state"] == "cancelled" and after["frames_done"] < 216
    assert not folder.exists()
    assert _error(client.get(f"/v1/jobs/{job_id}/result"))["code"] == "job_not_ready"
    assert client.delete(f"/v1/jobs/{job_id}").json()["deleted"] is True  # then it can be removed
    assert client.get(f"/v1/jobs/{job_id}").status_code == 404


def _busy(client) -> bool:
    return client.app.state.service.pool.busy > 0


def test_expired_results_are_swept(client, photos):
    job_id = client.post("/v1/jobs", files=_files(photos)).json()["id"]
    done = wait_state(client, job_id, ("succeeded", "failed"))
    service = client.app.state.service
    assert job_id not in service.sweep()["deleted"]  # not yet
    later = time.time() + service.settings.results_ttl_s + 1
    assert job_id in service.sweep(now=later)["deleted"]
    assert done["state"] == "succeeded" and not (client.storage / "jobs" / job_id).exists()
    assert client.get(f"/v1/jobs/{job_id}").status_code == 404


def test_internal_errors_hide_their_details(client, monkeypatch):
    service = client.app.state.service

    def broken(**_):
        raise RuntimeError(f"secret detail in {service.storage.root}")

    monkeypatch.setattr(service.store, "list", broken)
    response = client.get("/v1/jobs")
    assert response.status_code == 500
    assert _error(response)["code"] == "internal_error"
    assert "secret" not in response.text and str(service.storage.root) not in response.text


def test_jobs_survive_a_restart_and_a_dead_worker(tmp_path: Path, photos):
    """App A (no workers) queues two jobs; one is then claimed by a worker that
    dies (its lease runs out).  App B over the same database and storage
    finishes both, the dead worker's job once, into one result file."""
    first = settings(tmp_path, workers=0, sync_slots=0)
    with running_app(first) as a:
        queued = a.post("/v1/jobs", files=_files(photos)).json()["id"]
        orphan = a.post("/v1/jobs", files=_files(photos), data={"format": "webp"}).json()["id"]
        store = a.app.state.service.store
        taken = [store.claim("dead-worker", lease_s=60) for _ in range(2)]  # oldest first
        assert [j.id for j in taken] == [queued, orphan]
        store.release(queued, worker_id="dead-worker", attempt=1)  # this one goes back unharmed
        set_job_fields(store, orphan, lease_expires=time.time() - 1)  # the worker died: its lease ran out
    second = settings(tmp_path, workers=1, sync_slots=0)
    with running_app(second) as b:
        for job_id in (queued, orphan):
            done = wait_state(b, job_id, ("succeeded", "failed"))
            assert done["state"] == "succeeded", done
        assert b.get(f"/v1/jobs/{orphan}").json()["attempts"] == 2
        store = b.app.state.service.store
        assert not store.finish(orphan, worker_id="dead-worker", attempt=1, state="succeeded", ttl_s=60)
        folder = Path(second.storage).resolve() / "jobs" / orphan
        assert sorted(p.name for p in folder.iterdir()) == ["result-2.webp"]
        assert Image.open(io.BytesIO(b.get(f"/v1/jobs/{orphan}/result").content)).format == "WEBP"


def test_verify_endpoint_reads_the_label_and_the_watermark(client, faces_dir, tmp_path):
    """A swap from POST /v1/swap is marked; the original photo is not; a text file is refused."""
    src = (faces_dir / "single/biden2.jpg").read_bytes()
    tgt = (faces_dir / "single/astronaut_eileen_collins.png").read_bytes()
    swapped = client.post("/v1/swap", files=[("source", ("s.jpg", src)), ("target", ("t.png", tgt))])
    assert swapped.status_code == 200
    marked = client.post("/v1/verify", files={"file": ("result.png", swapped.content)})
    assert marked.status_code == 200, marked.text
    body = marked.json()
    assert body["marked"] and body["watermark"]["found"] and body["label"]["ai_generated"]
    plain = client.post("/v1/verify", files={"file": ("photo.jpg", src)})
    assert plain.status_code == 200 and plain.json()["marked"] is False
    text = client.post("/v1/verify", files={"file": ("x.png", b"hello, not an image")})
    assert text.status_code == 415 and text.json()["error"]["code"]


def test_job_options_carry_the_mask_switches_into_the_swap_options():
    from pydantic import ValidationError

    from faceweave.service.jobspec import JobOptions

    def masks(**fields):
        options = JobOptions(**fields).swap_options(
            kind="image", has_reference=False, max_pixels=1_000_000, video_working_size=192
        )
        return options.masks

    default = masks()
    assert default.occlusion and default.mouth and not default.hands
    chosen = masks(occlusion=False, mouth_mask=False, occlusion_hands=True)
    assert not chosen.occlusion and not chosen.mouth and chosen.hands
    with pytest.raises(ValidationError):
        JobOptions(occlusion_hand=True)  # a misspelt option is refused, not ignored


def test_embedded_workers_export_their_device_on_metrics(client):
    """A one-machine deployment (``serve`` with embedded workers) shows its
    device in /metrics, as a ``faceweave worker`` does (here: the host's)."""
    metrics = client.get("/metrics").text
    visible = [line for line in metrics.splitlines() if line.startswith("faceweave_devices_visible{")]
    assert visible and all('vendor="' in line and 'worker="' in line for line in visible), visible
    assert "faceweave_device_utilization_ratio{" in metrics and "faceweave_device_scrape_errors_total{" in metrics


@pytest.mark.parametrize("changes", [{"workers": 0}, {"workers": 1, "device_monitor": "none"}])
def test_no_device_series_where_the_node_runs_no_jobs_or_they_are_off(tmp_path, changes):
    from faceweave.service.node import Service

    service = Service(settings(tmp_path, **changes))
    try:
        assert service.devices is None and "faceweave_device" not in service.metrics.render().decode()
    finally:
        service.close()
