"""Plain HTTP beside HTTPS: an ASGI app that answers every request with a
308 redirect to the same path and query on the HTTPS port (``faceweave
serve`` runs it on ``tls_redirect_port`` when TLS is on), so that a client
that typed ``http://`` lands on the TLS listener.  It serves nothing else."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: a host name, IPv4 address or bracketed IPv6 address, with an optional port (nothing that could split a header)
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$")


def https_location(scope: Scope, https_port: int, fallback_host: str) -> str | None:
    """Where ``scope``'s request lives on HTTPS, or ``None`` for a Host header
    that is not a plain host name (it is never copied into the answer)."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
    match = _HOST.match(headers.get("host", fallback_host).strip())
    if match is None:
        return None
    host = match[1]
    port = "" if https_port == 443 else f":{https_port}"
    path = scope.get("raw_path", b"").decode("latin-1") or scope.get("path", "/")
    query = scope.get("query_string", b"").decode("latin-1")
    return f"https://{host}{port}{path}" + (f"?{query}" if query else "")


class HttpsRedirect:
    """The ASGI app: 308 to :func:`https_location` (400 for a bad Host)."""

    def __init__(self, https_port: int, *, fallback_host: str = "localhost") -> None:
        self.https_port, self.fallback_host = https_port, fallback_host

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # no lifespan, no websockets
        location = https_location(scope, self.https_port, self.fallback_host)
        status = 308 if location is not None else 400
        headers = [(b"content-length", b"0"), (b"connection", b"close")]
        if location is not None:
            headers.append((b"location", location.encode("latin-1")))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b""})
