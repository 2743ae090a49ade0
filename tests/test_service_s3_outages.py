"""The bucket goes away (issue 33, F19): moto's S3 server behind a proxy on
loopback that stops answering (connections closed unanswered, or held open
in silence).  ``/readyz`` answers 503 within the probe's short timeout;
``POST /v1/jobs`` and ``DELETE /v1/jobs/{id}`` answer 503
``storage_unavailable`` with ``Retry-After`` and change nothing; once the
bucket is back everything works again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from tests.s3_fixtures import BUCKET, KEYS, FlakyProxy, keys_under, moto_endpoint
from tests.service_fixtures import png_bytes, running_app, settings, wait_for

pytest.importorskip("boto3", reason="the s3 extra (boto3) is not installed")
pytest.importorskip("moto.server", reason="moto[server] (test extra) is not installed")


@pytest.fixture(scope="module")
def endpoint() -> str:
    with moto_endpoint() as url:
        yield url


@pytest.fixture
def proxy(endpoint):
    with FlakyProxy(int(endpoint.rsplit(":", 1)[1])) as flaky:
        yield flaky


def _config(tmp_path: Path, proxy: FlakyProxy, prefix: str):
    s3 = {"endpoint_url": proxy.url, **KEYS, "probe_timeout_s": 0.5, "probe_cache_s": 0.2}
    return settings(
        tmp_path, storage=f"s3://{BUCKET}/{prefix}", local_storage=str(tmp_path / "local"), s3=s3, watermark=False
    )


def _photos() -> list:
    return [
        ("source", ("s.png", png_bytes(96, 96, seed=1), "image/png")),
        ("target", ("t.png", png_bytes(96, 96, seed=2), "image/png")),
    ]


def _assert_unavailable(answer, proxy: FlakyProxy) -> None:
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["code"] == "storage_unavailable"
    assert answer.headers["retry-after"] == "10"
    port = proxy.url.rsplit(":", 1)[1]
    assert port not in answer.text and BUCKET not in answer.text and "Error" not in answer.text  # nothing internal


def _unready(client) -> bool:
    return client.get("/readyz").status_code == 503


@pytest.mark.parametrize("mode", ["close", "hang"])
def test_readyz_is_503_while_the_bucket_does_not_answer(tmp_path, proxy, mode):
    with running_app(_config(tmp_path, proxy, f"ready-{mode}")) as client:
        proxy.set_mode(mode)
        wait_for(lambda: _unready(client), what="/readyz to see the outage", limit_s=20)
        time.sleep(0.3)  # past probe_cache_s: the next answer asks the bucket again
        started = time.monotonic()
        answer = client.get("/readyz")
        elapsed = time.monotonic() - started
        _assert_unavailable(answer, proxy)
        assert elapsed < 10.0, elapsed  # the probe's 0.5 s timeout and one attempt, not the 60 s read timeout
        assert client.get("/healthz").status_code == 200  # alive: nothing to restart
        proxy.set_mode("pass")
        wait_for(lambda: client.get("/readyz").status_code == 200, what="/readyz once the bucket is back")


def test_jobs_are_refused_and_kept_whole_while_the_bucket_is_gone(tmp_path, proxy, endpoint):
    with running_app(_config(tmp_path, proxy, "jobs")) as client:
        created = client.post("/v1/jobs", files=_photos())
        assert created.status_code == 202, created.text
        job = created.json()
        inputs = keys_under(endpoint, "jobs/jobs/")
        assert len(inputs) == 2 and all(job["id"] in key for key in inputs)

        proxy.set_mode("close")
        wait_for(lambda: _unready(client), what="/readyz to see the outage", limit_s=20)
        _assert_unavailable(client.post("/v1/jobs", files=_photos()), proxy)
        _assert_unavailable(client.delete(f"/v1/jobs/{job['id']}"), proxy)

        proxy.set_mode("pass")
        wait_for(lambda: client.get("/readyz").status_code == 200, what="/readyz once the bucket is back")
        listed = client.get("/v1/jobs").json()["jobs"]
        assert [(j["id"], j["state"]) for j in listed] == [(job["id"], "queued")]  # no half-made job, none changed
        assert keys_under(endpoint, "jobs/jobs/") == inputs
        cancelled = client.delete(f"/v1/jobs/{job['id']}")
        assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
        assert keys_under(endpoint, "jobs/jobs/") == []


def test_a_bucket_lost_between_two_inputs_leaves_no_job_and_no_object(tmp_path, proxy, endpoint):
    """The probe said yes, then the connection closed while the target was stored:
    503, no job row, and the source already stored is deleted again."""
    from botocore.exceptions import ConnectionClosedError

    with running_app(_config(tmp_path, proxy, "midway")) as client:
        storage = client.app.state.service.storage
        real_put, calls = storage.client.put_object, []

        def second_put_fails(**kwargs):
            calls.append(kwargs["Key"])
            if len(calls) == 2:
                raise ConnectionClosedError(endpoint_url=proxy.url)
            return real_put(**kwargs)

        storage.client.put_object = second_put_fails
        _assert_unavailable(client.post("/v1/jobs", files=_photos()), proxy)
        assert [key.rsplit("/", 1)[1] for key in calls] == ["source-0", "target"]
        assert client.get("/v1/jobs").json()["jobs"] == []
        assert keys_under(endpoint, "midway/") == []
        storage.client.put_object = real_put
        wait_for(lambda: client.get("/readyz").status_code == 200, what="/readyz once the bucket answers")
        assert client.post("/v1/jobs", files=_photos()).status_code == 202
