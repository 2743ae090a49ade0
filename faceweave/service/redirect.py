"""Plain HTTP beside HTTPS: an ASGI app that answers every request with a
308 redirect to the same path and query on the HTTPS port (``faceweave
serve`` runs it on ``tls_redirect_port`` when TLS is on), so that a client
that typed ``http://`` lands on the TLS listener.  It serves nothing else.

The ``Location`` is never the request target copied: its host is the
configured ``public_host``, or the request's ``Host`` only when that names
the listener itself (``host``; for a loopback ``host`` also ``localhost``,
``127.0.0.1`` and ``[::1]``), and after it comes the path alone.  A target
that is not a path (absolute form ``http://evil.example/x``, authority form
``evil.example:443`` or ``@evil.example/login``, asterisk form ``*``) and a
``Host`` not among those names are answered 400.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from faceweave.errors import InputError
from faceweave.service.settings import ServiceSettings, is_loopback

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: a host name, IPv4 address or bracketed IPv6 address, with an optional port (nothing that could split a header)
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$")
#: an origin-form target's path and query: "/" then visible ASCII only (no space, no control character)
_PATH = re.compile(r"^/[!-~]*$")
_QUERY = re.compile(r"^[!-~]*$")
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})


@dataclass(frozen=True)
class RedirectRule:
    """Where the redirect points: ``public`` (``host`` or ``host:port``) in
    every ``Location`` when set; else the request's ``Host`` name when it is
    one of ``names`` (lower case), with ``https_port``."""

    https_port: int
    public: str | None = None
    names: frozenset[str] = frozenset()

    @classmethod
    def from_settings(cls, settings: ServiceSettings) -> RedirectRule:
        host = settings.host.lower()
        bracketed = f"[{host}]" if ":" in host else host
        names = {bracketed} | (_LOOPBACK_NAMES if is_loopback(settings.host) else set())
        return cls(https_port=settings.port, public=settings.public_host, names=frozenset(names))

    def authority(self, host_header: str | None) -> str:
        """``host[:port]`` of the ``Location``.

        Raises:
            InputError: no ``public`` host, and ``host_header`` is missing, not
                a plain host name, or names another host.
        """
        if self.public is not None:
            return self.public if ":" in self.public.rsplit("]", 1)[-1] else self.public + self._port()
        match = _HOST.match((host_header or "").strip())
        if match is None or match[1].lower() not in self.names:
            raise InputError("the Host header does not name this server")
        return match[1] + self._port()

    def _port(self) -> str:
        return "" if self.https_port == 443 else f":{self.https_port}"


def https_location(scope: Scope, rule: RedirectRule) -> str:
    """Where ``scope``'s request lives on HTTPS.

    Raises:
        InputError: the target is not a path (origin form), or the Host is refused (:meth:`RedirectRule.authority`).
    """
    path = scope.get("raw_path", b"").decode("latin-1")
    query = scope.get("query_string", b"").decode("latin-1")
    if not _PATH.match(path) or not _QUERY.match(query):
        raise InputError("the request target must be a path such as /v1/jobs (origin form)")
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
    return f"https://{rule.authority(headers.get('host'))}{path}" + (f"?{query}" if query else "")


class HttpsRedirect:
    """The ASGI app: 308 to :func:`https_location`, or 400 saying what was refused."""

    def __init__(self, rule: RedirectRule) -> None:
        self.rule = rule

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # no lifespan, no websockets
        headers = [(b"connection", b"close")]
        try:
            location = https_location(scope, self.rule)
        except InputError as exc:
            status, body = 400, f"{exc}\n".encode("ascii")
            headers.append((b"content-type", b"text/plain; charset=utf-8"))
        else:
            status, body = 308, b""
            headers.append((b"location", location.encode("latin-1")))
        headers.append((b"content-length", str(len(body)).encode("ascii")))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
