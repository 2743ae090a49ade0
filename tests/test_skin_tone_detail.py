"""The target's skin tint (``composite.skin_tint``) and its texture under a
softer new face (``blend.restore_detail``): known inputs, known outputs; and
on real faces, a tinted target's cheeks and a downscaled source's sharpness."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from faceweave.compositing.blend import restore_detail
from faceweave.compositing.colour import to_lab, to_rgb
from faceweave.compositing.composite import TINT_LIGHTNESS, skin_tint
from faceweave.compositing.regions import feature_mask, skin_region
from faceweave.compositing.resample import half, half_mesh
from faceweave.compositing.values import HalfCrop


# ---------------------------------------------------------------- restore_detail (synthetic)
def _textured(seed: int, size: int = 200, amplitude: float = 12.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    noise = cv2.GaussianBlur(rng.normal(0, 1, (size, size)).astype(np.float32), (0, 0), 2.0)
    noise *= amplitude / noise.std()
    return np.clip(128 + np.dstack([noise] * 3), 0, 255).astype(np.uint8)


def _energy(image: np.ndarray, sigma: float) -> float:
    luma = image.astype(np.float32).mean(axis=2)
    band = luma - cv2.GaussianBlur(luma, (0, 0), sigma)
    return float((band[40:160, 40:160] ** 2).mean())


def test_a_face_softer_than_the_photo_gets_the_photo_s_texture_back():
    original = _textured(0)
    soft = cv2.GaussianBlur(original, (0, 0), 3.0)
    mask = np.zeros((200, 200), np.float32)
    mask[30:170, 30:170] = 1.0
    identity = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    out = restore_detail(original, soft, mask, identity, sigma=2.0, out=soft.copy())
    before, after, want = _energy(soft, 2.0), _energy(out, 2.0), _energy(original, 2.0)
    assert before < 0.3 * want and abs(after - want) < 0.15 * want
    assert np.array_equal(out[:20], soft[:20])  # nothing outside the mask


def test_a_face_as_detailed_as_the_photo_is_left_alone():
    original = cv2.GaussianBlur(_textured(1), (0, 0), 2.5)  # a soft photo
    sharp = _textured(2)
    mask = np.ones((200, 200), np.float32)
    identity = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    out = restore_detail(original, sharp, mask, identity, sigma=2.0, out=sharp.copy())
    assert np.array_equal(out, sharp)


# ---------------------------------------------------------------- on a real face
@pytest.fixture(scope="module")
def astronaut_crop(astronaut):
    from faceweave.analysis import FaceAnalyser
    from faceweave.crops import cut_crop
    from faceweave.options import SwapOptions

    with FaceAnalyser(SwapOptions().analysis) as analyser:
        face = max(analyser.analyse(np.array(astronaut)), key=lambda f: f.bbox.area)
    return cut_crop(np.array(astronaut), face, face_size=256)


def _view(crop, face: np.ndarray) -> HalfCrop:
    return HalfCrop(
        face_lab=to_lab(half(face)),
        behind_lab=to_lab(half(crop.pixels)),
        mesh=half_mesh(crop.mesh),
        face_size=crop.face_size / 2,
    )


@pytest.mark.slow
def test_the_skin_tint_brings_the_target_s_cheek_colour_and_keeps_off_the_eyes(astronaut_crop):
    crop = astronaut_crop
    view0 = _view(crop, crop.pixels)
    size, mesh, fs = view0.size, view0.mesh, view0.face_size
    skin = skin_region(size, mesh, fs)
    # the new face: the target's own face with its whole skin shifted greener and bluer
    shifted = view0.behind_lab.copy()
    shifted[..., 1] -= 6.0
    shifted[..., 2] -= 4.0
    shifted[..., 0] += 3.0
    tint = skin_tint(view0, shifted, skin)
    inner = cv2.erode(skin, np.ones((9, 9), np.uint8)) > 0.5
    eyes = feature_mask(size, mesh, grow=0.01 * fs) > 0.5
    assert np.median(tint[inner][:, 1]) == pytest.approx(6.0, abs=1.0)
    assert np.median(tint[inner][:, 2]) == pytest.approx(4.0, abs=1.0)
    assert np.median(tint[inner][:, 0]) == pytest.approx(-3.0 * TINT_LIGHTNESS, abs=0.6)
    assert np.abs(tint[eyes]).max() < 1.0  # (at most a sixth of the shift at their rim) no tint on the eyes
    same = skin_tint(view0, view0.behind_lab, skin)
    assert np.abs(same[inner]).max() < 0.5  # the target's own colours: nothing to add


def _cheeks(pixels: np.ndarray, mesh: np.ndarray) -> np.ndarray:
    from faceweave.evaluate.tone import cheek_mask

    return np.median(to_lab(pixels)[cheek_mask(mesh[:, :2], pixels.shape)], axis=0)


@pytest.mark.slow
@pytest.mark.parametrize("cast", [(6.0, 10.0), (-4.0, -8.0)], ids=["warm", "cool"])
def test_a_tinted_target_gets_cheeks_that_follow_its_cast(faces_dir, cast):
    """A target given a warm or a cool cast: the new face's cheeks take the
    cast (their a*, b* move with it) and sit against the neck and temples
    within the judge's per-pair tone limit."""
    from faceweave.evaluate.tone import tone_error
    from faceweave.io.images import read_image
    from faceweave.pipeline import FaceSwapper
    from faceweave.provenance.stamp import Provenance

    target = read_image(faces_dir / "single" / "biden2.jpg").pixels
    lab = to_lab(target)
    lab[..., 1] += cast[0]
    lab[..., 2] += cast[1]
    tinted = to_rgb(lab)
    cheeks = []
    with FaceSwapper() as swapper:
        for picture in (target, tinted):
            result = swapper.swap(
                faces_dir / "single" / "happy_man.png", picture, provenance=Provenance.new(watermark=False)
            )
            face = max(swapper.analyser.analyse(result.image), key=lambda f: f.bbox.area)
            cheeks.append(_cheeks(result.image, face.mesh))
        target_face = max(swapper.analyser.analyse(tinted), key=lambda f: f.bbox.area)
    moved = cheeks[1] - cheeks[0]
    assert moved[1] == pytest.approx(cast[0], abs=2.0) and moved[2] == pytest.approx(cast[1], abs=2.0), moved
    error = tone_error(result.image, tinted, target_face.mesh, face.mesh)
    assert error is not None and error < 4.0, error


@pytest.mark.slow
def test_a_downscaled_source_keeps_a_face_as_detailed_as_the_photo(faces_dir):
    from faceweave.evaluate.metrics import sharpness_ratio
    from faceweave.evaluate.regions import inner_skin_mask
    from faceweave.io.images import read_image
    from faceweave.pipeline import FaceSwapper
    from faceweave.provenance.stamp import Provenance

    source = read_image(faces_dir / "single" / "happy_man.png").pixels
    small = cv2.resize(source, (source.shape[1] // 4, source.shape[0] // 4), interpolation=cv2.INTER_AREA)
    target = read_image(faces_dir / "single" / "biden2.jpg").pixels
    with FaceSwapper() as swapper:
        result = swapper.swap(small, target, provenance=Provenance.new(watermark=False))
        face = max(swapper.analyser.analyse(target), key=lambda f: f.bbox.area)
    mask = inner_skin_mask(face, target.shape)
    ratio = sharpness_ratio(result.image, target, result_mask=mask, target_mask=mask)
    assert ratio is not None and ratio > 0.6, ratio


@pytest.mark.slow
def test_dark_eye_makeup_of_the_source_is_lifted_to_the_target_s_lids_but_never_darkened(astronaut_crop):
    from faceweave.compositing.composite import EYELID_INNER, EYELID_OUTER, eyelid_lift
    from faceweave.compositing.regions import eye_mask

    crop = astronaut_crop
    view = _view(crop, crop.pixels)
    size, mesh, fs = view.size, view.mesh, view.face_size
    ring = (eye_mask(size, mesh, grow=EYELID_OUTER * fs) - eye_mask(size, mesh, grow=0.03 * fs)) > 0.5
    eyes = eye_mask(size, mesh) > 0.5
    made_up = view.behind_lab.copy()
    made_up[..., 0] -= 15.0 * (eye_mask(size, mesh, grow=EYELID_OUTER * fs) > 0.5)  # dark shadow around the eyes
    lift = eyelid_lift(made_up, view.behind_lab, mesh, fs)
    assert np.median(lift[ring][:, 0]) > 6.0  # a good part of the 15 taken back (the lift fades at its edges)
    assert np.abs(lift[eyes]).max() < 1.0 and EYELID_INNER > 0  # the eyes themselves are not touched
    lighter = view.behind_lab.copy()
    lighter[..., 0] += 10.0  # a source whose lids are lighter than the target's: left as it is
    assert np.abs(eyelid_lift(lighter, view.behind_lab, mesh, fs)[..., 0]).max() < 1e-3
