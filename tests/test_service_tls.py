"""HTTPS: ``faceweave serve --tls-cert --tls-key`` terminates TLS itself.
A real server subprocess on loopback with a self-signed certificate made
here; bad certificates or keys stop it at start with one clear line."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
from tests.service_fixtures import wait_for
from tests.test_cli import assert_clean_error, faceweave

pytestmark = pytest.mark.slow  # starts real servers


def _key():
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _self_signed(key) -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import NameOID

    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


@pytest.fixture(scope="module")
def pems(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("tls")
    key, other = _key(), _key()
    files = {
        "cert": _self_signed(key),
        "key": _pem_key(key),
        "other_key": _pem_key(other),
        "text": b"not a certificate\n",
    }
    for name, data in files.items():
        (folder / f"{name}.pem").write_bytes(data)
    return {name: folder / f"{name}.pem" for name in files}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_serve_answers_https_with_the_certificate(tmp_path, pems):
    import httpx

    port = _free_port()
    args = ["serve", "--port", str(port), "--storage", str(tmp_path / "st"), "--workers", "0"]
    args += ["--tls-cert", str(pems["cert"]), "--tls-key", str(pems["key"])]
    proc = subprocess.Popen(
        [sys.executable, "-m", "faceweave.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    trusted = ssl.create_default_context(cafile=str(pems["cert"]))
    url = f"https://127.0.0.1:{port}"
    try:

        def healthy() -> bool:
            assert proc.poll() is None, proc.communicate()[1]
            try:
                return httpx.get(f"{url}/healthz", verify=trusted).json() == {"status": "ok"}
            except httpx.TransportError:
                return False

        wait_for(healthy, what="the HTTPS server", limit_s=90, every_s=0.2)
        with pytest.raises(httpx.ConnectError):  # a client that does not trust the certificate
            httpx.get(f"{url}/healthz")
        with pytest.raises(httpx.TransportError):  # plain HTTP on the TLS port is refused
            httpx.get(f"http://127.0.0.1:{port}/healthz")
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
    assert f"faceweave serving on https://127.0.0.1:{port}" in stderr


@pytest.mark.parametrize(
    ("cert", "key", "fragments"),
    [
        ("missing", "key", ["--tls-cert", "no such file"]),
        ("cert", "missing", ["--tls-key", "no such file"]),
        ("folder", "key", ["--tls-cert", "is a folder"]),
        ("text", "key", ["--tls-cert", "not a pem certificate"]),
        ("cert", "text", ["--tls-key", "not a pem private key"]),
        ("cert", "other_key", ["is not the private key of the certificate"]),
        ("cert", None, ["give both tls_cert and tls_key"]),
    ],
)
def test_bad_tls_files_stop_serve_with_one_line(tmp_path, pems, cert, key, fragments):
    paths = {**pems, "missing": tmp_path / "nope.pem", "folder": tmp_path}
    args = ["serve", "--port", "0", "--storage", tmp_path / "st", "--tls-cert", paths[cert]]
    args += ["--tls-key", paths[key]] if key else []
    assert_clean_error(faceweave(*args), 2, *fragments)


@pytest.mark.parametrize(
    ("host", "path", "query", "public", "expected"),
    [
        ("127.0.0.1:8080", "/v1/jobs", "", None, "https://127.0.0.1:8443/v1/jobs"),
        ("localhost:8080", "/r", "a=1&b=2", None, "https://localhost:8443/r?a=1&b=2"),
        ("[::1]:80", "/", "", None, "https://[::1]:8443/"),
        ("evil.example", "/", "", None, "the Host header does not name this server"),
        ("evil.example", "/x", "", "faceweave.example.org", "https://faceweave.example.org:8443/x"),
        ("evil.example", "/x", "q=1", "faceweave.example.org:443", "https://faceweave.example.org:443/x?q=1"),
        ("evil.org\r\nSet-Cookie: x", "/", "", None, "the Host header does not name this server"),
        ("a b", "/", "", None, "the Host header does not name this server"),
        (None, "/", "", None, "the Host header does not name this server"),
        # F16: the target itself never reaches the Location's authority
        ("127.0.0.1", "@evil.example/login", "", None, "must be a path"),
        ("127.0.0.1", "http://evil.example/x", "", None, "must be a path"),
        ("127.0.0.1", "evil.example:443", "", None, "must be a path"),
        ("127.0.0.1", "*", "", None, "must be a path"),
        ("127.0.0.1", "", "", None, "must be a path"),
        ("127.0.0.1", "/a b", "", None, "must be a path"),
        ("127.0.0.1", "/ok", "x=\r\nSet-Cookie:1", None, "must be a path"),
        ("127.0.0.1", "//evil.example/x", "", None, "https://127.0.0.1:8443//evil.example/x"),  # a path of ours
    ],
)
def test_the_redirect_goes_to_the_same_place_on_https(host, path, query, public, expected):
    from faceweave.errors import InputError
    from faceweave.service.redirect import RedirectRule, https_location
    from faceweave.service.settings import ServiceSettings

    config = ServiceSettings(host="127.0.0.1", port=8443, public_host=public)
    scope = {
        "type": "http",
        "headers": [(b"host", host.encode("latin-1"))] if host is not None else [],
        "raw_path": path.encode(),
        "query_string": query.encode(),
    }
    rule = RedirectRule.from_settings(config)
    if expected.startswith("https://"):
        assert https_location(scope, rule) == expected
    else:
        with pytest.raises(InputError, match=expected):
            https_location(scope, rule)


def test_the_redirect_names_only_its_own_host(tmp_path, pems):
    """A host other than loopback: only its own name, not localhost; a wildcard host needs public_host."""
    from faceweave.errors import InputError, InvalidOptionError
    from faceweave.service.redirect import RedirectRule
    from faceweave.service.settings import load_settings

    tls = {"tls_cert": str(pems["cert"]), "tls_key": str(pems["key"]), "tls_redirect_port": 8080}
    rule = RedirectRule.from_settings(load_settings(environ={}, overrides={"host": "10.1.2.3", **tls}))
    assert rule.authority("10.1.2.3:8080") == "10.1.2.3:8000"
    with pytest.raises(InputError):
        rule.authority("localhost")
    with pytest.raises(InvalidOptionError, match="needs public_host"):
        load_settings(environ={}, overrides={"host": "0.0.0.0", "auth.mode": "none", **tls})
    public = load_settings(environ={}, overrides={"host": "::", "auth.mode": "none", "public_host": "a.example", **tls})
    assert RedirectRule.from_settings(public).authority("evil.example") == "a.example:8000"


@pytest.mark.parametrize(("tls", "expected"), [(True, "max-age=31536000"), (False, None)])
def test_hsts_on_https_answers_only(tmp_path, pems, tls, expected):
    """F17: Strict-Transport-Security with TLS (hsts_max_age_s), never when serving plain HTTP."""
    from tests.service_fixtures import running_app, settings

    extra = {"tls_cert": str(pems["cert"]), "tls_key": str(pems["key"])} if tls else {}
    with running_app(settings(tmp_path, **extra)) as client:
        for path in ("/healthz", "/v1/jobs/nope", "/docs"):
            assert client.get(path).headers.get("strict-transport-security") == expected, path
    if tls:
        with running_app(settings(tmp_path, hsts_max_age_s=0, **extra)) as client:
            assert "strict-transport-security" not in client.get("/healthz").headers


def _raw_request(port: int, target: str, host: str = "127.0.0.1") -> tuple[int, dict[str, str], bytes]:
    """Send ``GET target`` as written (no client normalises it); the status, headers and body."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode("latin-1"))
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    raw_head, _, body = data.partition(b"\r\n\r\n")
    head = raw_head.decode("latin-1").split("\r\n")
    fields = dict(line.split(": ", 1) for line in head[1:])
    return int(head[0].split()[1]), {k.lower(): v for k, v in fields.items()}, body


def test_serve_redirects_plain_http_to_https_when_asked(tmp_path, pems):
    import httpx

    port, plain = _free_port(), _free_port()
    args = ["serve", "--port", str(port), "--storage", str(tmp_path / "st"), "--workers", "0"]
    args += ["--tls-cert", str(pems["cert"]), "--tls-key", str(pems["key"]), "--tls-redirect-port", str(plain)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "faceweave.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    trusted = ssl.create_default_context(cafile=str(pems["cert"]))
    try:

        def both_up():
            assert proc.poll() is None, proc.communicate()[1]
            try:
                httpx.get(f"https://127.0.0.1:{port}/healthz", verify=trusted)
                return httpx.get(f"http://127.0.0.1:{plain}/healthz?x=1")
            except httpx.TransportError:
                return None

        answer = wait_for(both_up, what="the HTTPS server and the redirect listener", limit_s=90, every_s=0.2)
        assert answer.status_code == 308
        assert answer.headers["location"] == f"https://127.0.0.1:{port}/healthz?x=1"
        followed = httpx.get(f"http://127.0.0.1:{plain}/healthz", verify=trusted, follow_redirects=True)
        assert followed.status_code == 200 and followed.json() == {"status": "ok"}
        assert followed.headers["strict-transport-security"] == "max-age=31536000"
        assert "strict-transport-security" not in answer.headers  # not over plain HTTP
        # F16: the targets of the attack run, as sent
        for target in ("@evil.example/login", "http://evil.example/x", "evil.example:443"):
            status, headers, body = _raw_request(plain, target)
            assert (status, body) == (400, b"the request target must be a path such as /v1/jobs (origin form)\n")
            assert "location" not in headers, target
        refused = _raw_request(plain, "/healthz", host="evil.example")
        assert (refused[0], refused[2]) == (400, b"the Host header does not name this server\n")
        status, headers, _ = _raw_request(plain, "//evil.example/x")
        assert status == 308 and headers["location"] == f"https://127.0.0.1:{port}//evil.example/x"
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert proc.returncode is not None


def test_a_redirect_port_needs_tls(tmp_path):
    proc = faceweave("serve", "--port", "0", "--storage", tmp_path / "st", "--tls-redirect-port", "8081")
    assert_clean_error(proc, 2, "tls_redirect_port needs tls_cert")
