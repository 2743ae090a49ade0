"""A small HTTP/1.1 server for probes: :class:`ProbeHttpServer`.

One asyncio loop on one daemon thread answers every connection, so many
slow or half-sent requests cost sockets, not threads; answers that may be
slow (``slow_paths``: ``/metrics``, which reads devices) run on one more
thread, so they never hold up ``/healthz``.  Each connection has
``request_timeout_s`` for its request line and headers (then it is closed),
at most ``max_connections`` are open (a new one closes the oldest still
sending its request), the listen backlog is :data:`BACKLOG`, every answer
closes its connection, and no answer names the server or its version.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import logging
import socket
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

log = logging.getLogger("faceweave.service.distributed")

BACKLOG = 128
#: the longest request line and headers taken (a probe's are a few hundred bytes)
MAX_REQUEST_BYTES = 8192


@dataclass(frozen=True)
class ProbeAnswer:
    status: int
    body: bytes
    content_type: str = "application/json"


#: ``(method, path without the query) -> answer``
Answerer = Callable[[str, str], ProbeAnswer]


class ProbeHttpServer:
    """Answers ``GET`` and ``HEAD`` with ``answer``; :meth:`start`, then :meth:`close`.
    ``port=0`` takes a free port (:attr:`port` tells which)."""

    def __init__(
        self,
        answer: Answerer,
        *,
        host: str,
        port: int,
        slow_paths: frozenset[str] = frozenset(),
        request_timeout_s: float = 5.0,
        max_connections: int = 256,
    ) -> None:
        self.answer, self.host, self._port = answer, host, port
        self.slow_paths, self.request_timeout_s, self.max_connections = slow_paths, request_timeout_s, max_connections
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._slow: ThreadPoolExecutor | None = None
        #: connections still sending their request, oldest first
        self._pending: OrderedDict[int, asyncio.StreamWriter] = OrderedDict()

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1]) if self._sock is not None else self._port

    def start(self) -> None:
        """Listen and answer on a daemon thread.  Raises :class:`OSError` when the port cannot be bound."""
        if self._sock is not None:
            return
        self._sock = socket.create_server((self.host, self._port), backlog=BACKLOG)
        self._slow = ThreadPoolExecutor(max_workers=1, thread_name_prefix="worker-health-slow")
        self._loop = asyncio.new_event_loop()
        started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(started,), name="worker-health", daemon=True)
        self._thread.start()
        if not started.wait(10) or self._stop is None:
            self.close()
            raise OSError(f"the health server on {self.host}:{self._port} did not start")

    def close(self) -> None:
        loop, stop, thread, slow = self._loop, self._stop, self._thread, self._slow
        if loop is None or thread is None:
            return
        if stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=5)
        if slow is not None:
            slow.shutdown(wait=False, cancel_futures=True)
        self._sock = self._loop = self._stop = self._thread = self._slow = None

    def _run(self, started: threading.Event) -> None:
        loop, sock = self._loop, self._sock
        assert loop is not None and sock is not None  # set by start
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve(sock, started))
        except Exception:  # the health server's thread ends logged, never silently
            log.exception("the health server stopped")
        finally:
            started.set()  # also when it failed to start: start() sees no _stop
            sock.close()
            loop.close()

    async def _serve(self, sock: socket.socket, started: threading.Event) -> None:
        server = await asyncio.start_server(self._connection, sock=sock, limit=MAX_REQUEST_BYTES)
        self._stop = asyncio.Event()
        started.set()
        async with server:
            await self._stop.wait()
            for writer in list(self._pending.values()):
                writer.transport.abort()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        key = id(writer)
        self._pending[key] = writer
        while len(self._pending) > self.max_connections:
            _, oldest = self._pending.popitem(last=False)
            oldest.transport.abort()
        try:
            try:
                async with asyncio.timeout(self.request_timeout_s):
                    head = await reader.readuntil(b"\r\n\r\n")
            finally:
                self._pending.pop(key, None)
            answer = await self._answer(head)
            await self._send(writer, answer)
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass  # too slow, too long, or gone: closed without an answer
        finally:
            writer.close()

    async def _answer(self, head: bytes) -> tuple[str, ProbeAnswer]:
        parts = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return "GET", _error(400, "bad_request", "not an HTTP/1.x request")
        method, path = parts[0], parts[1].split("?", 1)[0]
        if method not in ("GET", "HEAD"):
            return "GET", _error(405, "method_not_allowed", "GET or HEAD only")
        try:
            if path in self.slow_paths:
                loop = asyncio.get_running_loop()
                return method, await loop.run_in_executor(self._slow, self.answer, method, path)
            return method, self.answer(method, path)
        except Exception:  # a probe gets a 500, never a dropped connection
            log.exception("health answer to %s %s failed", method, path[:100])
            return method, _error(500, "internal_error", "the answer failed; the details are in the worker's log")

    async def _send(self, writer: asyncio.StreamWriter, answer: tuple[str, ProbeAnswer]) -> None:
        method, reply = answer
        reason = http.HTTPStatus(reply.status).phrase
        head = (
            f"HTTP/1.1 {reply.status} {reason}\r\nContent-Type: {reply.content_type}\r\n"
            f"Content-Length: {len(reply.body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
        )
        writer.write(head.encode("latin-1") + (b"" if method == "HEAD" else reply.body))
        async with asyncio.timeout(self.request_timeout_s):
            await writer.drain()


def _error(status: int, code: str, message: str) -> ProbeAnswer:
    import json

    return ProbeAnswer(status, json.dumps({"error": {"code": code, "message": message}}).encode("utf-8"))
