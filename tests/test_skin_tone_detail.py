"""The target's skin tint (``composite.skin_tint``) and its texture under a
softer new face (``blend.restore_detail``): known inputs, known outputs; and
on real faces, a tinted target's cheeks and a downscaled source's sharpness."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from faceweave.compositing.blend import restore_detail
from faceweave.compositing.colour import to_lab, to_rgb
from faceweave.compositing.composite import TINT_CHROMA, TINT_LIGHTNESS, skin_tint
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
    assert np.median(tint[inner][:, 1]) == pytest.approx(6.0 * TINT_CHROMA, abs=1.0)
    assert np.median(tint[inner][:, 2]) == pytest.approx(4.0 * TINT_CHROMA, abs=1.0)
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


# ------------------------------------------------------ cheek_shift, cheek_spread
def _cheek_mesh(left: tuple[int, int], right: tuple[int, int], half: int = 10) -> np.ndarray:
    """A mesh whose two cheek polygons are squares of side ``2 * half`` around ``left`` and ``right`` (x, y)."""
    from faceweave.geometry import topology as topo

    mesh = np.zeros((478, 3), np.float32)
    for polygon, (cx, cy) in ((topo.RIGHT_CHEEK, left), (topo.LEFT_CHEEK, right)):
        n = len(polygon)
        angles = np.linspace(0, 2 * np.pi, n, endpoint=False)
        mesh[polygon, 0] = cx + half * np.sign(np.cos(angles)) * np.minimum(1.0, 2 * np.abs(np.cos(angles)))
        mesh[polygon, 1] = cy + half * np.sign(np.sin(angles)) * np.minimum(1.0, 2 * np.abs(np.sin(angles)))
    return mesh


def test_cheek_shift_is_the_targets_median_over_both_cheeks_and_its_spread_fades_away_from_them():
    from faceweave.compositing.composite import cheek_shift, cheek_spread

    size, fs = 120, 100.0
    mesh = _cheek_mesh((35, 60), (85, 60))
    face = np.zeros((size, size, 3), np.float32)
    face[...] = (60.0, 10.0, 12.0)
    behind = face.copy()
    behind[:, :60] += (8.0, 2.0, -1.0)  # the target's image-left cheek is much lighter,
    behind[:, 60:] += (2.0, 0.0, 0.0)  # its image-right cheek a little
    skin = np.ones((size, size), np.float32)

    shift = cheek_shift(face, behind, skin, mesh)
    spread = cheek_spread((size, size), mesh, fs)

    assert shift is not None and shift.shape == (3,) and shift.dtype == np.float32
    assert spread.shape == (size, size) and spread.dtype == np.float32
    # one change for both cheeks (a light from one side is left to the broad
    # shading): the median over both cheeks, between the two cheeks' own
    assert 2.0 <= shift[0] <= 8.0
    assert spread[60, 35] == pytest.approx(spread[60, 85], abs=1e-4) and spread[60, 35] > 0.95
    assert spread[5, 60] * np.abs(shift).max() < 0.05  # far from both cheeks
    assert spread[60, 5] < spread[60, 35]  # fades with distance
    same = cheek_shift(face, face, skin, mesh)
    assert same is not None and np.abs(same).max() == 0.0  # the target's own cheeks: nothing to change
    assert cheek_shift(face, behind, np.zeros_like(skin), mesh) is None  # nothing to measure on


def test_cheek_shift_is_a_uniform_difference_in_full():
    from faceweave.compositing.composite import cheek_shift

    mesh = _cheek_mesh((40, 60), (80, 60))
    face = np.full((120, 120, 3), (70.0, 12.0, 15.0), np.float32)
    behind = face + np.array([-6.0, 3.0, 4.0], np.float32)

    shift = cheek_shift(face, behind, np.ones((120, 120), np.float32), mesh)

    np.testing.assert_allclose(shift, (-6.0, 3.0, 4.0), atol=0.3)


def test_cheek_shift_reads_the_target_s_colour_where_the_target_s_own_cheeks_are():
    """A new face whose cheeks sit lower than the target's (a longer source
    face) over a shaded band of the target: the colour to reach is the
    target's cheeks', not the shadow's under the new cheeks."""
    from faceweave.compositing.composite import cheek_shift

    new_mesh = _cheek_mesh((40, 80), (80, 80))
    target_mesh = _cheek_mesh((40, 50), (80, 50))
    face = np.full((120, 120, 3), (70.0, 12.0, 15.0), np.float32)
    behind = face.copy()
    behind[:35] += (5.0, 0.0, 0.0)  # the target's cheeks (rows 40-60) are 5 L* lighter than the new face ...
    behind[35:65] += (5.0, 0.0, 0.0)
    behind[65:] += (-8.0, 2.0, 3.0)  # ... and a shadow lies under where the new cheeks go
    skin = np.ones((120, 120), np.float32)

    np.testing.assert_allclose(cheek_shift(face, behind, skin, new_mesh, target_mesh=target_mesh), (5, 0, 0), atol=0.3)
    # without the target's mesh the new cheeks' place is read: the shadow
    np.testing.assert_allclose(cheek_shift(face, behind, skin, new_mesh), (-8.0, 2.0, 3.0), atol=0.3)


def test_blend_face_settles_the_cheeks_to_the_target_crop_s_own_cheeks():
    """blend_face with the target's crop: the cheeks end at the colour of
    the target's pixels under the target's mesh, even where the (reshaped)
    crop behind the new cheeks is darker."""
    from faceweave.compositing.colour import ColourMatch, SkinColour
    from faceweave.compositing.composite import blend_face
    from faceweave.compositing.values import ColourPlan
    from faceweave.swappers.base import AlignedCrop, SwapOutput

    size = 160
    new_mesh = _cheek_mesh((50, 100), (110, 100), half=12)
    target_mesh = _cheek_mesh((50, 70), (110, 70), half=12)
    target_px = np.full((size, size, 3), (210, 170, 150), np.uint8)
    behind = target_px.copy()
    behind[85:] = (170, 130, 110)  # a reshaped crop: darker where the new cheeks land
    face = np.full((size, size, 3), (180, 140, 120), np.uint8)
    mask = np.zeros((size, size), np.float32)
    mask[20:140, 20:140] = 1.0
    mask = cv2.GaussianBlur(mask, (0, 0), 3.0)
    stats = SkinColour(np.zeros(3, np.float32), np.ones(3, np.float32))
    zero = np.zeros((size // 2, size // 2, 3), np.float32)  # the plan's half-resolution grid
    plan = ColourPlan(match=ColourMatch(source=stats, target=stats), shading=zero, amount=0.0, regional=zero)
    ones = np.ones((size, size), np.float32)
    out = SwapOutput(face=face, background=behind, coverage=ones, mesh=new_mesh, changed=ones)
    crop = AlignedCrop(pixels=target_px, matrix=np.eye(2, 3, dtype=np.float64), mesh=target_mesh, face_size=120.0)

    pixels = blend_face(out, behind, mask, plan, hands=None, face_size=120.0, target=crop)

    cheek = to_lab(pixels)[96:104, 46:54].reshape(-1, 3).mean(axis=0)
    want = to_lab(target_px)[70, 50]
    assert abs(float(cheek[0] - want[0])) < 1.5
    darker = to_lab(blend_face(out, behind, mask, plan, hands=None, face_size=120.0))[96:104, 46:54]
    assert float(darker[..., 0].mean()) < float(want[0]) - 5.0  # read off the crop behind: the shadow's colour


def _darken_cheeks(pixels: np.ndarray, mesh: np.ndarray, by: float) -> np.ndarray:
    """``pixels`` with soft patches around both cheeks made ``by`` L* darker (a shadow, a blush of make-up)."""
    size = float(np.ptp(mesh[:468, 1]))
    patch = np.zeros(pixels.shape[:2], np.float32)
    for index in (50, 280):  # the middle of each cheek
        cx, cy = (int(round(v)) for v in mesh[index, :2])
        cv2.circle(patch, (cx, cy), int(0.12 * size), (1.0,), -1)
    patch = cv2.GaussianBlur(patch, (0, 0), 0.04 * size)
    lab = to_lab(pixels)
    lab[..., 0] -= by * patch
    return to_rgb(lab)


@pytest.mark.slow
@pytest.mark.parametrize("with_cheek_tone", [True, False])
def test_a_source_with_darker_cheeks_gives_the_target_s_cheeks(faces_dir, monkeypatch, with_cheek_tone):
    """A source whose cheeks are darker than the rest of its face (a shadow,
    make-up): the new face's cheeks still sit against the target's neck as
    the target's did (the judge's tone within 3 ΔE), where a face-wide
    colour match alone leaves them grey (checked by switching it off)."""
    from faceweave.compositing import composite
    from faceweave.evaluate.tone import tone_shift
    from faceweave.io.images import read_image
    from faceweave.pipeline import FaceSwapper
    from faceweave.provenance.stamp import Provenance

    if not with_cheek_tone:
        monkeypatch.setattr(composite, "cheek_shift", lambda *a, **k: None)
    source = read_image(faces_dir / "single" / "biden2.jpg").pixels
    target = read_image(faces_dir / "single" / "happy_man.png").pixels
    with FaceSwapper(provenance=Provenance.new(watermark=False)) as swapper:
        mesh = max(swapper.analyser.analyse(source), key=lambda f: f.bbox.area).mesh
        result = swapper.swap(_darken_cheeks(source, mesh, 14.0), target).image
        face = max(swapper.analyser.analyse(result), key=lambda f: f.bbox.area)
        target_face = max(swapper.analyser.analyse(target), key=lambda f: f.bbox.area)
    shift = tone_shift(result, target, target_face.mesh, face.mesh)
    assert shift is not None
    if with_cheek_tone:
        assert float(np.linalg.norm(shift)) < 3.0, shift
    else:
        assert shift[0] < -4.0, shift  # the instrument sees the grey cheeks the colour match leaves


# ---------------------------------------------------------------- sharpen_to_photo
def _identity_matrix() -> np.ndarray:
    return np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])


@pytest.mark.parametrize("face_width", [200.0, 600.0])
def test_a_face_softer_than_the_photo_s_is_sharpened_at_the_face_s_scale(face_width):
    """Detail is compared with the face scaled to 200 px wide: a 600 px face
    softened at 3 px is sharpened back to most of the photo's detail at that
    scale, and only under the mask."""
    from faceweave.compositing.blend import CANONICAL_FACE, DETAIL_GOAL, sharpen_to_photo

    scale = face_width / CANONICAL_FACE
    rng = np.random.default_rng(7)
    size = 240
    coarse = rng.normal(0, 1, (int(size / scale) + 1,) * 2).astype(np.float32)
    texture = cv2.resize(coarse, (size, size), interpolation=cv2.INTER_CUBIC) * 25.0
    photo = np.clip(128 + np.dstack([texture] * 3), 0, 255).astype(np.uint8)
    soft = cv2.GaussianBlur(photo, (0, 0), 0.5 * scale)
    mask = np.zeros((size, size), np.float32)
    mask[20:220, 20:160] = 1.0
    out = soft.copy()

    sharpen_to_photo(photo, soft, mask, _identity_matrix(), face_width=face_width, out=out)

    def energy(image: np.ndarray) -> float:
        small = cv2.resize(
            image.mean(axis=2).astype(np.float32), None, fx=1 / scale, fy=1 / scale, interpolation=cv2.INTER_AREA
        )
        lap = cv2.Laplacian(small, cv2.CV_32F, ksize=3)
        box = (slice(int(40 / scale), int(200 / scale)), slice(int(40 / scale), int(140 / scale)))
        return float(np.sqrt(np.mean(lap[box] ** 2)))

    assert energy(soft) < 0.8 * energy(photo)  # the premise: clearly softer
    assert energy(out) > energy(soft) * 1.15
    assert energy(out) > 0.75 * DETAIL_GOAL * energy(photo)
    np.testing.assert_array_equal(out[:, 175:], soft[:, 175:])  # nothing far outside the mask


def test_a_face_as_sharp_as_the_photo_is_not_sharpened():
    from faceweave.compositing.blend import sharpen_to_photo

    photo = _textured(11, size=200)
    mask = np.ones((200, 200), np.float32)
    out = photo.copy()
    sharpen_to_photo(photo, photo, mask, _identity_matrix(), face_width=300.0, out=out)
    np.testing.assert_array_equal(out, photo)


def test_lips_zone_covers_the_lips_and_a_margin_around_them():
    from faceweave.compositing.regions import lips_zone
    from faceweave.geometry import topology as topo

    mesh = np.zeros((478, 3), np.float32)
    outer = topo.lips_outer()
    angles = np.linspace(0, 2 * np.pi, len(outer), endpoint=False)
    mesh[outer, 0] = 60 + 20 * np.cos(angles)
    mesh[outer, 1] = 60 + 8 * np.sin(angles)
    zone = lips_zone((120, 120), mesh, grow=6.0, soft=2.0)
    assert zone.dtype == np.float32 and zone.shape == (120, 120)
    assert zone[60, 60] == pytest.approx(1.0) and zone[60, 83] > 0.8  # the lips and 3 px beyond the corner
    assert zone[60, 100] == 0.0 and zone[20, 60] == 0.0  # well away from them


def test_settle_cheeks_gives_the_blended_cheeks_the_target_s_colour_under_the_mask():
    """After the blend, cheeks 5 L* darker than the target's are brought back
    (measured at a quarter of the window's resolution) and nothing changes
    where the mask is 0."""
    from faceweave.compositing.composite import settle_cheeks

    size = 240
    mesh = _cheek_mesh((70, 120), (170, 120), half=20)
    target = np.full((size, size, 3), (200.0, 160.0, 140.0), np.float32)
    lab = to_lab(target.astype(np.uint8))
    lab[..., 0] -= 5.0
    blended = to_rgb(lab).astype(np.float32)
    mask = np.ones((size, size), np.float32)
    mask[:, 220:] = 0.0

    change = settle_cheeks(blended, target, mesh, mask, face_size=200.0)

    settled = to_lab(np.clip(blended + change + 0.5, 0, 255).astype(np.uint8))
    assert settled[120, 70, 0] == pytest.approx(lab[120, 70, 0] + 5.0, abs=0.7)
    assert settled[120, 170, 0] == pytest.approx(lab[120, 170, 0] + 5.0, abs=0.7)
    assert np.abs(change[:, 220:]).max() == 0.0
    same = settle_cheeks(target, target, mesh, mask, face_size=200.0)
    assert np.abs(same).max() < 0.05


def test_settle_cheeks_reads_small_cheeks_at_full_resolution():
    """Cheeks of a small face (10 px squares here) beside a dark fold: the
    medians are read at full resolution, so the fold does not darken the
    reading (at a quarter of the resolution it was mixed into the cheeks
    and the cheeks were lifted far past the target's)."""
    from faceweave.compositing.composite import settle_cheeks

    size = 120
    mesh = _cheek_mesh((40, 60), (80, 60), half=5)
    target = np.full((size, size, 3), (200.0, 160.0, 140.0), np.float32)
    lab = to_lab(target.astype(np.uint8))
    new = lab.copy()
    new[..., 0] -= 5.0
    for cx in (40, 80):  # a dark fold right around each cheek
        ring = np.zeros((size, size), bool)
        ring[52:69, cx - 8 : cx + 9] = True
        ring[55:66, cx - 5 : cx + 6] = False
        new[..., 0][ring] -= 35.0
    blended = to_rgb(new).astype(np.float32)

    change = settle_cheeks(blended, target, mesh, np.ones((size, size), np.float32), face_size=100.0)

    settled = to_lab(np.clip(blended + change + 0.5, 0, 255).astype(np.uint8))
    assert settled[60, 40, 0] == pytest.approx(lab[60, 40, 0], abs=1.0)
    assert settled[60, 80, 0] == pytest.approx(lab[60, 80, 0], abs=1.0)


def test_sclera_tone_brightens_grey_whites_to_the_target_s_and_leaves_the_iris():
    from faceweave.compositing.composite import SCLERA_MAX_CHANGE, sclera_tone
    from faceweave.geometry import topology as topo

    size = 120
    mesh = np.zeros((478, 3), np.float32)
    for (loop, (outer, inner), (upper, lower)), cx in zip(topo.eyes(), (35, 85), strict=True):
        angles = np.linspace(0, 2 * np.pi, len(loop), endpoint=False)
        mesh[loop, 0] = cx + 18 * np.cos(angles)
        mesh[loop, 1] = 60 + 8 * np.sin(angles)
        mesh[[outer, inner], :2] = [(cx - 18, 60), (cx + 18, 60)]
        mesh[[upper, lower], :2] = [(cx, 52), (cx, 68)]
    face = np.full((size, size, 3), (65.0, 12.0, 14.0), np.float32)  # skin around
    behind = face.copy()
    for cx in (35, 85):
        face[52:69, cx - 17 : cx + 18] = (62.0, 0.0, 2.0)  # grey whites
        behind[52:69, cx - 17 : cx + 18] = (78.0, 1.0, 3.0)  # the target's, lit
        cv2.circle(face, (cx, 60), 6, (25.0, -3.0, -10.0), -1)  # the source's blue iris
        cv2.circle(behind, (cx, 60), 6, (30.0, 5.0, 15.0), -1)  # the target's brown one

    offset = sclera_tone(face, behind, mesh)

    assert offset.dtype == np.float32 and offset.shape == (size, size, 3)
    assert offset[60, 35 - 12, 0] == pytest.approx(16.0, abs=0.5)  # a white: as bright as the target's
    assert offset[60, 85 + 12, 0] == pytest.approx(16.0, abs=0.5)
    assert abs(offset[60, 35, 0]) < 0.5  # the iris keeps its own lightness
    assert np.abs(offset[..., 1:]).max() == 0.0  # and every colour its tint
    assert np.abs(offset[20, 60]).max() == 0.0  # nothing outside the eyes
    behind[52:69] += (30.0, 0.0, 0.0)
    assert sclera_tone(face, behind, mesh)[60, 35 - 12, 0] <= SCLERA_MAX_CHANGE  # limited
    closed = mesh.copy()
    closed[:, 1] = 60.0  # lids shut: no opening to look at
    assert np.abs(sclera_tone(face, behind, closed)).max() == 0.0


# ---------------------------------------------------------------- refine_photo_face
@pytest.mark.parametrize("offset", [(0.0, 0.0), (37.5, 21.25)])
def test_refine_photo_face_does_what_the_three_detail_steps_do_in_turn(offset):
    """One pass over one window gives what match_detail, restore_detail and
    sharpen_to_photo give one after the other inside the bare skin's box, but
    for the rounding between them (a level or two here and there); beyond
    that box the rest of the face is sharpened too, where the single steps
    stop at a straight edge; nothing outside the masks' footprint moves."""
    from faceweave.compositing.blend import match_detail, refine_photo_face, restore_detail, sharpen_to_photo

    photo = np.zeros((360, 400, 3), np.uint8)
    photo[...] = 128
    photo[40:320, 60:340] = _textured(5, size=280)
    soft = cv2.GaussianBlur(photo, (0, 0), 1.6)
    detail = np.zeros((240, 240), np.float32)
    detail[50:190, 60:180] = 1.0
    face = np.zeros((240, 240), np.float32)
    face[30:210, 40:200] = 1.0
    detail, face = cv2.GaussianBlur(detail, (0, 0), 4.0), cv2.GaussianBlur(face, (0, 0), 4.0)
    matrix = np.array([[1.0, 0.0, -offset[0]], [0.0, 1.0, -offset[1]]])  # frame -> crop
    ox, oy = int(offset[0]), int(offset[1])

    steps = soft.copy()
    match_detail(photo, steps, detail, matrix, out=steps, blur_mask=face, sharpen=True)
    restore_detail(photo, steps, detail, matrix, sigma=2.0, out=steps)
    sharpen_to_photo(photo, steps, face, matrix, face_width=150.0, out=steps)
    fused = refine_photo_face(photo, soft, detail, face, matrix, face_width=150.0, texture_sigma=2.0, out=soft.copy())

    assert not np.array_equal(steps, soft)  # the premise: the steps change this soft face
    inner = (slice(oy + 60, oy + 180), slice(ox + 70, ox + 170))  # well inside the bare skin's box
    diff = np.abs(fused[inner].astype(int) - steps[inner].astype(int))
    assert diff.max() <= 3 and diff.mean() < 0.6

    def energy(image: np.ndarray, region: tuple[slice, slice]) -> float:
        return float(np.mean(cv2.Laplacian(image.mean(axis=2).astype(np.float32), cv2.CV_32F)[region] ** 2))

    ring = (slice(oy + 36, oy + 44), slice(ox + 70, ox + 170))  # face, above the bare skin's box
    assert energy(fused, ring) > 1.3 * energy(soft, ring)
    np.testing.assert_array_equal(fused[: oy + 20], soft[: oy + 20])  # above the masks' footprint
    np.testing.assert_array_equal(fused[:, ox + 225 :], soft[:, ox + 225 :])


def test_refine_photo_face_leaves_a_frame_alone_when_the_masks_miss_it():
    from faceweave.compositing.blend import refine_photo_face

    photo = _textured(3)
    frame = photo.copy()
    mask = np.ones((100, 100), np.float32)
    far = np.array([[1.0, 0.0, 500.0], [0.0, 1.0, 500.0]])  # the crop lies far outside the frame
    out = refine_photo_face(photo, frame, mask, mask, far, face_width=100.0, texture_sigma=None, out=frame)
    assert out is frame and np.array_equal(frame, photo)


def test_the_shaded_face_worked_out_in_boxes_is_the_whole_picture_s_and_gives_the_same_sclera_tone():
    """colour_plan hands sclera_tone the shaded new face as a ShadedLab,
    worked out only in the boxes it reads: element by element the values of
    the whole picture (mapped, tinted, shaded), so the same whites."""
    from faceweave.compositing.colour import ColourMatch, SkinColour
    from faceweave.compositing.composite import ShadedLab, colour_map, sclera_tone
    from faceweave.geometry import topology as topo

    rng = np.random.default_rng(5)
    size = 120
    grid = (size, size)
    lab = np.dstack([rng.uniform(20, 90, grid), rng.normal(8, 6, grid), rng.normal(12, 6, grid)]).astype(np.float32)
    tint, shading = rng.normal(0, 2, (2, size, size, 3)).astype(np.float32)
    colour = ColourMatch(
        source=SkinColour(np.float32([60, 10, 14]), np.float32([9, 3, 4])),
        target=SkinColour(np.float32([55, 14, 18]), np.float32([8, 4, 5])),
    )
    mapping = colour_map(colour, 0.8)
    whole = mapping.apply(lab) + tint + 0.6 * shading
    lazy = ShadedLab(lab=lab, mapping=mapping, tint=tint, amount=0.6, shading=shading)
    assert lazy.shape == whole.shape
    for box in [(slice(3, 40), slice(10, 90)), (slice(0, size), slice(0, size)), (slice(70, 71), slice(5, 6))]:
        np.testing.assert_array_equal(lazy[box], whole[box])
    mesh = np.zeros((478, 3), np.float32)
    for (loop, (outer, inner), (upper, lower)), cx in zip(topo.eyes(), (35, 85), strict=True):
        angles = np.linspace(0, 2 * np.pi, len(loop), endpoint=False)
        mesh[loop, 0], mesh[loop, 1] = cx + 18 * np.cos(angles), 60 + 8 * np.sin(angles)
        mesh[[outer, inner], :2] = [(cx - 18, 60), (cx + 18, 60)]
        mesh[[upper, lower], :2] = [(cx, 52), (cx, 68)]
    behind = lab + np.float32([6.0, 0.0, 0.0])
    want = sclera_tone(whole, behind, mesh)
    assert np.abs(want).max() > 0.0
    np.testing.assert_array_equal(sclera_tone(lazy, behind, mesh), want)
