"""Live places (issue 33, F15 and the TURN finding): one caller cannot hold
every place (``live.sessions_per_caller``, 429 with ``Retry-After``), a
full node's 503 ``at_capacity`` says ``Retry-After`` too, a reservation
(``POST /v1/live/reservations``) holds a place for ``live.reservation_s``
and carries TURN credentials made for its session alone (``GET
/v1/live/config`` gives none).  The stalled peer that held its place for
an hour: tests/test_service_live.py."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import time

import pytest
from tests.service_fixtures import ALICE_KEY, BOB_KEY, running_app, settings

CAROL_KEY = "carol-key-0123456789abcdef000"
KEYS = [{"user": "alice", "key": ALICE_KEY}, {"user": "bob", "key": BOB_KEY}, {"user": "carol", "key": CAROL_KEY}]
SECRET = "coturn-shared-secret-0123456789"


def _as(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _places(capacity: int = 2, per_caller: int = 1, clock: Clock | None = None):
    from faceweave.service.webrtc.places import LivePlaces

    return LivePlaces(capacity=capacity, per_caller=per_caller, hold_s=30.0, retry_after_s=7.0, clock=clock or Clock())


# ------------------------------------------------------------------ the places (pure)
def test_one_caller_holds_at_most_its_share_and_the_node_at_most_its_places():
    from faceweave.errors import AtCapacityError, LiveCallerLimitError

    places = _places(capacity=2, per_caller=1)
    places.take("key:alice")
    with pytest.raises(LiveCallerLimitError) as mine:
        places.reserve("key:alice", "s2")  # a reservation counts as a place
    assert mine.value.retry_after == 7.0 and "live.sessions_per_caller = 1" in str(mine.value)
    places.reserve("key:bob", "s3")
    with pytest.raises(AtCapacityError) as full:
        places.take("key:carol")
    assert full.value.retry_after == 7.0 and "at most 2 live session(s)" in str(full.value)
    assert places.taken() == 2
    places.release("key:alice")
    places.take("key:carol")  # alice's place went back
    assert places.taken() == 2


def test_a_reservation_is_its_callers_once_and_expires():
    from faceweave.errors import NotFoundError

    clock = Clock()
    places = _places(capacity=1, per_caller=1, clock=clock)
    places.reserve("key:alice", "s1")
    with pytest.raises(NotFoundError):
        places.claim("s1", "key:bob")  # another caller's reservation is not found
    places.claim("s1", "key:alice")
    with pytest.raises(NotFoundError, match="it was used, or its 30 s"):
        places.claim("s1", "key:alice")  # once
    places.release("key:alice")
    places.reserve("key:alice", "s2")
    clock.now += 29.9
    assert places.taken() == 1
    clock.now += 0.1  # its time is up: the place is free, the reservation gone
    assert places.taken() == 0
    with pytest.raises(NotFoundError):
        places.claim("s2", "key:alice")
    places.reserve("key:alice", "s3")
    places.cancel("s3", "key:bob")  # not bob's to let go
    assert places.taken() == 1
    places.cancel("s3", "key:alice")
    assert places.taken() == 0


def test_no_places_is_live_off():
    from faceweave.errors import AtCapacityError, NotReadyError

    with pytest.raises(NotReadyError, match=r"live.sessions = 0") as caught:
        _places(capacity=0).take("local")
    assert not isinstance(caught.value, AtCapacityError)


@pytest.mark.parametrize(
    ("auth", "live", "expected"),
    [
        ({"api_keys": KEYS[:1]}, {"sessions": 4}, 1),  # callers are told apart: one place each
        ({}, {"sessions": 4}, 4),  # every caller is "local": a cap of 1 would be the node's
        ({"api_keys": KEYS[:1]}, {"sessions": 4, "sessions_per_caller": 3}, 3),
        ({}, {"sessions": 0}, 1),
    ],
)
def test_places_per_caller_default(tmp_path, auth, live, expected):
    from faceweave.service.webrtc.places import places_per_caller

    assert places_per_caller(settings(tmp_path, auth=auth, live=live)) == expected


def test_live_settings_are_checked():
    from faceweave.errors import InvalidOptionError
    from faceweave.service.settings import load_settings

    live = load_settings(environ={"FACEWEAVE_LIVE__FRAME_TIMEOUT_S": "2.5"}).live
    assert (live.frame_timeout_s, live.sessions_per_caller, live.reservation_s, live.retry_after_s) == (
        2.5,
        None,
        30.0,
        10.0,
    )
    for name, value in (("frame_timeout_s", 0), ("sessions_per_caller", 0), ("reservation_s", 601)):
        with pytest.raises(InvalidOptionError, match=f"invalid setting live.{name}"):
            load_settings(environ={}, overrides={f"live.{name}": value})


# ------------------------------------------------------------------ through the API
def test_a_caller_gets_429_for_a_second_place_and_a_full_node_503_both_with_retry_after(tmp_path):
    config = settings(tmp_path, auth={"api_keys": KEYS}, live={"sessions": 2, "retry_after_s": 12})
    with running_app(config) as client:
        first = client.post("/v1/live/reservations", headers=_as(ALICE_KEY))
        assert first.status_code == 201, first.text
        again = client.post("/v1/live/reservations", headers=_as(ALICE_KEY))
        assert again.status_code == 429 and again.headers["Retry-After"] == "12", again.text
        error = again.json()["error"]
        assert error["code"] == "live_sessions_per_caller" and "live.sessions_per_caller = 1" in error["message"]
        assert client.post("/v1/live/reservations", headers=_as(BOB_KEY)).status_code == 201
        full = client.post("/v1/live/reservations", headers=_as(CAROL_KEY))
        assert full.status_code == 503 and full.headers["Retry-After"] == "12", full.text
        assert full.json()["error"]["code"] == "at_capacity"
        metrics = client.get("/metrics").text
    assert 'faceweave_live_sessions_refused_total{reason="caller"} 1.0' in metrics
    assert 'faceweave_live_sessions_refused_total{reason="full"} 1.0' in metrics


def test_turn_credentials_come_with_a_reservation_bound_to_its_session(tmp_path):
    live = {
        "turn_secret": SECRET,
        "ice_servers": [
            "stun:stun.example.org:3478",
            {"urls": ["turn:relay.example.org:3478?transport=udp"]},
            {"urls": ["turn:static.example.org"], "username": "long", "credential": "term", "use": "browser"},
        ],
    }
    with running_app(settings(tmp_path, auth={"api_keys": KEYS}, live=live)) as client:
        assert client.post("/v1/live/reservations").status_code == 401
        config = client.get("/v1/live/config", headers=_as(ALICE_KEY))
        began = int(time.time())
        reserved = client.post("/v1/live/reservations", headers=_as(ALICE_KEY))
    assert config.status_code == 200 and reserved.status_code == 201, reserved.text
    # the config holds what needs no credentials made: STUN and the long-term entry, no minted TURN
    assert config.json()["ice_servers"] == [
        {"urls": ["stun:stun.example.org:3478"]},
        {"urls": ["turn:static.example.org"], "username": "long", "credential": "term"},
    ]
    assert config.json()["expires_at"] is None and config.json()["links"] == {"reserve": "/v1/live/reservations"}
    body = reserved.json()
    assert SECRET not in reserved.text and body["reserved_s"] == 30.0 and len(body["id"]) == 40
    minted = body["ice_servers"][1]
    expiry, _, user = minted["username"].partition(":")
    assert user == body["id"] and int(expiry) == body["expires_at"] >= began + 14400  # bound to the session
    signed = hmac.new(SECRET.encode(), minted["username"].encode(), hashlib.sha1).digest()
    assert minted["credential"] == base64.b64encode(signed).decode()


def test_the_server_side_turn_user_is_the_session(tmp_path):
    pytest.importorskip("aiortc", reason="the webrtc extra (aiortc) is not installed")
    from faceweave.service.webrtc.peer import server_configuration

    live = settings(tmp_path, live={"turn_secret": SECRET, "ice_servers": [{"urls": ["turn:r.example.org"]}]}).live
    (server,) = server_configuration(live, "ab" * 20).iceServers
    assert server.username.endswith(":" + "ab" * 20)


def _offer() -> str:
    from tests.live_peer import offer_sdp

    async def make() -> str:
        pc, sdp = await offer_sdp()
        await pc.close()
        return sdp

    return asyncio.run(make())


@pytest.mark.slow
def test_an_offer_opens_the_session_its_reservation_held(tmp_path, faces_dir):
    pytest.importorskip("aiortc", reason="the webrtc extra (aiortc) is not installed")
    photo = {"source": ("s.jpg", (faces_dir / "single" / "biden2.jpg").read_bytes())}
    config = settings(tmp_path, auth={"api_keys": KEYS}, live={"sessions": 2, "reservation_s": 1.0})
    with running_app(config) as client:
        place = client.post("/v1/live/reservations", headers=_as(ALICE_KEY)).json()
        busy = client.post("/v1/live", files=photo, data={"sdp": _offer()}, headers=_as(ALICE_KEY))
        assert busy.status_code == 429 and "Retry-After" in busy.headers, busy.text  # the reservation is her place
        foreign = client.post(
            "/v1/live", files=photo, data={"sdp": _offer(), "reservation": place["id"]}, headers=_as(BOB_KEY)
        )
        assert foreign.status_code == 404 and "no live reservation" in foreign.json()["error"]["message"]
        opened = client.post(
            "/v1/live", files=photo, data={"sdp": _offer(), "reservation": place["id"]}, headers=_as(ALICE_KEY)
        )
        assert opened.status_code == 201, opened.text
        assert opened.json()["id"] == place["id"]  # the session has the id its TURN credentials name
        assert client.delete(opened.json()["links"]["self"], headers=_as(ALICE_KEY)).json()["state"] == "ended"
        # a reservation never used gives its place back when its time is up
        late = client.post("/v1/live/reservations", headers=_as(ALICE_KEY)).json()
        time.sleep(1.1)
        expired = client.post(
            "/v1/live", files=photo, data={"sdp": _offer(), "reservation": late["id"]}, headers=_as(ALICE_KEY)
        )
        assert expired.status_code == 404 and "live.reservation_s" in expired.json()["error"]["message"]
        # an offer refused before its reservation is used gives the place back at once
        refused = client.post(
            "/v1/live/reservations", headers=_as(ALICE_KEY)
        ).json()  # the expired one is gone, so this is allowed
        bad = client.post(
            "/v1/live", files=photo, data={"sdp": "v=0\r\n", "reservation": refused["id"]}, headers=_as(ALICE_KEY)
        )
        assert bad.status_code == 422
        assert client.post("/v1/live/reservations", headers=_as(ALICE_KEY)).status_code == 201
