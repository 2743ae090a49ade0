"""Object storage against a real S3 HTTP endpoint: moto's server on loopback.

A job through the app with ``s3://`` storage (inputs uploaded by the API,
downloaded and the result uploaded by the worker, fetched by the client
through the presigned URL the API redirects to; nothing left on local disk);
an upload interrupted halfway leaves no visible object; bad S3 settings stop
``faceweave serve`` / ``faceweave worker`` with one clear line."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.service_fixtures import running_app, settings, wait_for, wait_state

pytest.importorskip("boto3", reason="the s3 extra (boto3) is not installed")
pytest.importorskip("moto.server", reason="moto[server] (test extra) is not installed")

BUCKET = "faceweave-test"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.fixture(scope="module")
def endpoint() -> str:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    _client(url).create_bucket(Bucket=BUCKET)
    yield url
    server.stop()


def _client(url: str):
    import boto3

    return boto3.client("s3", endpoint_url=url, region_name="us-east-1", **_keys())


def _keys() -> dict[str, str]:
    return {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def _keys_under(url: str, prefix: str) -> list[str]:
    listing = _client(url).list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return sorted(item["Key"] for item in listing.get("Contents", ()))


def _wait_for_keys(url: str, prefix: str, keys: list[str], *, seconds: float = 20.0) -> None:
    """Until the keys under ``prefix`` are ``keys`` (or ``seconds`` pass)."""
    import time

    deadline = time.monotonic() + seconds
    while _keys_under(url, prefix) != keys and time.monotonic() < deadline:
        time.sleep(0.05)


def _s3(url: str, **more) -> dict:
    return {"endpoint_url": url, "access_key_id": "testing", "secret_access_key": "testing", **more}


def _files_left(folder: Path) -> list[str]:
    """Files under ``folder`` other than the job store and the audit log."""
    keep = {"jobs.db", "jobs.db-journal", "jobs.db-wal", "jobs.db-shm", "audit.jsonl", "audit.jsonl.lock"}
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name not in keep)


def test_a_job_through_s3_storage(tmp_path, endpoint, faces_dir: Path):
    import httpx
    import numpy as np
    from PIL import Image

    config = settings(tmp_path, storage=f"s3://{BUCKET}/run1", s3=_s3(endpoint), workers=1)
    local = Path(config.storage).resolve()
    single = faces_dir / "single"
    files = [
        ("source", ("source.jpg", (single / "paul_rudd.jpg").read_bytes(), "image/jpeg")),
        ("target", ("target.jpg", (single / "biden2.jpg").read_bytes(), "image/jpeg")),
    ]
    with running_app(config) as client:
        job = client.post("/v1/jobs", files=files, data={"options": '{"format": "png"}'}).json()
        done = wait_state(client, job["id"], ("succeeded", "failed"))
        assert done["state"] == "succeeded", done
        assert done["result_url"].startswith(endpoint)
        # inputs are gone from the bucket once the job is done (the worker
        # deletes them right after recording the outcome); the result is there
        prefix, kept = f"run1/jobs/{job['id']}/", [f"run1/jobs/{job['id']}/result-1.png"]
        _wait_for_keys(endpoint, prefix, kept)
        assert _keys_under(endpoint, prefix) == kept
        answer = client.get(f"/v1/jobs/{job['id']}/result", follow_redirects=False)
        assert answer.status_code == 307
        fetched = httpx.get(answer.headers["location"])  # as a CDN or the client would
        assert fetched.status_code == 200 and fetched.headers["content-type"] == "image/png"
        assert f"faceweave-{job['id'][:8]}.png" in fetched.headers["content-disposition"]
        image = np.asarray(Image.open(io.BytesIO(fetched.content)))
        assert image.shape[:2] == np.asarray(Image.open(single / "biden2.jpg")).shape[:2]
        assert done["result"]["faces_swapped"] >= 1
        # nothing on local disk but the job store and the audit log: uploads, copies and scratch are cleaned
        assert _files_left(local) == []
        # deleting the job deletes its objects
        assert client.delete(f"/v1/jobs/{job['id']}").json()["deleted"] is True
        assert _keys_under(endpoint, f"run1/jobs/{job['id']}/") == []


def test_expired_jobs_objects_are_swept(tmp_path, endpoint, faces_dir: Path):
    config = settings(tmp_path, storage=f"s3://{BUCKET}/run2", s3=_s3(endpoint), workers=1, results_ttl_s=60.0)
    single = faces_dir / "single"
    files = [
        ("source", ("s.jpg", (single / "paul_rudd.jpg").read_bytes(), "image/jpeg")),
        ("target", ("t.jpg", (single / "biden2.jpg").read_bytes(), "image/jpeg")),
    ]
    with running_app(config) as client:
        job = client.post("/v1/jobs", files=files).json()
        assert wait_state(client, job["id"], ("succeeded", "failed"))["state"] == "succeeded"
        assert _keys_under(endpoint, f"run2/jobs/{job['id']}/")
        swept = client.app.state.service.sweep(now=time.time() + 120.0)
        assert swept["deleted"] == [job["id"]]
        assert _keys_under(endpoint, f"run2/jobs/{job['id']}/") == []


class _Breaks(io.RawIOBase):
    """A stream of ``size`` bytes that raises ``error`` after ``at`` bytes."""

    def __init__(self, size: int, at: int, error: BaseException) -> None:
        self.size, self.at, self.error, self.done = size, at, error, 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if self.done >= self.at:
            raise self.error
        n = min(n if n >= 0 else self.size, self.size - self.done, self.at - self.done)
        self.done += n
        return b"x" * n


@pytest.mark.parametrize(
    "size, at, error",
    [
        (12 * 1024 * 1024, 7 * 1024 * 1024, OSError("disk gone")),
        (12 * 1024 * 1024, 5 * 1024 * 1024, KeyboardInterrupt()),
    ],
)
def test_an_interrupted_upload_leaves_no_object(endpoint, size, at, error):
    from faceweave.service.s3storage import MIB, upload_stream

    client, key = _client(endpoint), f"broken/{type(error).__name__}.mp4"
    with pytest.raises(type(error)):
        upload_stream(client, _Breaks(size, at, error), bucket=BUCKET, key=key, part_size=5 * MIB)  # type: ignore[arg-type]
    assert _keys_under(endpoint, "broken/") == []
    assert client.list_multipart_uploads(Bucket=BUCKET, Prefix="broken/").get("Uploads", []) == []


def test_a_whole_multipart_upload_is_visible(endpoint):
    from faceweave.service.s3storage import MIB, upload_stream

    client = _client(endpoint)
    data = os.urandom(11 * MIB)
    upload_stream(client, io.BytesIO(data), bucket=BUCKET, key="whole/big.bin", part_size=5 * MIB)
    assert client.get_object(Bucket=BUCKET, Key="whole/big.bin")["Body"].read() == data


@pytest.mark.parametrize(
    ("storage", "expected"),
    [
        ("s3://faceweave-test", ("faceweave-test", "")),
        ("s3://faceweave-test/a/b/", ("faceweave-test", "a/b")),
        ("s3://Bad_Bucket/x", "is not s3://BUCKET/PREFIX"),
        ("s3://ab", "is not s3://BUCKET/PREFIX"),
    ],
)
def test_storage_urls(tmp_path, storage, expected):
    from faceweave.errors import InvalidOptionError
    from faceweave.service.settings import load_settings

    if isinstance(expected, str):
        with pytest.raises(InvalidOptionError, match=expected):
            load_settings(environ={}, overrides={"storage": storage})
        return
    loaded = load_settings(environ={}, overrides={"storage": storage, "local_storage": str(tmp_path)})
    assert (loaded.s3.bucket, loaded.s3.prefix) == expected and loaded.storage == tmp_path


# ------------------------------------------------------------------ bad settings at start
def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def strict_endpoint(tmp_path_factory):
    """A second moto server that checks credentials (none it knows are valid)."""
    port = _free_port()
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0", **CREDENTIALS}
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: _answers(port), what="the strict moto server", limit_s=30)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _answers(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _clean_env(**more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "FACEWEAVE_"))}
    missing = "/nonexistent/faceweave-aws"
    return {**env, "AWS_CONFIG_FILE": missing, "AWS_SHARED_CREDENTIALS_FILE": missing, **more}


@pytest.mark.slow
@pytest.mark.parametrize("command", ["serve", "worker"])
@pytest.mark.parametrize(
    ("case", "fragments"),
    [
        ("missing-bucket", ["bucket 'no-such-bucket' does not exist"]),
        ("wrong-credentials", ["denied", "AWS_ACCESS_KEY_ID"]),
        ("unreachable-endpoint", ["cannot reach the s3 endpoint", "127.0.0.1:1"]),
        ("no-credentials", ["no s3 credentials"]),
    ],
)
def test_bad_s3_settings_stop_with_one_line(tmp_path, endpoint, strict_endpoint, command, case, fragments):
    from tests.test_cli import assert_clean_error

    bucket, env = BUCKET, _clean_env(AWS_ENDPOINT_URL=endpoint, **CREDENTIALS)
    if case == "missing-bucket":
        bucket = "no-such-bucket"
    elif case == "wrong-credentials":
        env["AWS_ENDPOINT_URL"] = strict_endpoint
    elif case == "unreachable-endpoint":
        env["AWS_ENDPOINT_URL"] = "http://127.0.0.1:1"
    else:
        env = _clean_env(AWS_ENDPOINT_URL=endpoint, AWS_EC2_METADATA_DISABLED="true")
    args = ["--storage", f"s3://{bucket}/x", "--database", f"sqlite:///{tmp_path}/jobs.db"]
    args += ["--port", "0"] if command == "serve" else ["--broker", "redis://127.0.0.1:1/0"]
    env["FACEWEAVE_LOCAL_STORAGE"] = str(tmp_path / "local")
    proc = subprocess.run(
        [sys.executable, "-m", "faceweave.cli", command, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert_clean_error(proc, 1, *fragments)


def test_download_urls_name_the_public_endpoint(tmp_path, endpoint):
    """The service reaches the bucket at one address (e.g. inside a cluster)
    and clients at another: presigned URLs are signed for the public one,
    and what they fetch is the object."""
    import httpx

    from faceweave.service.s3storage import S3Storage
    from faceweave.service.settings import S3Settings

    inside = endpoint.replace("127.0.0.1", "localhost")  # the service's own name for the server
    public = S3Settings(url=f"s3://{BUCKET}/public", public_endpoint_url=endpoint, **_s3(inside))
    storage = S3Storage(public, local=tmp_path / "local")
    _client(endpoint).put_object(Bucket=BUCKET, Key="public/jobs/x/result-1.png", Body=b"png bytes")
    url = storage.download_url("jobs/x/result-1.png", filename="r.png", media_type="image/png", expires_s=60)
    assert url is not None and url.startswith(f"{endpoint}/{BUCKET}/public/jobs/x/result-1.png")
    assert httpx.get(url).content == b"png bytes"
    plain = S3Storage(S3Settings(url=f"s3://{BUCKET}/public", **_s3(inside)), local=tmp_path / "local2")
    same = plain.download_url("jobs/x/result-1.png", filename="r.png", media_type="image/png", expires_s=60)
    assert same is not None and same.startswith(inside)
