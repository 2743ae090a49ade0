"""Contract tests of the evaluation engine: metrics on synthetic arrays whose
expected values follow by hand, masks on a real face mesh, pair building,
the contact sheet, and the runner with a fake swapper."""

from __future__ import annotations

import json
import random
from pathlib import Path

import cv2
import numpy as np
import pytest

from faceweave.errors import InputError, NoFaceError, UnreadableFileError
from faceweave.evaluate import metrics as M
from faceweave.evaluate import regions as R
from faceweave.evaluate.pairs import (
    Photo,
    build_pairs,
    eligible_sources,
    other_photos,
    parse_identities,
    parse_independent,
    read_identities,
)
from faceweave.evaluate.sheet import SheetRow, contact_sheet, face_thumbnail, label_strip
from faceweave.geometry import topology as topo
from faceweave.types import BBox, Face, Pose, SwappedFace, SwapResult

FACES_DIR = Path(__file__).resolve().parents[1].parent / "shared/data/faces"
SKIN = (200, 150, 125)


# ------------------------------------------------------------------ helpers


def uniform(color, shape=(120, 120)) -> np.ndarray:
    return np.full((*shape, 3), color, np.uint8)


def textured(seed: int = 0, shape=(200, 200), color=SKIN, std: float = 12.0) -> np.ndarray:
    """Skin-coloured image with smooth grey noise (a stand-in for skin texture)."""
    rng = np.random.default_rng(seed)
    noise = cv2.GaussianBlur(rng.normal(0, std, shape).astype(np.float32), (0, 0), 1.5)[..., None]
    return np.clip(np.array(color, np.float32) + noise, 0, 255).astype(np.uint8)


def square(shape, y1, y2, x1, x2) -> np.ndarray:
    m = np.zeros(shape[:2], bool)
    m[y1:y2, x1:x2] = True
    return m


def lab_distance(rgb_a, rgb_b) -> float:
    return float(M.delta_e(M.rgb_to_lab(np.array(rgb_a, np.uint8)), M.rgb_to_lab(np.array(rgb_b, np.uint8))))


def synthetic_mesh(**points) -> np.ndarray:
    """(478, 3) mesh, all zero except the named landmarks (index -> (x, y))."""
    mesh = np.zeros((478, 3), np.float32)
    for key, (x, y) in points.items():
        mesh[int(key.lstrip("p"))] = (x, y, 0.0)
    return mesh


BASE_MESH = synthetic_mesh(
    p468=(10, 0),
    p473=(90, 0),  # iris centres (not what the ratios divide by)
    p33=(0, 0),
    p263=(100, 0),  # outer eye corners: eye distance 100
    p13=(50, 50),
    p14=(50, 70),  # mouth opening 20
    p61=(10, 60),
    p291=(90, 60),  # mouth width 80
    p159=(20, -5),
    p145=(20, 5),
    p386=(80, -6),
    p374=(80, 6),  # lids 10 and 12
)


@pytest.fixture(scope="module")
def astro_face(astronaut) -> Face:
    """The astronaut's face from mediapipe's refined face mesh, run directly."""
    import mediapipe as mp

    h, w = astronaut.shape[:2]
    with mp.solutions.face_mesh.FaceMesh(static_image_mode=True, refine_landmarks=True, max_num_faces=1) as fm:
        found = fm.process(np.ascontiguousarray(astronaut))
    assert found.multi_face_landmarks, "mediapipe found no face in skimage's astronaut"
    mesh = np.array([[p.x * w, p.y * h, p.z * w] for p in found.multi_face_landmarks[0].landmark], np.float32)
    x1, y1 = mesh[:, :2].min(axis=0)
    x2, y2 = mesh[:, :2].max(axis=0)
    return Face(bbox=BBox(float(x1), float(y1), float(x2), float(y2)), score=1.0, mesh=mesh, pose=Pose(0.0, 0.0, 0.0))


# ---------------------------------------------------------------- colour


@pytest.mark.parametrize(
    "rgb, lab",
    [((255, 255, 255), (100.0, 0.0, 0.0)), ((0, 0, 0), (0.0, 0.0, 0.0)), ((128, 128, 128), (53.6, 0.0, 0.0))],
)
def test_rgb_to_lab_known_colours(rgb, lab):
    np.testing.assert_allclose(M.rgb_to_lab(np.array(rgb, np.uint8)), lab, atol=0.1)


def test_delta_e_is_euclidean_in_lab():
    assert M.delta_e(np.array([50.0, 0, 0]), np.array([53.0, 4.0, 0])) == pytest.approx(5.0)
    assert M.delta_e(np.zeros((4, 3)), np.ones((4, 3))).shape == (4,)


# ------------------------------------------------------------------ psnr


@pytest.mark.parametrize(
    "offset, expected",
    [(0, 99.0), (10, 10 * np.log10(255**2 / 100)), (1, 10 * np.log10(255**2))],
)
def test_psnr_of_a_constant_offset(offset, expected):
    a = uniform((100, 100, 100))
    assert M.psnr(a, a + np.uint8(offset)) == pytest.approx(expected)


def test_psnr_counts_only_masked_pixels():
    a = uniform((100, 100, 100))
    b = a.copy()
    b[:60] = 0  # changed, but outside the mask
    outside = square(a.shape, 60, 120, 0, 120)
    assert M.psnr(a, b, outside) == 99.0
    assert M.psnr(a, b) < 20.0
    assert M.psnr(a, b, np.zeros(a.shape[:2], bool)) is None


def test_psnr_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="differ in shape"):
        M.psnr(uniform(0, (10, 10)), uniform(0, (10, 12)))


# ---------------------------------------------------------- pose, expression


@pytest.mark.parametrize(
    "a, b, expected",
    [
        (Pose(0, 0, 0), Pose(0, 0, 0), 0.0),
        (Pose(10, -5, 2), Pose(12, -5, 2), 2.0),
        (Pose(10, -5, 2), Pose(9, 0, 3), 5.0),
        (Pose(-30, 0, 0), Pose(30, 0, -1), 60.0),
    ],
)
def test_pose_error_is_the_largest_angle_difference(a, b, expected):
    assert M.pose_error(a, b) == pytest.approx(expected)


def test_expression_ratios_divide_by_the_outer_eye_corner_distance():
    r = M.expression_ratios(BASE_MESH)
    assert r.mouth_open == pytest.approx(0.20)
    assert r.mouth_width == pytest.approx(0.80)
    assert r.eye_open == pytest.approx(0.11)  # mean of 10 and 12, over 100


def test_expression_ratios_do_not_depend_on_scale_or_position():
    moved = BASE_MESH * 2.5 + np.array([300.0, 40.0, 0.0], np.float32)
    assert M.expression_ratios(moved).as_tuple() == pytest.approx(M.expression_ratios(BASE_MESH).as_tuple())


@pytest.mark.parametrize(
    "landmark, xy, part, expected",
    [
        (14, (50, 75), "mouth_open", 0.05),  # mouth opens 5 px more
        (291, (92, 60), "mouth_width", 0.02),  # mouth 2 px wider
        (145, (20, 9), "eye_open", 0.02),  # one eye 4 px more open: mean +2 px
        (1, (500, 500), "mouth_open", 0.0),  # a landmark not measured
    ],
)
def test_expression_error_is_the_largest_ratio_difference(landmark, xy, part, expected):
    changed = BASE_MESH.copy()
    changed[landmark, :2] = xy
    assert M.expression_error(changed, BASE_MESH) == pytest.approx(expected)
    parts = M.expression_differences(changed, BASE_MESH)
    assert getattr(parts, part) == pytest.approx(expected)
    assert sum(parts.as_tuple()) == pytest.approx(expected)


def test_expression_ratios_need_distinct_outer_eye_corners():
    with pytest.raises(ValueError, match="eye corners"):
        M.expression_ratios(np.zeros((478, 3), np.float32))


# --------------------------------------------------------------- identity


def test_embedding_distance_and_mean():
    a, b = np.zeros(128, np.float32), np.zeros(128, np.float32)
    b[:2] = (3.0, 4.0)
    assert M.embedding_distance(a, b) == pytest.approx(5.0)
    np.testing.assert_allclose(M.mean_embedding([a, b])[:2], (1.5, 2.0))
    assert M.mean_embedding([]) is None


@pytest.mark.parametrize(
    "query, expected",
    [((0.1, 0.0), "ann"), ((0.9, 0.0), "bob"), ((0.5, 0.0), "ann"), ((0.5, 5.0), "ann")],  # a tie goes to 'ann'
)
def test_nearest_identity(query, expected):
    def vec(x, y):
        v = np.zeros(128, np.float32)
        v[:2] = (x, y)
        return v

    assert M.nearest_identity(vec(*query), {"bob": vec(1, 0), "ann": vec(0, 0)}) == expected
    assert M.nearest_identity(vec(*query), {}) is None


# ---------------------------------------------------------------- blotch


INNER = square((120, 120), 30, 90, 30, 90)


@pytest.mark.parametrize("side, expected", [(0, 0.0), (6, 36 / 3600), (10, 100 / 3600)])
def test_blotch_fraction_counts_odd_coloured_pixels(side, expected):
    img = uniform(SKIN)
    img[40 : 40 + side, 40 : 40 + side] = (120, 170, 120)  # greenish patch, far from skin in Lab
    assert lab_distance((120, 170, 120), SKIN) > 40
    got = M.blotch_fraction(img, INNER, sigma=6.0)
    assert got == pytest.approx(expected, abs=1e-9)


def test_blotch_fraction_ignores_colours_outside_the_mask():
    img = uniform(SKIN)
    img[~INNER] = (20, 20, 20)  # dark hair all around the face
    assert M.blotch_fraction(img, INNER, sigma=6.0) == 0.0


def test_blotch_excess_is_relative_to_the_target():
    clean = uniform(SKIN)
    spotted = clean.copy()
    spotted[40:50, 40:50] = (120, 170, 120)
    kw = dict(result_mask=INNER, target_mask=INNER, sigma=6.0)
    assert M.blotch_excess(spotted, clean, **kw) == pytest.approx(100 / 3600)
    assert M.blotch_excess(clean, spotted, **kw) == 0.0  # removing the target's own patch is no error
    assert M.blotch_excess(spotted, spotted, **kw) == 0.0


# ------------------------------------------------------------------ seam


def test_seam_ratio_of_identical_images_is_one():
    t = textured()
    border = R.seam_border(t, t)
    assert not border.any()
    assert M.seam_ratio(t, t, border) == 1.0


@pytest.mark.parametrize("shift", [(40, 40, 40), (-35, -35, -35), (40, -20, -20)])  # the last keeps brightness
def test_seam_ratio_sees_a_hard_edged_patch(shift):
    target = textured()
    result = target.copy()
    result[60:140, 60:140] = np.clip(target[60:140, 60:140].astype(int) + shift, 0, 255)
    border = R.seam_border(result, target)
    assert border.any()
    assert M.seam_ratio(result, target, border) > 1.5


def test_seam_ratio_is_lower_for_a_feathered_patch():
    target = textured()
    alpha = cv2.GaussianBlur(square(target.shape, 60, 140, 60, 140).astype(np.float32), (0, 0), 12)[..., None]
    shift = np.array([20, 20, 20], np.float32)
    soft = np.clip(target + alpha * shift, 0, 255).astype(np.uint8)
    hard = target.copy()
    hard[60:140, 60:140] = np.clip(target[60:140, 60:140] + shift, 0, 255).astype(np.uint8)
    soft_ratio = M.seam_ratio(soft, target, R.seam_border(soft, target))
    hard_ratio = M.seam_ratio(hard, target, R.seam_border(hard, target))
    assert soft_ratio < 1.25 < hard_ratio


def test_seam_ratio_stays_finite_on_a_flat_target():
    target = uniform(SKIN, (100, 100))
    result = target.copy()
    result[30:70, 30:70] = (230, 180, 150)
    ratio = M.seam_ratio(result, target, R.seam_border(result, target))
    assert np.isfinite(ratio) and ratio > 1.5


# ------------------------------------------------------------- sharpness


def test_sharpness_ratio_of_identical_images_is_one():
    t = textured()
    m = np.ones(t.shape[:2], bool)
    assert M.sharpness_ratio(t, t, result_mask=m, target_mask=m) == pytest.approx(1.0)


@pytest.mark.parametrize("sigma", [0.8, 1.5, 3.0])
def test_sharpness_ratio_of_a_blurred_face_is_below_one(sigma):
    t = textured()
    blurred = cv2.GaussianBlur(t, (0, 0), sigma)
    m = np.ones(t.shape[:2], bool)
    assert M.sharpness_ratio(blurred, t, result_mask=m, target_mask=m) < 0.8


def test_sharpness_ratio_of_a_sharpened_face_is_above_one():
    t = textured()
    sharp = np.clip(2.0 * t.astype(np.float32) - cv2.GaussianBlur(t, (0, 0), 1.0), 0, 255).astype(np.uint8)
    m = np.ones(t.shape[:2], bool)
    assert M.sharpness_ratio(sharp, t, result_mask=m, target_mask=m) > 1.2


def test_high_frequency_energy_of_a_flat_image_is_zero():
    assert M.high_frequency_energy(uniform(SKIN), INNER) == 0.0
    assert M.high_frequency_energy(uniform(SKIN), np.zeros(INNER.shape, bool)) is None


def test_metrics_check_mask_shapes():
    with pytest.raises(ValueError, match="expected bool"):
        M.high_frequency_energy(uniform(SKIN), np.ones((5, 5), bool))


# ------------------------------------------------------- generic regions


def test_changed_mask_and_largest_component():
    target = uniform((100, 100, 100), (100, 100))
    result = target.copy()
    assert not R.changed_mask(result, target).any()
    result[10:50, 10:50] = 160  # big patch, with an unchanged hole inside
    result[25:35, 25:35] = 100
    result[80:85, 80:85] = 160  # small patch
    changed = R.changed_mask(result, target)
    assert changed[12, 12] and changed[82, 82] and not changed[30, 30]
    big = R.largest_component(changed)
    assert big[30, 30] and big[12, 12] and not big[82, 82]  # hole filled, small blob dropped
    assert not R.largest_component(np.zeros((5, 5), bool)).any()


def test_region_border_is_a_thin_band_and_can_be_restricted():
    m = square((60, 60), 20, 40, 20, 40)
    border = R.region_border(m)
    assert border[20, 30] and border[19, 30] and not border[30, 30] and not border[5, 5]
    assert border.sum() == 4 * 22 - 4 + 4 * 20 - 4  # one ring outside, one inside
    left = square((60, 60), 0, 60, 0, 30)
    assert not (R.region_border(m, within=left) & ~left).any()
    whole = np.ones((60, 60), bool)
    assert not R.region_border(whole).any()  # the image edge is no border


@pytest.mark.parametrize("radius, expected", [(0, 1), (1, 5), (2, 13), (3, 29)])
def test_dilate_grows_a_point_into_a_disk(radius, expected):
    point = np.zeros((21, 21), bool)
    point[10, 10] = True
    assert R.dilate(point, radius).sum() == expected  # lattice points within the radius
    assert not R.dilate(np.zeros((5, 5), bool), 3).any()


@pytest.mark.parametrize("radius, side", [(0, 11), (1, 9), (2.5, 7), (3, 5)])
def test_erode_shrinks_a_square_and_treats_the_image_edge_as_outside(radius, side):
    m = square((30, 30), 10, 21, 10, 21)
    assert R.erode(m, radius).sum() == side * side
    full = np.ones((11, 11), bool)
    assert R.erode(full, radius).sum() == side * side


def test_box_masks():
    box = BBox(40, 40, 60, 60)
    inside = R.box_mask((100, 100), box, scale=2.0)
    assert inside.sum() == 40 * 40 and inside[30, 30] and not inside[29, 29]
    outside = R.outside_box_mask((100, 100), box, scale=1.0)
    assert outside.sum() == 100 * 100 - 20 * 20
    assert R.outside_box_mask((100, 100), BBox(0, 0, 100, 100), scale=3.0).sum() == 0


# -------------------------------------------------------- mesh regions


def test_inner_skin_lies_inside_the_oval_and_avoids_the_features(astro_face, astronaut):
    shape = astronaut.shape
    oval = R.face_oval_mask(astro_face, shape)
    inner = R.inner_skin_mask(astro_face, shape)
    assert inner.sum() > 0.25 * oval.sum() and not (inner & ~oval).any()

    def at(i: int) -> bool:
        x, y = np.round(astro_face.points2d[i]).astype(int)
        return bool(inner[y, x])

    features = [
        468,
        473,
        topo.UPPER_LIP_INNER,
        topo.MOUTH_CORNER_RIGHT,
        topo.MOUTH_CORNER_LEFT,
        topo.NOSE_TIP,
        int(topo.right_eyebrow()[0]),
        int(topo.left_eyebrow()[0]),
    ]
    assert not any(at(i) for i in features)
    assert at(151) and at(50) and at(280)  # forehead, both cheeks


def test_blotch_and_sharpness_on_a_real_face(astro_face, astronaut):
    inner = R.inner_skin_mask(astro_face, astronaut.shape)
    sigma = 0.1 * astro_face.size
    kw = dict(result_mask=inner, target_mask=inner)
    assert M.blotch_excess(astronaut, astronaut, sigma=sigma, **kw) == 0.0
    spotted = astronaut.copy()
    cx, cy = np.round(astro_face.points2d[50]).astype(int)  # on the right cheek
    spotted[cy - 4 : cy + 4, cx - 4 : cx + 4] = (120, 170, 120)
    assert inner[cy - 4 : cy + 4, cx - 4 : cx + 4].all()
    # the 8x8 patch, and a few neighbours that it pushes over the threshold
    assert M.blotch_excess(spotted, astronaut, sigma=sigma, **kw) == pytest.approx(64 / inner.sum(), rel=0.25)
    blurred = cv2.GaussianBlur(astronaut, (0, 0), 2.0)
    assert M.sharpness_ratio(blurred, astronaut, **kw) < 0.7
    assert M.sharpness_ratio(astronaut, astronaut, **kw) == pytest.approx(1.0)


# ------------------------------------------------------------------ pairs


@pytest.mark.parametrize(
    "value, expected",
    [
        ("yes", (True, "")),
        (" Yes ", (True, "")),
        ("no (mirrored copy of df_img11)", (False, "mirrored copy of df_img11")),
        ("no", (False, "")),
        ("maybe", InputError),
        ("", InputError),
    ],
)
def test_parse_independent(value, expected):
    if isinstance(expected, type):
        with pytest.raises(expected):
            parse_independent(value)
    else:
        assert parse_independent(value) == expected


@pytest.mark.parametrize(
    "text, message",
    [
        ("file,identity\na.jpg,ann\n", "missing column"),
        ("file,identity,independent_photo\na.jpg,ann,perhaps\n", "yes' or 'no"),
        ("file,identity,independent_photo\na.jpg,ann,yes\na.jpg,bob,yes\n", "listed twice"),
        ("file,identity,independent_photo\n,ann,yes\n", "empty"),
    ],
)
def test_parse_identities_rejects_bad_tables(text, message):
    with pytest.raises(InputError, match=message):
        parse_identities(text.splitlines())


def test_read_identities_of_a_missing_file(tmp_path):
    with pytest.raises(UnreadableFileError):
        read_identities(tmp_path / "identities.csv")


def make_photos() -> list[Photo]:
    """ann: 3 photos (+1 mirrored copy), bob: 2, cid: 2, dee: 1, eve: 1 not independent."""
    rows = [("ann", 3), ("bob", 2), ("cid", 2), ("dee", 1)]
    photos = [Photo(f"{who}/{i}.jpg", who, True) for who, n in rows for i in range(n)]
    photos.append(Photo("ann/0_mirror.jpg", "ann", False, "mirrored copy"))
    photos.append(Photo("eve/0.jpg", "eve", False, "crop of ann/0"))
    return photos


@pytest.mark.parametrize("count", [1, 5, 12, 30])
def test_build_pairs_rules(count):
    photos = make_photos()
    pairs = build_pairs(photos, count=count, seed=3)
    assert len(pairs) == count
    assert [p.index for p in pairs] == list(range(count))
    assert len({(p.source.file, p.target.file) for p in pairs}) == count  # no pair twice
    for p in pairs:
        assert p.source.identity != p.target.identity
        assert p.source.independent and p.target.independent
        assert p.source.identity in {"ann", "bob", "cid"}  # dee has no second photo
        assert other_photos(photos, p.source.identity, exclude={p.source.file})


def test_build_pairs_is_deterministic_and_order_free():
    photos = make_photos()
    shuffled = list(photos)
    random.Random(1).shuffle(shuffled)
    a = build_pairs(photos, count=10, seed=7)
    assert a == build_pairs(photos, count=10, seed=7) == build_pairs(shuffled, count=10, seed=7)
    seeds = {tuple((p.source.file, p.target.file) for p in build_pairs(photos, count=10, seed=s)) for s in range(5)}
    assert len(seeds) > 1


def test_build_pairs_spreads_over_identities():
    pairs = build_pairs(make_photos(), count=6, seed=0)
    sources = [p.source.identity for p in pairs]
    targets = [p.target.identity for p in pairs]
    assert sorted(sources) == ["ann", "ann", "bob", "bob", "cid", "cid"]
    assert len(set(targets)) == 4


def test_build_pairs_stops_at_the_distinct_candidates():
    # sources: 7 photos of ann/bob/cid; targets: 8 photos -> 7*8 minus same-person pairs
    expected = 3 * 5 + 2 * 6 + 2 * 6
    assert len(build_pairs(make_photos(), count=1000, seed=0)) == expected


@pytest.mark.parametrize(
    "photos, count, message",
    [
        ([Photo("a.jpg", "ann", True), Photo("b.jpg", "bob", True)], 3, "no swap pair"),
        ([Photo("a.jpg", "ann", True), Photo("a2.jpg", "ann", True)], 3, "no swap pair"),
        (make_photos(), 0, "pairs must be"),
    ],
)
def test_build_pairs_errors(photos, count, message):
    with pytest.raises(InputError, match=message):
        build_pairs(photos, count=count)


def test_other_photos_leave_out_the_pair_and_dependent_copies():
    photos = make_photos()
    files = [p.file for p in other_photos(photos, "ann", exclude={"ann/0.jpg"})]
    assert files == ["ann/1.jpg", "ann/2.jpg"]
    assert [p.file for p in eligible_sources(photos) if p.identity == "dee"] == []


def test_pairs_from_the_shared_identities_csv():
    csv_path = FACES_DIR / "identities.csv"
    if not csv_path.is_file():
        pytest.skip(f"shared test data not found at {csv_path}")
    photos = read_identities(csv_path)
    assert all((FACES_DIR / p.file).is_file() for p in photos)
    pairs = build_pairs(photos, count=30, seed=0)
    assert len(pairs) == 30
    assert len({p.source.identity for p in pairs}) >= 8
    assert len({p.target.identity for p in pairs}) >= 10
    assert all(p.source.identity != p.target.identity for p in pairs)


# ------------------------------------------------------------------ sheet


JUDGE_PAIRS = {"meta": {}, "pairs": [{"pair": 0, "source": "bob/1.jpg", "target": "ann/2.jpg", "status": "ok"}]}


@pytest.mark.parametrize(
    "document, expected",
    [
        (JUDGE_PAIRS, [("bob/1.jpg", "ann/2.jpg")]),
        (
            {"pairs": [{"source": "ann/1.jpg", "target": "cid/1.jpg"}, {"source": "cid/1.jpg", "target": "dee/0.jpg"}]},
            [("ann/1.jpg", "cid/1.jpg"), ("cid/1.jpg", "dee/0.jpg")],
        ),
        ({"pairs": []}, "non-empty list"),
        ([1, 2], "non-empty list"),
        ({"pairs": [{"source": "ann/1.jpg"}]}, "pair 0 has no source and target"),
        ({"pairs": [{"source": "ann/1.jpg", "target": "xyz/9.jpg"}]}, "xyz/9.jpg is not listed"),
        ({"pairs": [{"source": "ann/1.jpg", "target": "ann/2.jpg"}]}, "with themselves"),
    ],
)
def test_parse_pair_list(document, expected):
    from faceweave.evaluate.pairs import parse_pair_list

    photos = make_photos()
    if isinstance(expected, str):
        with pytest.raises(InputError, match=expected):
            parse_pair_list(document, photos, origin="results.json")
        return
    pairs = parse_pair_list(document, photos, origin="results.json")
    assert [(p.source.file, p.target.file) for p in pairs] == expected
    assert [p.index for p in pairs] == list(range(len(expected)))


def test_read_pair_list_of_a_bad_file(tmp_path):
    from faceweave.evaluate.pairs import read_pair_list

    (tmp_path / "bad.json").write_text("{not json")
    for path, message in ((tmp_path / "bad.json", "not JSON"), (tmp_path / "none.json", "cannot read")):
        with pytest.raises(UnreadableFileError, match=message):
            read_pair_list(path, make_photos())


def test_face_thumbnail_centres_the_face_and_pads():
    img = uniform((0, 0, 255), (200, 300))
    img[90:110, 140:160] = (255, 0, 0)
    thumb = face_thumbnail(img, BBox(140, 90, 160, 110), scale=2.0, size=64)
    assert thumb.shape == (64, 64, 3)
    assert tuple(thumb[32, 32]) == (255, 0, 0) and tuple(thumb[2, 2]) == (0, 0, 255)
    corner = face_thumbnail(img, BBox(0, 0, 20, 20), scale=2.0, size=64)
    assert tuple(corner[2, 2]) != (0, 0, 255)  # outside the picture: background
    whole = face_thumbnail(img, None, size=64)
    assert whole.shape == (64, 64, 3)


def test_contact_sheet_layout():
    tile = uniform((10, 200, 10), (32, 32))
    rows = [
        SheetRow(tiles=(tile, tile, tile), lines=("#0 ann -> bob", "id 0.41 ret ok")),
        SheetRow(tiles=(tile, tile), lines=("#1 failed \u2717",)),
    ]  # non-ASCII is replaced
    sheet = contact_sheet(rows, header=("source | target | result",), gap=4)
    strip2 = label_strip(["a", "b"], 104).shape[0]
    strip1 = label_strip(["a"], 104).shape[0]
    assert sheet.shape == (strip1 + (32 + strip2 + 4) + (32 + strip1 + 4), 3 * 32 + 2 * 4, 3)
    with pytest.raises(ValueError):
        contact_sheet([])


# ----------------------------------------------------------------- runner


class FakeAnalyser:
    """Finds the astronaut face wherever the picture is astronaut-like; the
    embedding is the picture's tint (mean colour of its top-left corner)."""

    def __init__(self, face: Face) -> None:
        self.face = face

    def analyse(self, pixels: np.ndarray, *, embeddings: bool = False) -> list[Face]:
        if pixels[:8, :8].mean() < 5:  # a black picture has no face
            return []
        emb = None
        if embeddings:
            emb = np.zeros(128, np.float32)
            emb[:3] = pixels[:16, :16].reshape(-1, 3).mean(axis=0) / 255.0
        return [Face(bbox=self.face.bbox, score=1.0, mesh=self.face.mesh, pose=self.face.pose, embedding=emb)]


class FakeSwapper:
    """Returns the target unchanged (a swapper that does nothing)."""

    def __init__(self, face: Face, *, fail_on: str | None = None) -> None:
        self.analyser = FakeAnalyser(face)
        self.fail_on = fail_on
        self.calls = 0

    def swap(self, sources, target) -> SwapResult:
        self.calls += 1
        if self.fail_on and any(self.fail_on in (s.path or "") for s in sources):
            raise NoFaceError("no face in the source", role="source", path=sources[0].path)
        faces = tuple(self.analyser.analyse(target.pixels))
        swapped = tuple(
            SwappedFace(target_index=0, bbox=f.bbox, source_index=0, source_path=None, pose_gap=0.0) for f in faces
        )
        return SwapResult(image=np.array(target.pixels), alpha=None, faces=faces, swapped=swapped)


@pytest.fixture()
def tiny_dataset(tmp_path, astronaut) -> Path:
    """Astronaut copies tinted per person: ann 3 photos, bob 2, cid 2, and one black picture (no face)."""
    data = tmp_path / "faces"
    lines = ["file,identity,independent_photo"]
    tints = {"ann": (30, 0, 0), "bob": (0, 30, 0), "cid": (0, 0, 30)}
    counts = {"ann": 3, "bob": 2, "cid": 2}
    for who, n in counts.items():
        (data / who).mkdir(parents=True)
        for i in range(n):
            img = np.clip(astronaut.astype(int) + tints[who] + np.array([i, i, i]), 0, 255).astype(np.uint8)
            cv2.imwrite(str(data / who / f"{i}.png"), cv2.cvtColor(img, cv2.COLOR_RGB2BGR))
            lines.append(f"{who}/{i}.png,{who},yes")
    cv2.imwrite(str(data / "ann" / "dark.png"), np.zeros((64, 64, 3), np.uint8))
    lines.append("ann/dark.png,ann,no (underexposed copy)")
    (data / "identities.csv").write_text("\n".join(lines) + "\n")
    return data


def test_evaluate_folder_writes_the_report(tiny_dataset, tmp_path, astro_face):
    from faceweave.evaluate import evaluate_folder, format_summary

    out = tmp_path / "report"
    seen: list[tuple[int, int]] = []
    swapper = FakeSwapper(astro_face)
    report = evaluate_folder(
        tiny_dataset, out, swapper=swapper, pairs=4, seed=0, progress=lambda done, total: seen.append((done, total))
    )
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)] and swapper.calls == 4
    assert {p.name for p in out.iterdir()} == {"report.json", "summary.txt", "contact_sheet.png", "results"}
    assert not list(out.glob(".*"))  # no temporary file left
    data = json.loads((out / "report.json").read_text())
    assert data["options"]["pairs"] == 4 and data["options"]["seed"] == 0
    assert len(data["pairs"]) == 4 and data["summary"]["pairs_found"] == 4

    # a swapper that does nothing: perfect blending figures, but the identity stays the target's
    s = report.summary
    assert s["all_faces_found"] and s["retrieval_rate"] == 0.0
    assert s["psnr_outside_min"] == 99.0 and s["seam_ratio_median"] == 1.0
    assert s["tone_error_mean"] == 0.0 and s["blotch_fraction_mean"] == 0.0
    assert s["sharpness_ratio_median"] == pytest.approx(1.0) and s["pose_error_max"] == 0.0
    for pair in report.pairs:
        assert pair.nearest_identity == pair.target_identity and pair.retrieval is False
        assert pair.id_dist_target is not None and pair.id_dist_target < pair.id_dist_source
    text = format_summary(report)
    assert (out / "summary.txt").read_text().strip() == text
    assert text.count("PASS") + text.count("FAIL") == 9 and "FAIL  retrieval rate" in text
    sheet = cv2.imread(str(out / "contact_sheet.png"))
    assert sheet.shape[1] == 3 * 256 + 2 * 4 and sheet.shape[0] > 4 * 256


def test_evaluate_folder_records_failed_pairs(tiny_dataset, tmp_path, astro_face):
    from faceweave.evaluate import evaluate_folder

    report = evaluate_folder(
        tiny_dataset, tmp_path / "out", swapper=FakeSwapper(astro_face, fail_on="bob/"), pairs=6, seed=0
    )
    failed = [p for p in report.pairs if not p.found]
    assert failed and all(p.source_identity == "bob" and "no_face" in p.error for p in failed)
    assert report.summary["pairs"] == 6 and report.summary["pairs_found"] == 6 - len(failed)
    assert report.summary["all_faces_found"] is False


def test_evaluate_folder_reruns_the_pairs_of_a_report(tiny_dataset, tmp_path, astro_face):
    from faceweave.evaluate import evaluate_folder, format_summary

    first = evaluate_folder(tiny_dataset, tmp_path / "first", swapper=FakeSwapper(astro_face), pairs=5, seed=3)
    again = evaluate_folder(
        tiny_dataset,
        tmp_path / "again",
        swapper=FakeSwapper(astro_face),
        pairs=3,
        pairs_from=tmp_path / "first" / "report.json",
    )
    assert [(p.source, p.target) for p in again.pairs] == [(p.source, p.target) for p in first.pairs[:3]]
    assert again.options["pairs_from"] == str(tmp_path / "first" / "report.json")
    assert "listed in" in format_summary(again).splitlines()[0]


def test_the_report_holds_the_tone_vector_and_both_tone_checks(tiny_dataset, tmp_path, astro_face):
    from faceweave.evaluate import CHECKS, evaluate_folder

    report = evaluate_folder(tiny_dataset, tmp_path / "out", swapper=FakeSwapper(astro_face), pairs=2)
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert all(p["tone_dlab"] == [0.0, 0.0, 0.0] and p["tone_error"] == 0.0 for p in data["pairs"])
    assert data["summary"]["tone_error_max"] == 0.0 and data["summary"]["tone_dlab_mean"] == [0.0, 0.0, 0.0]
    assert data["options"]["settings"]["tone"]["face_width"] == 200
    tone_checks = {c.name: c.goal for c in report.checks if "tone" in c.name}
    assert tone_checks == {"mean tone_error": "<= 2", "max tone_error": "<= 4"}
    assert len(CHECKS) == len(report.checks) == 9


@pytest.mark.slow
def test_evaluate_folder_on_real_photos(tmp_path):
    """End to end with the real swapper on a few shared photos (skips until the pipeline exists)."""
    pipeline = pytest.importorskip("faceweave.pipeline", reason="faceweave.pipeline is not available yet")
    if not (FACES_DIR / "identities.csv").is_file():
        pytest.skip(f"shared test data not found at {FACES_DIR}")
    from faceweave.evaluate import evaluate_folder

    data = tmp_path / "faces"
    keep = {"jeff_bezos", "sundar_pichai", "paul_rudd"}
    lines = ["file,identity,independent_photo"]
    for p in read_identities(FACES_DIR / "identities.csv"):
        if p.identity in keep:
            (data / p.file).parent.mkdir(parents=True, exist_ok=True)
            (data / p.file).symlink_to(FACES_DIR / p.file)
            lines.append(f"{p.file},{p.identity},yes")
    (data / "identities.csv").write_text("\n".join(lines) + "\n")
    swapper = pipeline.FaceSwapper()
    try:
        report = evaluate_folder(data, tmp_path / "out", swapper=swapper, pairs=2, seed=0)
    finally:
        swapper.close()
    assert report.summary["pairs"] == 2 and (tmp_path / "out" / "report.json").is_file()
    for pair in report.pairs:
        assert pair.found, pair.error
        assert pair.psnr_outside is not None and pair.psnr_outside > 30


@pytest.mark.parametrize(
    "pair_list, code, fragments",
    [
        (None, 2, ["--pairs-from", "no such file"]),
        ('{"pairs": [{"source": "ann/0.png", "target": "ghost/1.png"}]}', 2, ["ghost/1.png", "not listed"]),
    ],
)
def test_cli_refuses_a_bad_pair_list(tiny_dataset, tmp_path, pair_list, code, fragments):
    from tests.test_cli import assert_clean_error, faceweave

    path = tmp_path / "results.json"
    if pair_list is not None:
        path.write_text(pair_list)
    proc = faceweave("evaluate", tiny_dataset, "--out", tmp_path / "out", "--pairs-from", path)
    assert_clean_error(proc, code, *fragments)
