"""Helpers for the service tests: settings, apps, tokens, multipart bodies, odd files."""

from __future__ import annotations

import io
import struct
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

HS_SECRET = "s3cret-for-tests-only-0123456789abcdef-0123456789abcdef-0123456789"
ISSUER = "https://issuer.test"
AUDIENCE = "faceweave-tests"
ALICE_KEY = "alice-key-0123456789abcdef"
BOB_KEY = "bob-key-0123456789abcdef0000"


def settings(tmp: Path, **changes: Any):
    """Settings for a test app under ``tmp`` (fast polling, no rate limit and no
    failed-authentication limit unless given)."""
    from faceweave.service.settings import ServiceSettings

    data: dict[str, Any] = {
        "storage": str(tmp / "storage"),
        "workers": 0,
        "sync_slots": 0,
        "poll_interval_s": 0.05,
        "progress_interval_s": 0.1,
        "sweep_interval_s": 3600.0,
        "limits": {"rate_per_second": 0.0, "auth_failures": 0},
    }
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return ServiceSettings.model_validate(data)


@contextmanager
def running_app(config) -> Iterator[Any]:
    """A TestClient on a new app (lifespan started), ready before it is yielded."""
    from fastapi.testclient import TestClient

    from faceweave.service.app import create_app

    with TestClient(create_app(config), raise_server_exceptions=False) as client:
        wait_for(lambda: client.get("/readyz").status_code == 200, what="the app to be ready")
        yield client


def wait_for(check: Callable[[], Any], *, what: str, limit_s: float = 60.0, every_s: float = 0.05) -> Any:
    """Poll ``check`` until it returns something truthy (a bound, not a timing assertion)."""
    deadline = time.monotonic() + limit_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(every_s)


def wait_state(
    client, job_id: str, states: tuple[str, ...], headers: dict | None = None, limit_s: float = 90.0
) -> dict:
    def check():
        body = client.get(f"/v1/jobs/{job_id}", headers=headers or {}).json()
        return body if body.get("state") in states else None

    return wait_for(check, what=f"job {job_id} to reach {states}", limit_s=limit_s)


def stream_post(client, path: str, chunks: Iterator[bytes], headers: dict[str, str]):
    """POST ``chunks`` to the running app of a TestClient, one ASGI message per
    chunk and only when the app asks for it (the TestClient itself reads a
    streamed body whole first).  Returns the httpx response."""
    import httpx

    async def send():
        async def body():
            for chunk in chunks:
                yield chunk

        transport = httpx.ASGITransport(app=client.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            return await http.post(path, content=body(), headers=headers)

    return client.portal.call(send)


def png_bytes(width: int = 64, height: int = 48, seed: int = 0) -> bytes:
    """A small faceless PNG (smooth noise)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 255, (height, width, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def bomb_png(width: int = 100_000, height: int = 100_000) -> bytes:
    """A tiny PNG whose header claims ``width x height`` pixels (a decompression bomb)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    body = zlib.compress(b"\x00" * 1024)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", body) + chunk(b"IEND", b"")


def multipart(
    parts: list[tuple[str, str | None, bytes]], boundary: str = "faceweave-test-boundary"
) -> tuple[bytes, str]:
    """A ``multipart/form-data`` body from ``(name, filename or None, data)`` and its content type."""
    out = io.BytesIO()
    for name, filename, data in parts:
        out.write(f"--{boundary}\r\n".encode())
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename is not None else "")
        out.write(f"Content-Disposition: {disposition}\r\n\r\n".encode())
        out.write(data)
        out.write(b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return out.getvalue(), f"multipart/form-data; boundary={boundary}"


def hs_token(claims: dict[str, Any], secret: str = HS_SECRET, algorithm: str = "HS256") -> str:
    import jwt

    return jwt.encode(claims, secret, algorithm=algorithm)


def claims(sub: str = "alice", **changes: Any) -> dict[str, Any]:
    now = int(time.time())
    data = {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600}
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def rsa_keys() -> tuple[str, str]:
    """A fresh RSA key pair as (private PEM, public PEM)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


def raw_hs256_token(payload: dict[str, Any], secret: str) -> str:
    """An HS256 token signed by hand with any secret (PyJWT refuses PEM keys as secrets)."""
    import base64
    import hashlib
    import hmac
    import json

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    signing = f"{b64(json.dumps({'alg': 'HS256', 'typ': 'JWT'}).encode())}.{b64(json.dumps(payload).encode())}"
    signature = hmac.new(secret.encode(), signing.encode(), hashlib.sha256).digest()
    return f"{signing}.{b64(signature)}"


def unsigned_token(payload: dict[str, Any]) -> str:
    """A token with ``alg: none`` and no signature."""
    import base64
    import json

    def b64(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{b64({'alg': 'none', 'typ': 'JWT'})}.{b64(payload)}."


def set_job_fields(store: Any, job_id: str, **values: Any) -> None:
    """Write a job's columns directly (a dead worker's lease run out, a result
    put in place), as no caller of the store may."""
    from sqlalchemy import update

    from faceweave.service.store import JobRow

    with store.engine.begin() as conn:
        conn.execute(update(JobRow).where(JobRow.id == job_id).values(**values))
