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
    ("host", "path", "query", "expected"),
    [
        ("example.org", "/v1/jobs", "", "https://example.org:8443/v1/jobs"),
        ("example.org:8080", "/r", "a=1&b=2", "https://example.org:8443/r?a=1&b=2"),
        ("[::1]:80", "/", "", "https://[::1]:8443/"),
        ("evil.org\r\nSet-Cookie: x", "/", "", None),
        ("a b", "/", "", None),
    ],
)
def test_the_redirect_goes_to_the_same_place_on_https(host, path, query, expected):
    from faceweave.service.redirect import https_location

    scope = {
        "type": "http",
        "headers": [(b"host", host.encode("latin-1"))],
        "raw_path": path.encode(),
        "query_string": query.encode(),
    }
    assert https_location(scope, 8443, "localhost") == expected


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
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert proc.returncode is not None


def test_a_redirect_port_needs_tls(tmp_path):
    proc = faceweave("serve", "--port", "0", "--storage", tmp_path / "st", "--tls-redirect-port", "8081")
    assert_clean_error(proc, 2, "tls_redirect_port needs tls_cert")
