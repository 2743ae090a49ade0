"""ICE servers for live sessions (``live.ice_servers``, ``live.turn_secret``):
the settings' checks, the TURN REST credentials (coturn's use-auth-secret:
HMAC-SHA1 over "EXPIRY:USER", base64) verified by hand and by a real coturn
on loopback, ``POST /v1/live/reservations`` (what the page gets: credentials
made for the reserved session, never the secret, never a server-only entry;
``GET /v1/live/config`` makes none), and a whole live session through TURN relay
candidates only on both sides.  Also the node tag in session ids: a request
for another node's session answers 421."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import time

import pytest
from tests.service_fixtures import ALICE_KEY, running_app, settings

SECRET = "coturn-shared-secret-0123456789"


# ------------------------------------------------------------------ settings
@pytest.mark.parametrize(
    ("servers", "extra", "error"),
    [
        ([], {}, None),
        (["stun:stun.example.org"], {}, None),
        (["stun:192.0.2.1:3478", "stuns:stun.example.org"], {}, None),
        ([{"urls": ["turn:relay.example.org:3478?transport=udp"], "username": "u", "credential": "p"}], {}, None),
        (
            [{"urls": ["turn:relay.example.org", "turns:relay.example.org:5349?transport=tcp"]}],
            {"turn_secret": SECRET},
            None,
        ),
        ([{"urls": ["turn:relay.example.org"], "use": "browser"}], {"turn_secret": SECRET}, None),
        (["turn:relay.example.org:3478"], {}, "needs a username and credential, or live.turn_secret"),
        ([{"urls": ["turn:r.example.org"], "username": "u"}], {}, "both username and credential, or neither"),
        (["https://stun.example.org"], {}, "is not an ICE server URL: use stun:HOST[:PORT]"),
        (["stun:"], {}, "is not an ICE server URL"),
        (["stun:[::1]:3478"], {}, "is not an ICE server URL"),
        (["stun:stun.example.org:70000"], {}, "the port must be 1-65535"),
        (["stun:stun.example.org?transport=udp"], {}, "a STUN URL takes no ?transport="),
        ([{"urls": ["turns:r.example.org?transport=udp"], "username": "u", "credential": "p"}], {}, "tcp only"),
        ([{"urls": ["turn:r.example.org?transport=sctp"], "username": "u", "credential": "p"}], {}, "udp or tcp"),
        ([{"urls": []}], {}, "at least 1 item"),
        ([{"urls": ["stun:s.example.org"], "use": "everyone"}], {}, "'both', 'browser' or 'server'"),
        (["stun:s.example.org"], {"ice_transport_policy": "relay"}, "needs a TURN server the browser uses"),
        (
            [{"urls": ["turn:r.example.org"], "use": "browser"}],
            {"ice_transport_policy": "relay", "turn_secret": SECRET},
            "needs a TURN server the server uses",
        ),
        ([{"urls": ["turn:r.example.org"]}], {"ice_transport_policy": "relay", "turn_secret": SECRET}, None),
        ([], {"turn_secret": "short"}, "at least 16 characters"),
        (["turn:r.example.org"], {"turn_secret": SECRET, "turn_ttl_s": 600}, "must be at least live.max_seconds"),
    ],
)
def test_ice_settings_are_checked(servers, extra, error):
    from faceweave.errors import InvalidOptionError
    from faceweave.service.settings import load_settings

    overrides = {"live.ice_servers": servers, **{f"live.{k}": v for k, v in extra.items()}}
    if error is None:
        live = load_settings(environ={}, overrides=overrides).live
        assert len(live.ice_servers) == len(servers)
        assert all(server.urls for server in live.ice_servers)
        return
    with pytest.raises(InvalidOptionError) as caught:
        load_settings(environ={}, overrides=overrides)
    assert str(caught.value).startswith("invalid setting live") and error in str(caught.value), caught.value


def test_ice_servers_come_from_the_environment_as_json():
    from faceweave.service.settings import load_settings

    env = {
        "FACEWEAVE_LIVE__ICE_SERVERS": '[{"urls": ["turn:turn.example.com:3478?transport=udp"]}, "stun:s.example.org"]',
        "FACEWEAVE_LIVE__TURN_SECRET": SECRET,
    }
    live = load_settings(environ=env).live
    assert [s.urls for s in live.ice_servers] == [
        ("turn:turn.example.com:3478?transport=udp",),
        ("stun:s.example.org",),
    ]
    assert live.turn_secret == SECRET


# ------------------------------------------------------------------ TURN REST credentials
def test_turn_credentials_follow_the_coturn_scheme():
    from faceweave.service.webrtc.ice import turn_credentials

    username, password = turn_credentials(SECRET, "alice", expires_at=1_800_000_000)
    assert username == "1800000000:alice"
    expected = base64.b64encode(hmac.new(SECRET.encode(), b"1800000000:alice", hashlib.sha1).digest()).decode()
    assert password == expected and len(base64.b64decode(password)) == 20
    # coturn's separator and anything odd in a caller's name do not reach the user part
    assert turn_credentials(SECRET, "key:bob smith", expires_at=5)[0] == "5:key_bob_smith"


def test_each_side_gets_its_servers_with_fresh_credentials():
    from faceweave.service.settings import load_settings
    from faceweave.service.webrtc.ice import ice_servers_for

    live = load_settings(
        environ={},
        overrides={
            "live.turn_secret": SECRET,
            "live.ice_servers": [
                "stun:stun.example.org",
                {"urls": ["turn:relay.example.org"]},
                {"urls": ["turn:static.example.org"], "username": "long", "credential": "term", "use": "browser"},
                {"urls": ["turn:inside.example.internal"], "use": "server"},
            ],
        },
    ).live
    browser = ice_servers_for(live, "browser", "alice", now=1000.0)
    assert [s.urls[0] for s in browser.servers] == [
        "stun:stun.example.org",
        "turn:relay.example.org",
        "turn:static.example.org",
    ]
    assert browser.expires_at == 1000 + int(live.turn_ttl_s)
    stun, minted, static = (s.as_json() for s in browser.servers)
    assert stun == {"urls": ["stun:stun.example.org"]}
    assert minted["username"] == f"{browser.expires_at}:alice" and minted["credential"] != SECRET
    assert static == {"urls": ["turn:static.example.org"], "username": "long", "credential": "term"}
    server = ice_servers_for(live, "server", "alice", now=1000.0)
    assert [s.urls[0] for s in server.servers] == [
        "stun:stun.example.org",
        "turn:relay.example.org",
        "turn:inside.example.internal",
    ]
    no_turn = ice_servers_for(load_settings(environ={}).live, "browser", "alice")
    assert no_turn.servers == () and no_turn.expires_at is None


async def _relay_candidates(port: int, username: str, password: str) -> list[str]:
    """The relay candidates aioice (aiortc's ICE) gets from the TURN server at ``port``."""
    import aioice

    connection = aioice.Connection(
        ice_controlling=True,
        turn_server=("127.0.0.1", port),
        turn_username=username,
        turn_password=password,
        use_ipv6=False,
        transport_policy=aioice.TransportPolicy.RELAY,
    )
    try:
        await connection.gather_candidates()
        return [c.type for c in connection.local_candidates]
    finally:
        await connection.close()


def test_coturn_takes_the_time_limited_credentials(tmp_path):
    pytest.importorskip("aioice", reason="the webrtc extra (aiortc) is not installed")
    from tests.live_peer import turn_server

    from faceweave.service.webrtc.ice import turn_credentials

    soon = int(time.time()) + 600
    with turn_server(tmp_path, SECRET) as port:
        good = asyncio.run(_relay_candidates(port, *turn_credentials(SECRET, "alice", expires_at=soon)))
        other_secret = turn_credentials("another-secret-0123456789", "alice", expires_at=soon)
        wrong = asyncio.run(_relay_candidates(port, *other_secret))
        expired = asyncio.run(_relay_candidates(port, *turn_credentials(SECRET, "alice", expires_at=soon - 1200)))
    assert good == ["relay"]
    assert wrong == [] and expired == []


# ------------------------------------------------------------------ POST /v1/live/reservations, GET /v1/live/config
def test_the_page_gets_the_browser_servers_and_never_the_secret(tmp_path):
    live = {
        "turn_secret": SECRET,
        "ice_servers": [
            "stun:stun.example.org:3478",
            {"urls": ["turn:relay.example.org:3478?transport=udp", "turn:relay.example.org:3478?transport=tcp"]},
            {"urls": ["turn:inside.example.internal"], "use": "server", "username": "srv", "credential": "hidden-pass"},
        ],
    }
    config = settings(tmp_path, auth={"api_keys": [{"user": "alice", "key": ALICE_KEY}]}, live=live)
    with running_app(config) as client:
        assert client.get("/v1/live/config").status_code == 401
        assert client.post("/v1/live/reservations").status_code == 401
        began = int(time.time())
        response = client.post("/v1/live/reservations", headers={"Authorization": f"Bearer {ALICE_KEY}"})
        plain = client.get("/v1/live/config", headers={"Authorization": f"Bearer {ALICE_KEY}"})
    assert response.status_code == 201, response.text
    for text in (response.text, plain.text):
        assert SECRET not in text and "hidden-pass" not in text and "inside" not in text
    body = response.json()
    assert body["ice_transport_policy"] == "all"
    stun, turn = body["ice_servers"]
    assert stun == {"urls": ["stun:stun.example.org:3478"]}
    assert turn["urls"] == live["ice_servers"][1]["urls"]
    expiry, _, user = turn["username"].partition(":")
    assert user == body["id"] and int(expiry) == body["expires_at"]  # made for the reserved session alone
    assert began + config.live.turn_ttl_s <= int(expiry) <= time.time() + config.live.turn_ttl_s
    signed = hmac.new(SECRET.encode(), turn["username"].encode(), hashlib.sha1).digest()
    assert turn["credential"] == base64.b64encode(signed).decode()
    # without a reservation: no time-limited credentials at all
    assert plain.json()["ice_servers"] == [stun] and plain.json()["expires_at"] is None
    assert plain.json()["sessions"] == config.live.sessions


def test_without_ice_servers_the_page_gets_none(tmp_path):
    with running_app(settings(tmp_path)) as client:
        body = client.get("/v1/live/config").json()
        reserved = client.post("/v1/live/reservations").json()
    assert body == {
        "ice_servers": [],
        "ice_transport_policy": "all",
        "expires_at": None,
        "sessions": 2,
        "links": {"reserve": "/v1/live/reservations"},
    }
    assert reserved["ice_servers"] == [] and reserved["expires_at"] is None
    assert reserved["links"] == {"offer": "/v1/live"}


# ------------------------------------------------------------------ a session's calls on another node
def test_another_nodes_session_answers_421(tmp_path):
    from faceweave.service.webrtc.hub import node_tag

    here, there = node_tag("live-0"), node_tag("live-1")
    assert here != there and len(here) == 8 and node_tag() == node_tag(None)
    with running_app(settings(tmp_path, live={"node": "live-0"})) as client:
        foreign = f"/v1/live/{there}{'ab' * 16}"
        for response in (
            client.get(foreign),
            client.delete(foreign),
            client.post(foreign + "/source", files={"source": ("s.jpg", b"x")}),
        ):
            assert response.status_code == 421, response.text
            error = response.json()["error"]
            assert error["code"] == "live_session_elsewhere"
            assert "held by another node" in error["message"] and here in error["message"]
        for unknown in (f"{here}{'ab' * 16}", "ab" * 16, "not-an-id"):  # this node's own ids, and other text: 404
            response = client.get(f"/v1/live/{unknown}")
            assert response.status_code == 404 and response.json()["error"]["code"] == "not_found", unknown


@pytest.mark.slow
def test_a_real_session_id_carries_its_node_and_another_node_says_so(tmp_path, faces_dir):
    pytest.importorskip("aiortc", reason="the webrtc extra (aiortc) is not installed")
    from tests.live_peer import offer_sdp

    from faceweave.service.webrtc.hub import node_tag

    async def offer() -> str:
        pc, sdp = await offer_sdp()
        await pc.close()
        return sdp

    photo = (faces_dir / "single" / "biden2.jpg").read_bytes()
    with running_app(settings(tmp_path / "a", live={"node": "live-0", "sessions": 1})) as here:
        opened = here.post("/v1/live", files={"source": ("s.jpg", photo)}, data={"sdp": asyncio.run(offer())})
        assert opened.status_code == 201, opened.text
        session = opened.json()["id"]
        assert session.startswith(node_tag("live-0")) and len(session) == 40
        assert here.get(f"/v1/live/{session}").json()["state"] == "running"
        with running_app(settings(tmp_path / "b", live={"node": "live-1"})) as there:
            elsewhere = there.get(f"/v1/live/{session}")
        assert elsewhere.status_code == 421 and elsewhere.json()["error"]["code"] == "live_session_elsewhere"
        assert here.delete(f"/v1/live/{session}").json()["state"] == "ended"


# ------------------------------------------------------------------ a session through TURN only
async def _through_turn(base: str, photo: bytes, frames, *, policy: str) -> tuple[dict, int, list[str]]:
    import httpx
    from aiortc import RTCIceServer, RTCSessionDescription
    from tests.live_peer import Received, offer_sdp

    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        config = (await http.post("/v1/live/reservations")).json()
        assert config["ice_transport_policy"] == policy
        servers = [RTCIceServer(**server) for server in config["ice_servers"]]
        pc, sdp = await offer_sdp(frames=frames, ice_servers=servers, relay=True)
        received = Received()
        pc.on("track", received.on_track)
        response = await http.post(
            "/v1/live", files={"source": ("s.jpg", photo)}, data={"sdp": sdp, "reservation": config["id"]}
        )
        assert response.status_code == 201, response.text
        answer = response.json()
        await pc.setRemoteDescription(RTCSessionDescription(sdp=answer["sdp"], type="answer"))
        deadline = time.monotonic() + 60
        while len(received.frames) < 5 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        stats = (await http.get(answer["links"]["self"])).json()
        types = [c.split()[7] for c in answer["sdp"].split("\r\n") if c.startswith("a=candidate:")]
        await pc.close()
    return stats, len(received.frames), types


@pytest.mark.slow
@pytest.mark.parametrize("server_side", ["relay", "host"])
def test_a_session_through_turn(tmp_path, faces_dir, astronaut, server_side):
    """The peer (the browser) sends through TURN relay candidates only; the
    server either relays too (policy relay, as on Kubernetes) or offers its
    host candidates alone and answers the relay's checks (a TURN entry for
    the browser only, as in Compose)."""
    pytest.importorskip("aiortc", reason="the webrtc extra (aiortc) is not installed")
    import numpy as np
    from tests.live_peer import serving, turn_server

    photo = (faces_dir / "single" / "biden2.jpg").read_bytes()
    with turn_server(tmp_path, SECRET) as port:
        url = f"turn:127.0.0.1:{port}?transport=udp"
        live: dict = {"sessions": 1, "turn_secret": SECRET}
        if server_side == "relay":
            live.update(ice_transport_policy="relay", ice_servers=[{"urls": [url]}])
        else:
            live.update(ice_servers=[{"urls": [url], "use": "browser"}])
        with serving(settings(tmp_path, live=live)) as base:
            frames = [np.ascontiguousarray(astronaut)]
            policy = "relay" if server_side == "relay" else "all"
            stats, frames_back, types = asyncio.run(_through_turn(base, photo, frames, policy=policy))
    assert set(types) == {server_side}, types  # the server's candidates: relay only, or host only
    assert frames_back >= 5 and stats["swapped"] >= 5, stats
