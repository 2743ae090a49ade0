"""The web page: ``GET /``, its static files, ``POST /v1/faces``, and the page
itself driven in headless Chromium from upload to download.

The browser tests need Debian's ``chromium`` and the ``playwright`` package
(its own browser download is not used) and are skipped without them.  The
screenshot lands in ``test-artifacts/web_page.png``.
"""

from __future__ import annotations

import base64
import io
import shutil
import socket
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from tests.service_fixtures import ALICE_KEY, png_bytes, settings, wait_for

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"


def _web_app(config):
    from faceweave.service.app import create_app
    from faceweave.service.web import install_web

    app = create_app(config)
    install_web(app)
    return app


@contextmanager
def _client(config) -> Iterator:
    from fastapi.testclient import TestClient

    with TestClient(_web_app(config), raise_server_exceptions=False) as client:
        wait_for(lambda: client.get("/readyz").status_code == 200, what="the app to be ready")
        yield client


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    with _client(settings(tmp_path_factory.mktemp("web"), sync_slots=1)) as c:
        yield c


def _error(response) -> dict:
    assert "Traceback" not in response.text
    return response.json()["error"]


# ------------------------------------------------------------------ page and static files
@pytest.mark.parametrize(
    ("path", "media_type", "needle"),
    [
        ("/", "text/html", '<script src="/static/app.js" defer></script>'),
        ("/static/index.html", "text/html", 'id="job-form"'),
        ("/static/app.js", "text/javascript", "fetch(path"),
        ("/static/style.css", "text/css", ".stage canvas"),
    ],
)
def test_page_and_static_files(client, path, media_type, needle):
    response = client.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith(media_type)
    assert needle in response.text
    assert "script-src 'self'" in response.headers["content-security-policy"]
    assert response.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize("path", ["/static/web.py", "/static/..%2Fweb.py", "/static/%2e%2e%2fapp.py", "/static/"])
def test_static_serves_only_its_own_files(client, path):
    response = client.get(path)
    assert response.status_code == 404
    assert _error(response)["code"] == "not_found"


def test_page_is_offline_and_uses_only_v1():
    from faceweave.service.web import STATIC_FILES, static_file

    for name in STATIC_FILES:
        text = static_file(name)[0].decode("utf-8")
        assert "http://" not in text and "https://" not in text, f"{name} refers to another site"
    script = static_file("app.js")[0].decode("utf-8")
    for path in ("/v1/faces", "/v1/jobs", "localStorage", "Authorization"):
        assert path in script


# ------------------------------------------------------------------ face rows (pure)
def _face(x1: float, y1: float, x2: float, y2: float, score: float):
    from faceweave.types import BBox, Face, Pose

    return Face(bbox=BBox(x1, y1, x2, y2), score=score, mesh=np.zeros((478, 3), np.float32), pose=Pose(0.0, 0.0, 0.0))


# A: 10 px at the left; B: 50 px in the middle; C: 30 px at the right, the best score.
_FACES = {"A": (0, 0, 10, 10, 0.90), "B": (100, 0, 150, 50, 0.80), "C": (200, 0, 230, 30, 0.95)}


@pytest.mark.parametrize(
    ("order", "min_face_size", "expected"),
    [
        ("large-small", 0, "BCA"),
        ("small-large", 0, "ACB"),
        ("best-score", 0, "CAB"),
        ("right-left", 0, "CBA"),
        ("large-small", 20, "BC"),
        ("left-right", 20, "BC"),
        ("small-large", 31, "B"),
        ("large-small", 51, ""),
    ],
)
def test_face_rows_follow_the_selection_order(order, min_face_size, expected):
    from faceweave.service.web import face_rows

    names = list(_FACES)
    rows = face_rows([_face(*_FACES[n]) for n in names], order=order, min_face_size=min_face_size)
    assert [r["index"] for r in rows] == list(range(len(expected)))
    assert [r["box"] for r in rows] == [[float(v) for v in _FACES[n][:4]] for n in expected]
    for row in rows:
        assert {"score", "yaw", "pitch", "roll", "size"} <= set(row)


# ------------------------------------------------------------------ POST /v1/faces
@pytest.mark.parametrize("order", ["large-small", "left-right"])
def test_faces_of_a_group_photo_match_face_index(client, faces_dir, order):
    """Row i's face is the one that ``faces=index, face_index=[i]`` swaps."""
    from faceweave.analysis import FaceAnalyser
    from faceweave.io import read_image
    from faceweave.options import SelectionOptions
    from faceweave.selection import select_faces

    path = faces_dir / "group" / "fr_two_people.jpg"
    response = client.post("/v1/faces", files={"target": ("group.jpg", path.read_bytes())}, data={"order": order})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["kind"], body["width"], body["height"], body["order"]) == ("image", 1126, 661, order)
    assert body["frame"] is None and body["frame_time"] is None
    rows = body["faces"]
    assert [r["index"] for r in rows] == [0, 1]
    if order == "large-small":
        assert rows[0]["size"] >= rows[1]["size"]
    else:
        assert rows[0]["box"][0] < rows[1]["box"][0]
    with FaceAnalyser() as analyser:
        faces = analyser.analyse(read_image(path).pixels)
    for row in rows:
        chosen = select_faces(faces, SelectionOptions(mode="index", order=order, indices=(row["index"],)))
        assert np.allclose(faces[chosen[0]].bbox.as_list(), row["box"], atol=0.2)


def test_faces_of_a_video_start_at_the_trim(client, faces_dir):
    video = (faces_dir / "video" / "lp_d18_talking_face.mp4").read_bytes()
    response = client.post("/v1/faces", files={"target": ("clip.mp4", video)}, data={"trim": "1-3"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["kind"] == "video" and len(body["faces"]) == 1
    assert 1.0 <= body["frame_time"] < 3.0
    head, _, data = body["frame"].partition(",")
    assert head == "data:image/jpeg;base64"
    frame = Image.open(io.BytesIO(base64.b64decode(data)))
    assert frame.format == "JPEG" and frame.size == (body["width"], body["height"])
    x1, y1, x2, y2 = body["faces"][0]["box"]
    assert 0 <= x1 < x2 <= body["width"] and 0 <= y1 < y2 <= body["height"]


def test_a_faceless_photo_has_no_faces(client):
    response = client.post("/v1/faces", files={"target": ("noise.png", png_bytes(320, 240))})
    assert response.status_code == 200, response.text
    assert response.json()["faces"] == [] and response.json()["width"] == 320


@pytest.mark.parametrize(
    ("files", "data", "status", "code", "says"),
    [
        ({"order": (None, "large-small")}, {}, 422, "invalid_option", "exactly one file part"),
        ({"target": ("t.txt", b"just some text")}, {}, 415, "unsupported_format", "neither an image"),
        ({"target": ("t.png", b"")}, {}, 400, "unreadable_file", "empty"),
        ({"target": ("t.png", png_bytes())}, {"order": "sideways"}, 422, "invalid_option", "unknown face order"),
        ({"target": ("t.png", png_bytes())}, {"min_face_size": "-3"}, 422, "invalid_option", "whole number"),
        ({"target": ("t.png", png_bytes())}, {"faces": "many"}, 422, "invalid_option", "unknown field 'faces'"),
        (
            {"target": ("t.png", png_bytes()), "source": ("s.png", png_bytes())},
            {},
            422,
            "invalid_option",
            "exactly one file part",
        ),
        ({"target": ("t.png", png_bytes())}, {"trim": "5-2"}, 422, "invalid_option", "ends before it starts"),
        ({"target": ("t.png", png_bytes())}, {"trim": "soon"}, 422, "invalid_option", "not a time range"),
    ],
)
def test_faces_bad_input(client, files, data, status, code, says):
    response = client.post("/v1/faces", files=files, data=data)
    assert response.status_code == status, response.text
    error = _error(response)
    assert error["code"] == code and says in error["message"]


def test_faces_outside_the_video_is_422(client, faces_dir):
    video = (faces_dir / "video" / "lp_d18_talking_face.mp4").read_bytes()
    response = client.post("/v1/faces", files={"target": ("clip.mp4", video)}, data={"trim": "60-"})
    assert response.status_code == 422
    message = _error(response)["message"]
    assert "after the end of the video (7.20 s)" in message and "upload" not in message


def test_faces_is_not_json_without_multipart(client):
    response = client.post("/v1/faces", json={"target": "x"})
    assert response.status_code == 415 and _error(response)["code"] == "unsupported_format"


def test_faces_needs_a_model_slot(tmp_path):
    with _client(settings(tmp_path, sync_slots=0)) as c:
        response = c.post("/v1/faces", files={"target": ("t.png", png_bytes())})
        assert response.status_code == 503
        assert "sync_slots" in _error(response)["message"]


def test_faces_needs_the_key_but_the_page_does_not(tmp_path):
    config = settings(tmp_path, sync_slots=1, auth={"api_keys": [{"user": "alice", "key": ALICE_KEY}]})
    with _client(config) as c:
        assert c.get("/").status_code == 200
        refused = c.post("/v1/faces", files={"target": ("t.png", png_bytes())})
        assert refused.status_code == 401 and _error(refused)["code"] == "unauthorized"
        allowed = c.post(
            "/v1/faces", files={"target": ("t.png", png_bytes())}, headers={"Authorization": f"Bearer {ALICE_KEY}"}
        )
        assert allowed.status_code == 200 and allowed.json()["faces"] == []


# ------------------------------------------------------------------ the page in Chromium
def _chromium() -> str:
    pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    path = shutil.which("chromium")
    if path is None:
        pytest.skip("Debian's 'chromium' is not installed (apt-get install chromium)")
    return path


@contextmanager
def _server(config) -> Iterator[str]:
    """A real uvicorn server for ``config`` on a free loopback port, ready; yields its URL."""
    import uvicorn

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(_web_app(config), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="web-test-server", daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            with urllib.request.urlopen(base + "/readyz", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    try:
        wait_for(ready, what="the server to be ready", every_s=0.1)
        yield base
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@contextmanager
def _page(base: str) -> Iterator:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), headless=True)
        try:
            context = browser.new_context(accept_downloads=True, viewport={"width": 1100, "height": 1400})
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(base + "/")
            yield page
            assert errors == [], "JavaScript errors on the page"
        finally:
            browser.close()


@pytest.mark.browser
@pytest.mark.slow
def test_page_from_upload_to_download(tmp_path, faces_dir):
    _chromium()
    source = faces_dir / "single" / "biden2.jpg"
    target = faces_dir / "single" / "astronaut_eileen_collins.png"
    with _server(settings(tmp_path, workers=1, sync_slots=1)) as base, _page(base) as page:
        page.wait_for_selector("#jobs-empty", state="visible")
        page.set_input_files("#sources", str(source))
        page.set_input_files("#target", str(target))
        face = page.wait_for_selector("#face-0", state="attached")
        assert page.locator(".face-choice").count() == 1
        assert "1 face(s) found" in page.inner_text("#faces-status")
        page.uncheck("#face-0")  # nothing ticked: the page refuses to start
        page.click("#start")
        assert "Tick at least one face" in page.inner_text("#message")
        face.check()
        page.click("#start")
        page.wait_for_selector("#download", state="visible", timeout=120_000)
        assert "succeeded" in page.inner_text("#job-state")
        assert page.get_attribute("#progress", "value") == "100"
        assert "1 face(s) swapped" in page.inner_text("#job-detail")
        page.wait_for_selector("#preview-figure", state="visible")
        assert page.eval_on_selector("#preview", "img => img.naturalWidth") == 512
        page.wait_for_selector("#jobs-body tr >> text=succeeded")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "web_page.png"), full_page=True)
        with page.expect_download() as download:
            page.click("#download")
        saved = Path(download.value.path())
        assert download.value.suggested_filename.endswith(".png")

        result = Image.open(saved)
        original = Image.open(target)
        assert (result.format, result.size) == ("PNG", original.size)
        out = np.asarray(result.convert("RGB")).astype(int)
        ref = np.asarray(original.convert("RGB")).astype(int)
        x1, y1, x2, y2 = 179, 70, 272, 177  # the face box that /v1/faces reports for this photo
        assert np.abs(out[y1:y2, x1:x2] - ref[y1:y2, x1:x2]).mean() > 3.0  # the face changed
        assert np.abs(out[:60, :60] - ref[:60, :60]).mean() < 3.0  # a corner did not

        page.click("#jobs-body button:has-text('Delete')")
        page.wait_for_selector("#jobs-empty", state="visible")
        assert "deleted" in page.inner_text("#message")


@pytest.mark.browser
@pytest.mark.slow
def test_page_asks_for_the_key_and_keeps_it(tmp_path, faces_dir):
    _chromium()
    config = settings(tmp_path, sync_slots=1, auth={"api_keys": [{"user": "alice", "key": ALICE_KEY}]})
    with _server(config) as base, _page(base) as page:
        page.wait_for_selector("#key-section", state="visible")
        assert "requires an API key" in page.inner_text("#key-hint")
        page.fill("#api-key", ALICE_KEY)
        page.click("#key-form button[type=submit]")
        page.wait_for_selector("#jobs-empty", state="visible")
        assert page.evaluate("localStorage.getItem('faceweave.apiKey')") == ALICE_KEY
        page.set_input_files("#target", str(faces_dir / "group" / "fr_two_people.jpg"))
        page.wait_for_selector("#face-1", state="attached")
        assert page.is_checked("#face-0") and not page.is_checked("#face-1")
        page.reload()
        page.wait_for_selector("#key-section", state="visible")
        assert "saved" in page.inner_text("#key-hint")


@pytest.mark.browser
@pytest.mark.slow
def test_page_swaps_a_trimmed_video_and_cancels_a_job(tmp_path, faces_dir):
    import av

    _chromium()
    video = faces_dir / "video" / "lp_d18_talking_face.mp4"
    with _server(settings(tmp_path, workers=1, sync_slots=1)) as base, _page(base) as page:
        page.set_input_files("#sources", str(faces_dir / "single" / "biden2.jpg"))
        page.set_input_files("#target", str(video))
        page.wait_for_selector("#trim-field", state="visible")
        page.wait_for_selector("#face-0", state="attached")
        assert "in the frame at 0" in page.inner_text("#faces-status")
        page.fill("#trim", "1-2")
        page.press("#trim", "Tab")  # change: the faces are found again from 1 s on
        page.wait_for_selector("#faces-status >> text=in the frame at 1")
        page.select_option("#format", "mp4")
        page.click("#start")
        page.wait_for_selector("#download", state="visible", timeout=120_000)
        assert "frame 30 of 30" in page.inner_text("#job-detail")
        page.wait_for_selector("#preview-figure", state="visible")
        with page.expect_download() as download:
            page.click("#download")
        assert download.value.suggested_filename.endswith(".mp4")
        with av.open(download.value.path()) as container:
            frames = sum(1 for _ in container.decode(video=0))
        assert frames == 30  # 1 s at 30 fps

        page.fill("#trim", "")  # the whole video: long enough to cancel it while it runs
        page.click("#start")
        page.wait_for_selector("#jobs-body button:has-text('Cancel')")
        page.click("#jobs-body button:has-text('Cancel')")
        page.wait_for_selector("#message >> text=cancelled")
        page.wait_for_selector("#jobs-body tr >> text=cancelled")
        assert page.locator("#jobs-body tr").count() == 2
