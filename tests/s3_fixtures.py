"""Object storage for tests: moto's S3 server on loopback (:func:`moto_endpoint`),
and :class:`FlakyProxy`, a TCP proxy in front of it that can stop answering
as a bucket does in an outage."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from collections.abc import Iterator
from typing import Literal

BUCKET = "faceweave-test"
KEYS = {"access_key_id": "testing", "secret_access_key": "testing"}

Mode = Literal["pass", "close", "hang"]


@contextlib.contextmanager
def moto_endpoint() -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a fresh moto server with :data:`BUCKET` made."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        url = f"http://{host}:{port}"
        client(url).create_bucket(Bucket=BUCKET)
        yield url
    finally:
        server.stop()


def client(url: str):
    import boto3

    return boto3.client(
        "s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )


def keys_under(url: str, prefix: str) -> list[str]:
    listing = client(url).list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return sorted(item["Key"] for item in listing.get("Contents", ()))


def open_uploads(url: str, prefix: str) -> list[str]:
    return [u["Key"] for u in client(url).list_multipart_uploads(Bucket=BUCKET, Prefix=prefix).get("Uploads", [])]


class FlakyProxy:
    """A TCP proxy on 127.0.0.1 in front of ``upstream_port``.  ``mode``:
    ``"pass"`` forwards; ``"close"`` reads the request and closes without an
    answer (botocore's ``ConnectionClosedError``); ``"hang"`` accepts and
    answers nothing.  :meth:`set_mode` also cuts every open connection
    (clients keep theirs alive).  Use it as a context manager."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.mode: Mode = "pass"
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, name="flaky-proxy", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def __enter__(self) -> FlakyProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._listener.close()
        self._cut()
        self._thread.join(timeout=5)

    def set_mode(self, mode: Mode) -> None:
        self.mode = mode
        self._cut()

    def _cut(self) -> None:
        with self._lock:
            doomed, self._open = self._open, set()
        for sock in doomed:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _keep(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.add(sock)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self._keep(conn)
            if self.mode == "pass":
                threading.Thread(target=self._pipe, args=(conn,), daemon=True).start()
            elif self.mode == "close":
                threading.Thread(target=self._close_after_request, args=(conn,), daemon=True).start()
            # "hang": kept open, never read or answered, until the mode changes

    @staticmethod
    def _close_after_request(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            conn.settimeout(2.0)
            conn.recv(65536)
        conn.close()

    def _pipe(self, conn: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=10)
        except OSError:
            conn.close()
            return
        self._keep(upstream)
        peer = {conn: upstream, upstream: conn}
        with selectors.DefaultSelector() as selector:
            for sock in peer:
                selector.register(sock, selectors.EVENT_READ)
            while _forward(selector, peer):
                pass
        for sock in peer:
            sock.close()


def _forward(selector: selectors.BaseSelector, peer: dict[socket.socket, socket.socket]) -> bool:
    """Move what arrived to the other side; ``False`` once either side closed (or was cut)."""
    try:
        for key, _ in selector.select(timeout=30):
            sock = peer[key.fileobj]  # type: ignore[index]
            data = key.fileobj.recv(65536)  # type: ignore[union-attr]
            if not data:
                return False
            sock.sendall(data)
    except (OSError, ValueError, KeyError):
        return False
    return True
