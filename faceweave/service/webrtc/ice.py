"""The ICE servers a live session's two sides gather candidates with
(:func:`ice_servers_for`): the ``live.ice_servers`` meant for that side, each
TURN server without a username of its own given time-limited credentials
made from ``live.turn_secret`` (:func:`turn_credentials`, coturn's
``use-auth-secret``, the TURN REST scheme): the user name is
``"EXPIRY:USER"`` (EXPIRY in Unix seconds) and the password is
base64(HMAC-SHA1(secret, user name)).  USER is a live session's id: the
credentials are made for one session (the server's side when it opens, the
browser's when ``POST /v1/live/reservations`` holds its place), so a TURN
log names the session.  The browser gets only those credentials, never the
secret; they expire after ``live.turn_ttl_s``."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import time
from dataclasses import dataclass
from typing import Any, Literal

from faceweave.service.settings import IceServer, LiveSettings

#: what a TURN user name keeps of the caller's name (coturn's separator ':' and the rest become '_')
_USER_CHARS = re.compile(r"[^A-Za-z0-9._@-]")


@dataclass(frozen=True)
class IceServerView:
    """One ICE server as a side gets it (``RTCIceServer``'s fields)."""

    urls: tuple[str, ...]
    username: str | None = None
    credential: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The browser's ``RTCIceServer`` dictionary (no ``None`` fields)."""
        body: dict[str, Any] = {"urls": list(self.urls)}
        if self.username is not None:
            body.update(username=self.username, credential=self.credential)
        return body


@dataclass(frozen=True)
class IceConfig:
    """What a side configures its peer connection with; ``expires_at``: when
    the time-limited TURN credentials among them expire (Unix seconds), or ``None``."""

    servers: tuple[IceServerView, ...]
    transport_policy: Literal["all", "relay"]
    expires_at: int | None


def turn_credentials(secret: str, user: str, *, expires_at: int) -> tuple[str, str]:
    """coturn's time-limited credentials for ``user`` until ``expires_at``: ``(username, password)``."""
    username = f"{expires_at}:{_USER_CHARS.sub('_', user)[:64] or 'user'}"
    digest = hmac.new(secret.encode(), username.encode(), hashlib.sha1).digest()
    return username, base64.b64encode(digest).decode()


def ice_servers_for(
    settings: LiveSettings, side: Literal["browser", "server"], user: str | None, *, now: float | None = None
) -> IceConfig:
    """The ICE servers of ``side`` for the session ``user``, with fresh
    time-limited TURN credentials; ``user`` ``None``: no credentials are made
    (the TURN servers that need them are left out)."""
    expires_at = int((time.time() if now is None else now) + settings.turn_ttl_s)
    minted = False
    servers = []
    for server in settings.ice_servers:
        if server.use not in ("both", side):
            continue
        mints = server.username is None and server.turn and settings.turn_secret is not None
        if mints and user is None:
            continue
        view, made = _view(server, settings.turn_secret, user or "", expires_at)
        minted = minted or made
        servers.append(view)
    return IceConfig(tuple(servers), settings.ice_transport_policy, expires_at if minted else None)


def _view(server: IceServer, secret: str | None, user: str, expires_at: int) -> tuple[IceServerView, bool]:
    if server.username is not None or not server.turn or secret is None:
        return IceServerView(server.urls, server.username, server.credential), False
    username, password = turn_credentials(secret, user, expires_at=expires_at)
    return IceServerView(server.urls, username, password), True
