"""Drop-in clients: code written for the classic Flask face-swap service and
its ``swap_face_from_image`` function keeps working unchanged.  Both are
driven exactly as such a client does: a requests-style multipart post of
open files, and arrays from ``cv2.imread``."""

from __future__ import annotations

import base64
from pathlib import Path

import cv2
import numpy as np
import pytest
from tests.service_fixtures import ALICE_KEY, running_app, settings

from faceweave.errors import InputError, InvalidOptionError
from faceweave.provenance.watermark import Watermarker

DATA_URL = "data:image/jpeg;base64,"


@pytest.fixture(scope="module")
def photos(faces_dir: Path) -> dict[str, Path]:
    single = faces_dir / "single"
    return {
        "source": single / "paul_rudd.jpg",
        "target": single / "biden2.jpg",
        "no_face": faces_dir / "hard" / "neg_no_face.png",
    }


# ------------------------------------------------------------------ the Python function
def test_swap_face_from_image_takes_and_returns_opencv_bgr(photos):
    import faceweave
    from faceweave.pipeline import FaceSwapper
    from faceweave.provenance.stamp import Provenance

    source, target = cv2.imread(str(photos["source"])), cv2.imread(str(photos["target"]))
    out = faceweave.swap_face_from_image(source, target, device="cpu")
    assert out.dtype == np.uint8 and out.shape == target.shape and out.flags.c_contiguous
    assert np.abs(out.astype(int) - target).mean() > 0.5  # a face was swapped
    assert Watermarker().detect(out[..., ::-1]).found  # marked like every library output
    # the same swap as from the files, in BGR (unmarked, so that the pixels compare exactly)
    with FaceSwapper(provenance=Provenance.new(watermark=False)) as swapper:
        plain = faceweave.swap_face_from_image(source, target, swapper=swapper)
        rgb = swapper.swap(photos["source"], photos["target"]).image
    assert np.array_equal(plain, rgb[..., ::-1]) and not np.array_equal(plain, rgb)


@pytest.mark.parametrize(
    ("source", "device", "error", "fragment"),
    [
        (None, "cpu", InputError, "cv2.imread returns None"),
        (np.zeros((64, 64, 3), np.float32), "cpu", InputError, "got float32 (64, 64, 3)"),
        (np.zeros((64, 64, 2), np.uint8), "cpu", InputError, "got uint8 (64, 64, 2)"),
        ("photo", "nosuch", InvalidOptionError, "device 'nosuch'"),
        ("photo", "cuda:x", InvalidOptionError, "must be a number"),
    ],
)
def test_swap_face_from_image_refuses_bad_input(photos, source, device, error, fragment):
    from faceweave import swap_face_from_image

    target = cv2.imread(str(photos["target"]))
    with pytest.raises(error, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        swap_face_from_image(target if isinstance(source, str) else source, target, device=device)


# ------------------------------------------------------------------ POST /swap
@pytest.fixture(scope="module")
def client(tmp_path_factory):
    with running_app(settings(tmp_path_factory.mktemp("classic"), sync_slots=1)) as c:
        yield c


def _post(client, photos, *, target: str = "target", headers: dict | None = None):
    """As a requests client of the classic service: ``files={"source": open(...), "target": open(...)}``."""
    with open(photos["source"], "rb") as source, open(photos[target], "rb") as picture:
        return client.post("/swap", files={"source": source, "target": picture}, headers=headers or {})


def test_classic_swap_answers_a_jpeg_data_url(client, photos):
    response = _post(client, photos)
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"status", "result"} and body["status"] == "success"
    assert body["result"].startswith(DATA_URL)
    image = cv2.imdecode(np.frombuffer(base64.b64decode(body["result"][len(DATA_URL) :]), np.uint8), cv2.IMREAD_COLOR)
    assert image.shape == cv2.imread(str(photos["target"])).shape
    assert Watermarker().detect(image[..., ::-1]).found


@pytest.mark.parametrize(
    ("files", "status", "fragment"),
    [
        ("no-face", 422, "face"),
        ("target-only", 422, "source"),
        ("text-target", 415, ""),
    ],
)
def test_classic_swap_errors_are_the_classic_body(client, photos, tmp_path, files, status, fragment):
    if files == "no-face":
        response = _post(client, photos, target="no_face")
    elif files == "target-only":
        with open(photos["target"], "rb") as picture:
            response = client.post("/swap", files={"target": picture})
    else:
        (tmp_path / "notes.jpg").write_text("not a picture\n")
        response = _post(client, {**photos, "text": tmp_path / "notes.jpg"}, target="text")
    assert (response.status_code, set(response.json())) == (status, {"status", "message"}), response.text
    assert response.json()["status"] == "error" and fragment in response.json()["message"]


@pytest.fixture(scope="module")
def locked(tmp_path_factory):
    config = settings(
        tmp_path_factory.mktemp("classic-auth"),
        auth={"api_keys": [{"user": "alice", "key": ALICE_KEY}]},
        sync_wait_s=0.5,
    )
    with running_app(config) as c:
        yield c


@pytest.mark.parametrize(
    ("headers", "status"),
    [({}, 401), ({"Authorization": "Bearer wrong-key-0123456789abcdef"}, 401), ({"X-API-Key": ALICE_KEY}, 503)],
)
def test_classic_swap_authenticates_like_the_api(locked, photos, headers, status):
    response = _post(locked, photos, headers=headers)  # no model slot here: an authenticated call gets 503
    assert response.status_code == status and response.json()["status"] == "error", response.text
