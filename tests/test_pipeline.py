"""The image pipeline end to end on real faces: identity moves, the rest of
the picture stays, inputs and outputs, source choice, selection and errors.
One :class:`FaceSwapper` (and so one set of models) for the whole module,
with the watermark off: these tests look at the swap's own pixels (the marks
are tested in test_library_marking.py)."""

from __future__ import annotations

import numpy as np
import pytest

from faceweave.analysis import embedding_distance
from faceweave.errors import InputError, NoFaceError, NoMatchingFaceError
from faceweave.evaluate.metrics import psnr
from faceweave.io import read_image, write_image
from faceweave.options import SelectionOptions, SwapOptions
from faceweave.pipeline import FaceSwapper
from faceweave.provenance.stamp import Provenance
from faceweave.types import BBox, Face, SwapResult

pytestmark = pytest.mark.slow

BIDEN = "single/biden2.jpg"
COLLINS = "single/astronaut_eileen_collins.png"
TURNED = "hard/pose_left_face_down.jpeg"


@pytest.fixture(scope="module")
def swapper():
    with FaceSwapper(provenance=Provenance.new(watermark=False)) as model:
        model.prepare()
        yield model


@pytest.fixture(scope="module")
def path(faces_dir):
    def get(rel: str):
        return faces_dir / rel

    return get


@pytest.fixture(scope="module")
def identity(swapper, path):
    """``identity("file")`` -> embedding of the largest face of a photo."""
    cache: dict[str, np.ndarray] = {}

    def get(rel: str) -> np.ndarray:
        if rel not in cache:
            pixels = read_image(path(rel)).pixels
            faces = swapper.analyser.analyse(pixels)
            face = max(faces, key=lambda f: f.bbox.area)
            cache[rel] = swapper.analyser.embed(pixels, face).embedding
        return cache[rel]

    return get


@pytest.fixture(scope="module")
def swaps(swapper, path):
    """Swap results by ``(source, target)``, each computed once."""
    cache: dict[tuple[str, str], SwapResult] = {}

    def get(source: str, target: str) -> SwapResult:
        if (source, target) not in cache:
            cache[(source, target)] = swapper.swap([path(source)], path(target))
        return cache[(source, target)]

    return get


def face_at(analyser, pixels: np.ndarray, box: BBox) -> Face:
    """The face of ``pixels`` that overlaps ``box`` most, with its embedding."""
    faces = analyser.analyse(pixels)
    best = max(faces, key=lambda f: f.bbox.iou(box))
    assert best.bbox.iou(box) > 0.5
    return analyser.embed(pixels, best)


PAIRS = [
    (BIDEN, COLLINS),
    ("identity/matt_damon/df_img29.jpg", "identity/katy_perry/df_img46.jpg"),
]


@pytest.mark.parametrize("source, target", PAIRS)
def test_swap_moves_the_identity_towards_the_source(swapper, swaps, identity, source, target):
    result = swaps(source, target)
    assert len(result.swapped) == 1
    box = result.swapped[0].bbox

    new = face_at(swapper.analyser, result.image, box).embedding

    src, tgt = identity(source), identity(target)
    assert embedding_distance(new, src) < embedding_distance(tgt, src)
    assert embedding_distance(new, tgt) > 0.3


@pytest.mark.parametrize("source, target", PAIRS)
def test_swap_changes_nothing_outside_the_face(swaps, path, source, target):
    result = swaps(source, target)
    original = read_image(path(target)).pixels
    assert result.image.shape == original.shape and result.image.dtype == np.uint8
    h, w = original.shape[:2]

    box = result.swapped[0].bbox.scaled(1.8).clipped(w, h)
    outside = np.ones((h, w), bool)
    outside[int(np.floor(box.y1)) : int(np.ceil(box.y2)), int(np.floor(box.x1)) : int(np.ceil(box.x2))] = False

    assert outside.sum() > 0.2 * h * w
    assert psnr(result.image, original, outside) > 45.0
    inside = ~outside
    assert psnr(result.image, original, inside) < 40.0  # and the face did change


@pytest.mark.parametrize(
    "source, target", PAIRS + [("identity/angelina_jolie/df_img4.jpg", "identity/robert_downey_jr/rd_d1.jpeg")]
)
def test_pixels_a_quarter_face_width_beyond_the_face_are_the_photos_own(swaps, path, source, target):
    """The reshaping warp moves the jaw and hairline, not the collar, hair
    and background beyond them; what does not move keeps its exact pixels
    (the frame is warped at its own resolution, not pasted back through the
    working crop).  Measured as the independent judge does: outside the
    face mesh's hull grown by a quarter of the face's width."""
    import cv2

    result = swaps(source, target)
    original = read_image(path(target)).pixels
    points = result.faces[result.swapped[0].target_index].mesh[:468, :2]
    hull = np.zeros(original.shape[:2], np.uint8)
    cv2.fillConvexPoly(hull, cv2.convexHull(np.round(points).astype(np.int32)), 1)
    distance = cv2.distanceTransform(1 - hull, cv2.DIST_L2, 3)
    outside = distance > 0.25 * float(np.ptp(points[:, 0]))
    changed = np.abs(result.image.astype(int) - original.astype(int)).max(axis=2) > 0
    assert outside.sum() > 0.2 * outside.size
    assert changed[outside].mean() < 0.001
    assert changed[~outside].mean() > 0.2  # the face did change


def test_result_describes_the_swap(swaps, path):
    result = swaps(BIDEN, COLLINS)
    assert isinstance(result, SwapResult)
    (done,) = result.swapped
    assert done.source_index == 0
    assert done.source_path == str(path(BIDEN))
    assert 0 <= done.target_index < len(result.faces)
    assert done.bbox == result.faces[done.target_index].bbox
    assert done.pose_gap >= 0.0
    assert result.alpha is None
    assert {"decode", "sources", "detect", "swap", "blend", "paste"} <= set(result.timings_ms)


def test_written_result_round_trips(swaps, tmp_path):
    result = swaps(BIDEN, COLLINS)
    written = write_image(tmp_path / "out" / "swapped.png", result.image, alpha=result.alpha)
    again = read_image(written)
    np.testing.assert_array_equal(again.pixels, result.image)
    assert again.alpha is None


def rgba_target(path) -> tuple[np.ndarray, np.ndarray]:
    """The RGBA test portrait with a non-trivial alpha (a left-right ramp)."""
    image = read_image(path("single/woman_east_asian.png"))
    h, w = image.pixels.shape[:2]
    alpha = np.tile(np.linspace(0, 255, w).astype(np.uint8), (h, 1))
    return np.dstack([image.pixels, alpha]), alpha


def test_array_input_keeps_the_targets_alpha_and_never_prints(swapper, path, tmp_path, capsys):
    rgba, alpha = rgba_target(path)
    source = read_image(path(BIDEN)).pixels

    result = swapper.swap([source], rgba)

    np.testing.assert_array_equal(result.alpha, alpha)
    assert result.image.shape == rgba.shape[:2] + (3,)
    assert len(result.swapped) == 1 and result.swapped[0].source_path is None
    assert (result.image != rgba[..., :3]).any()
    written = write_image(tmp_path / "rgba.png", result.image, alpha=result.alpha)
    again = read_image(written)
    np.testing.assert_array_equal(again.alpha, alpha)
    np.testing.assert_array_equal(again.pixels, result.image)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_bytes_input_of_an_opaque_rgba_file(swapper, path):
    target = path("single/woman_east_asian.png").read_bytes()
    source = path(BIDEN).read_bytes()

    result = swapper.swap(source, target)  # one source need not be in a list

    assert read_image(target).alpha is None  # fully opaque: no alpha to keep
    assert result.alpha is None
    assert len(result.swapped) == 1 and result.swapped[0].source_index == 0


def test_many_mode_swaps_every_face(swapper, path, monkeypatch):
    closed = []
    monkeypatch.setattr(swapper.analyser, "close", lambda: closed.append(True))
    options = SwapOptions(selection=SelectionOptions(mode="many"))
    with FaceSwapper(options, analyser=swapper.analyser) as many:
        result = many.swap([path(BIDEN)], path("group/insightface_t1.jpg"))
    assert len(result.swapped) >= 6
    assert sorted(s.target_index for s in result.swapped) == list(range(len(result.faces)))
    assert closed == []  # a swapper does not close an analyser it was given


@pytest.fixture(scope="module")
def two_sources(swapper, path):
    """A frontal source (index 0) and a turned one (index 1), prepared."""
    sources = swapper.load_sources([path(BIDEN), path(TURNED)])
    assert abs(sources[0].face.pose.yaw) < 10.0 and abs(sources[1].face.pose.yaw) > 30.0
    return sources


def test_choose_source_takes_the_closer_pose_for_a_frontal_target(swapper, path, two_sources):
    (frontal,) = swapper.analyser.analyse(read_image(path(COLLINS)).pixels)
    assert swapper.choose_source(two_sources, frontal).index == 0
    assert swapper.choose_source(list(reversed(two_sources)), frontal).index == 0


def test_choose_source_takes_the_closer_pose_for_a_turned_target(swapper, path, two_sources):
    faces = swapper.analyser.analyse(read_image(path("group/insightface_t1.jpg")).pixels)
    turned = min(faces, key=lambda f: f.pose.yaw)
    assert turned.pose.yaw < -30.0
    assert swapper.choose_source(two_sources, turned).index == 1
    assert swapper.choose_source(list(reversed(two_sources)), turned).index == 1


def test_swap_reports_the_chosen_source(swapper, path):
    result = swapper.swap([path(TURNED), path(BIDEN)], path(COLLINS))
    (done,) = result.swapped
    assert done.source_index == 1
    assert done.source_path == str(path(BIDEN))


def test_first_source_mode_ignores_pose(swapper, path, two_sources):
    faces = swapper.analyser.analyse(read_image(path("group/insightface_t1.jpg")).pixels)
    turned = min(faces, key=lambda f: f.pose.yaw)
    with FaceSwapper(SwapOptions(multi_source="first"), analyser=swapper.analyser) as first:
        assert first.choose_source(two_sources, turned).index == 0


@pytest.fixture(scope="module")
def by_reference(swapper):
    options = SwapOptions(selection=SelectionOptions(mode="reference"))
    with FaceSwapper(options, analyser=swapper.analyser) as model:
        yield model


def test_reference_mode_swaps_the_referenced_person(by_reference, path, identity):
    result = by_reference.swap(
        [path("identity/matt_damon/df_img29.jpg")], path("group/fr_two_people.jpg"), reference=path(BIDEN)
    )
    assert len(result.faces) == 2
    (done,) = result.swapped
    ref = identity(BIDEN)
    distances = [embedding_distance(f.embedding, ref) for f in result.faces]
    assert done.target_index == int(np.argmin(distances))
    assert distances[done.target_index] < 0.6 < max(distances)


def test_reference_mode_with_a_stranger_raises(by_reference, path):
    with pytest.raises(NoMatchingFaceError):
        by_reference.swap(
            [path(BIDEN)], path("group/fr_two_people.jpg"), reference=path("identity/matt_damon/df_img29.jpg")
        )


def test_reference_mode_without_a_reference_raises(by_reference, path):
    with pytest.raises(InputError, match="reference"):
        by_reference.swap([path(BIDEN)], path(COLLINS))


@pytest.mark.parametrize(
    "source, target, reference, role",
    [
        ("hard/neg_no_face.png", COLLINS, None, "source"),
        (BIDEN, "hard/neg_dogs.jpg", None, "target"),
        (BIDEN, COLLINS, "hard/neg_no_face.png", "reference"),
    ],
)
def test_no_face_error_names_the_image(swapper, by_reference, path, source, target, reference, role):
    model = swapper if reference is None else by_reference
    bad = {"source": source, "target": target, "reference": reference}[role]
    with pytest.raises(NoFaceError) as info:
        model.swap([path(source)], path(target), reference=None if reference is None else path(reference))
    assert info.value.role == role
    assert info.value.path == str(path(bad))


@pytest.mark.parametrize(
    "sources, target",
    [
        ([BIDEN], 42),
        ([BIDEN], 3.5),
        ([object()], COLLINS),
        ([], COLLINS),
        ([BIDEN], np.zeros((64, 64, 3), np.float32)),
        ([BIDEN], np.zeros((64, 64, 5), np.uint8)),
    ],
)
def test_bad_input_raises_input_error(swapper, path, sources, target):
    sources = [path(s) if isinstance(s, str) else s for s in sources]
    target = path(target) if isinstance(target, str) else target
    with pytest.raises(InputError):
        swapper.swap(sources, target)


def test_prepare_returns_milliseconds(swapper):
    ms = swapper.prepare()
    assert isinstance(ms, float) and ms >= 0.0


# -- each mask can be switched off, and the segmentation mask on ---------------

HAPPY = "single/happy_man.png"  # open mouth: teeth show


def teeth_match(result: np.ndarray, target: np.ndarray, face: Face) -> float:
    """Best normalised correlation of the target's mouth opening (teeth)
    anywhere within 15 px of its place in the result (the lips move as a
    block, so the teeth may shift a little)."""
    import cv2

    from faceweave.geometry import topology as topo

    inner = face.mesh[topo.lips_inner(), :2]
    x1, y1 = np.floor(inner.min(axis=0)).astype(int)
    x2, y2 = np.ceil(inner.max(axis=0)).astype(int)
    patch = cv2.cvtColor(target[y1:y2, x1:x2], cv2.COLOR_RGB2GRAY)
    area = cv2.cvtColor(result[y1 - 15 : y2 + 15, x1 - 15 : x2 + 15], cv2.COLOR_RGB2GRAY)
    return float(cv2.matchTemplate(area, patch, cv2.TM_CCOEFF_NORMED).max())


@pytest.mark.parametrize(
    "masks",
    [
        {},
        {"mouth": False},
        {"occlusion": False},
        {"box": False},
        {"region": False},
        {"segmentation": True},
        {"hands": True},
    ],
)
def test_mask_options(swapper, path, masks):
    from faceweave.options import MaskOptions

    options = SwapOptions(masks=MaskOptions(**masks))
    with FaceSwapper(options, analyser=swapper.analyser) as variant:
        result = variant.swap([path(BIDEN)], path(HAPPY))
    target = read_image(path(HAPPY)).pixels
    assert result.image.shape == target.shape and result.image.dtype == np.uint8
    assert len(result.swapped) == 1
    face = max(result.faces, key=lambda f: f.bbox.area)
    # the mesh swapper leaves the mouth opening to the target: teeth stay real
    assert teeth_match(result.image, target, face) > 0.8
    # the face did change
    b = face.bbox
    box = (slice(int(b.y1), int(b.y2)), slice(int(b.x1), int(b.x2)))
    assert np.abs(result.image[box].astype(int) - target[box].astype(int)).mean() > 5
    # the picture far from the face is untouched whatever the masks
    outside = np.ones(target.shape[:2], bool)
    big = b.scaled(2.0)
    outside[max(int(big.y1), 0) : int(big.y2), max(int(big.x1), 0) : int(big.x2)] = False
    assert np.array_equal(result.image[outside], target[outside])


# -- hands in front of the face --------------------------------------------------


@pytest.fixture(scope="module")
def hand_over_face(path):
    """Paul Rudd with a real hand (cut from the woman's photo, where it rests
    under her chin) pasted over his mouth and chin, and the hand's opaque
    pixels (a ``(H, W)`` bool mask of the picture)."""
    import cv2

    from faceweave.analysis.hands import HandDetector, hand_mask

    woman = read_image(path("single/woman_east_asian.png")).pixels
    detector = HandDetector()
    try:
        (points,) = detector.hands(woman)
    finally:
        detector.close()
    rough = hand_mask((woman.shape[1], woman.shape[0]), [points])
    # the hand's own pixels: its colour, inside the drawn hand
    lab = cv2.cvtColor(woman, cv2.COLOR_RGB2LAB).astype(np.float32)
    centre = np.median(lab[rough > 0.99], axis=0)
    near = np.linalg.norm((lab - centre) / np.array([40.0, 8.0, 8.0], np.float32), axis=2) < 1.7
    alpha = cv2.morphologyEx((near & (rough > 0.3)).astype(np.uint8), cv2.MORPH_OPEN, np.ones((5, 5), np.uint8))
    alpha = cv2.morphologyEx(alpha, cv2.MORPH_CLOSE, np.ones((9, 9), np.uint8))
    x, y, w, h = cv2.boundingRect(alpha)
    hand, alpha = woman[y : y + h, x : x + w], alpha[y : y + h, x : x + w]

    target = read_image(path("single/paul_rudd.jpg")).pixels.copy()
    with FaceSwapper() as swapper:
        face = max(swapper.find_faces(target), key=lambda f: f.bbox.area)
    scale = 0.9 * face.bbox.height / h
    hand = cv2.resize(hand, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    alpha = cv2.resize(alpha, None, fx=scale, fy=scale, interpolation=cv2.INTER_NEAREST)
    nose = face.mesh[1, :2]
    x0, y0 = int(nose[0] - 0.55 * hand.shape[1]), int(nose[1] - 0.05 * hand.shape[0])
    hh, ww = min(hand.shape[0], target.shape[0] - y0), min(hand.shape[1], target.shape[1] - x0)
    region = target[y0 : y0 + hh, x0 : x0 + ww]
    a = alpha[:hh, :ww, None].astype(bool)
    target[y0 : y0 + hh, x0 : x0 + ww] = np.where(a, hand[:hh, :ww], region)
    opaque = np.zeros(target.shape[:2], bool)
    opaque[y0 : y0 + hh, x0 : x0 + ww] = cv2.erode(alpha[:hh, :ww], np.ones((7, 7), np.uint8)) > 0
    return target, opaque


def test_hands_in_front_of_the_face_stay_sharp_and_in_place(swapper, path, hand_over_face):
    """A skin-coloured hand passes the colour test as face; with the hand
    model (``MaskOptions.hands``) it stays in front, with its own pixels
    (not moved by the reshaping warp, nor resampled through the working
    crop), while the face around it is swapped."""
    from faceweave.options import MaskOptions

    target, hand = hand_over_face

    def change(masks) -> tuple[float, float]:
        with FaceSwapper(SwapOptions(masks=MaskOptions(**masks)), analyser=swapper.analyser) as variant:
            result = variant.swap([path(BIDEN)], target, provenance=swapper.provenance)
        diff = np.abs(result.image.astype(int) - target.astype(int)).sum(axis=2)
        face = max(result.faces, key=lambda f: f.bbox.area).bbox
        upper = np.zeros_like(hand)
        upper[int(face.y1) : int((face.y1 + face.y2) / 2), int(face.x1) : int(face.x2)] = True
        return float(np.median(diff[hand])), float(diff[upper & ~hand].mean())

    without_hands, face_without = change({})
    with_hands, face_with = change({"hands": True})
    assert face_with > 10 and face_without > 10  # the face is swapped either way
    assert without_hands >= 4  # without the hand model the hand is moved or painted over
    assert with_hands <= 2  # with it, the hand's pixels stay the photo's own


def test_hand_mask_draws_the_palm_and_the_fingers():
    from faceweave.analysis.hands import hand_mask

    # a flat right hand, fingers up: wrist at the bottom, knuckles in a row
    wrist = np.array([100.0, 180.0])
    points = [wrist]
    for finger, x in enumerate((60.0, 80.0, 100.0, 120.0, 140.0)):
        base_y = 140.0 if finger else 160.0
        points += [np.array([x, base_y - k * 18.0]) for k in range(4)]
    points = np.array(points, np.float32)
    mask = hand_mask((200, 220), [points])
    assert mask.shape == (220, 200) and mask.dtype == np.float32
    assert mask[170, 100] > 0.99  # the palm
    assert mask[int(points[8, 1]), int(points[8, 0])] > 0.99  # a fingertip
    assert mask[5, 5] == 0.0 and mask[215, 195] == 0.0  # far away
    assert mask.min() >= 0.0 and mask.max() <= 1.0
    assert not hand_mask((50, 40), []).any()


# -- the expression check -------------------------------------------------------


class _SeenMesh:
    """A stand-in face mesh model that reads a fixed mesh off any picture,
    or, given ``then``, that mesh first and ``then`` on every later look."""

    def __init__(self, mesh, then=None):
        self.mesh, self.then, self.calls = mesh, then, 0

    def landmarks(self, rgb, box):
        self.calls += 1
        mesh = self.mesh if self.calls == 1 or self.then is None else self.then
        return None if mesh is None else mesh.copy()


class _CountingSwapper:
    """Wraps the mesh swapper and records the ``correction`` of each call."""

    name = "mesh"
    adjusts_expression = True

    def __init__(self, inner):
        self.inner, self.corrections = inner, []

    def swap(self, source, target, *, correction=None):
        self.corrections.append(correction)
        return self.inner.swap(source, target, correction=correction)


def _widened(mesh, factor):
    from faceweave.geometry.expression import ExpressionCorrection, apply_correction

    return apply_correction(mesh, ExpressionCorrection(mouth_width=factor))


@pytest.mark.parametrize(
    "seen_factor, expect_width",
    [
        (1.0, None),  # read as the target's: nothing more to do
        (0.9, pytest.approx((1 / 0.9) ** 1.7, rel=1e-3)),  # read narrower: widened, more than the gap
        (1.5, 0.75),  # far too wide: narrowed, within the limits
    ],
)
def test_check_expression_corrects_the_mouth_width_it_reads(swapper, path, seen_factor, expect_width, monkeypatch):
    from faceweave.expression import EXPRESSION_GAIN, EXPRESSION_ROUNDS
    from faceweave.pipeline import cut_crop

    assert EXPRESSION_GAIN == 1.7 and EXPRESSION_ROUNDS == 2
    pixels = read_image(path(COLLINS)).pixels
    face = swapper.find_faces(pixels)[0]
    (source,) = swapper.load_sources([path(BIDEN)])
    crop = cut_crop(pixels, face, face_size=swapper.working_size(face))
    counting = _CountingSwapper(swapper.swapper)
    # the corrected face reads as the target's, if it is looked at again
    seen = _SeenMesh(_widened(crop.mesh, seen_factor), then=crop.mesh)
    monkeypatch.setattr(swapper, "swapper", counting)
    monkeypatch.setattr(swapper.analyser, "mesher", seen)
    first = counting.swap(source, crop)
    counting.corrections.clear()

    out = swapper.check_expression(crop, source, first, {})

    # a reading this far off is looked at again after its correction
    assert seen.calls == (1 if expect_width is None else 2)
    if expect_width is None:
        assert counting.corrections == [] and out is first
    else:
        (correction,) = counting.corrections
        assert correction.mouth_width == expect_width
        # the mouth opening and the eyes read as the target's: left alone
        assert correction.mouth_open == 0.0 and correction.eye_open == 1.0
        assert out is not first


@pytest.mark.parametrize("seen_factor, looks", [(0.985, 1), (0.9, 2)])
def test_check_expression_looks_again_only_after_a_large_miss(swapper, path, seen_factor, looks, monkeypatch):
    """A mouth that reads a little too narrow is corrected once and not looked
    at again; one that reads far off is looked at again and, still off,
    corrected a second time from where the first correction left it."""
    from faceweave.expression import EXPRESSION_RECHECK, EXPRESSION_TOLERANCE
    from faceweave.geometry.expression import expression_ratios
    from faceweave.pipeline import cut_crop

    pixels = read_image(path(COLLINS)).pixels
    face = swapper.find_faces(pixels)[0]
    (source,) = swapper.load_sources([path(BIDEN)])
    crop = cut_crop(pixels, face, face_size=swapper.working_size(face))
    narrow = _widened(crop.mesh, seen_factor)
    gap = expression_ratios(crop.mesh).mouth_width - expression_ratios(narrow).mouth_width
    assert (gap > EXPRESSION_RECHECK) == (looks == 2) and gap > EXPRESSION_TOLERANCE
    counting = _CountingSwapper(swapper.swapper)
    # every look reads the same narrow mouth: the corrections do not show
    seen = _SeenMesh(narrow)
    monkeypatch.setattr(swapper, "swapper", counting)
    monkeypatch.setattr(swapper.analyser, "mesher", seen)
    first = counting.swap(source, crop)
    counting.corrections.clear()

    swapper.check_expression(crop, source, first, {})

    assert seen.calls == looks and len(counting.corrections) == looks
    widths = [c.mouth_width for c in counting.corrections]
    assert widths == sorted(widths) and widths[0] > 1.0  # each widens further


def test_check_expression_leaves_other_swappers_and_unread_faces_alone(swapper, path, monkeypatch):
    from faceweave.pipeline import cut_crop

    pixels = read_image(path(COLLINS)).pixels
    face = swapper.find_faces(pixels)[0]
    (source,) = swapper.load_sources([path(BIDEN)])
    crop = cut_crop(pixels, face, face_size=swapper.working_size(face))
    first = swapper.swapper.swap(source, crop)
    # the face mesh finds nothing in the result: keep it
    monkeypatch.setattr(swapper.analyser, "mesher", _SeenMesh(None))
    assert swapper.check_expression(crop, source, first, {}) is first
    # a swapper that cannot change the lips (a neural model) is not checked at all
    seen = _SeenMesh(crop.mesh)
    monkeypatch.setattr(swapper.analyser, "mesher", seen)
    monkeypatch.setattr(swapper.swapper, "adjusts_expression", False, raising=False)
    assert swapper.check_expression(crop, source, first, {}) is first and seen.calls == 0


def test_the_expression_check_brings_the_mouth_width_read_off_the_result_closer(path, faces_dir):
    """On real pairs whose mouth reads off by more than the tolerance, the
    checked swap reads closer to the target's mouth width than the unchecked
    one."""
    from faceweave.geometry.expression import expression_ratios

    pairs = [
        ("identity/robert_downey_jr/rd_d1.jpeg", "single/astronaut_eileen_collins.png"),
        ("identity/katy_perry/df_img43.jpg", "identity/robert_downey_jr/rd_d3.jpeg"),
    ]
    errors = {True: [], False: []}
    with (
        FaceSwapper(SwapOptions(expression_check=False)) as plain,
        FaceSwapper(SwapOptions(expression_check=True)) as checked,
    ):
        for src, tgt in pairs:
            target = read_image(path(tgt)).pixels
            face = max(plain.find_faces(target), key=lambda f: f.bbox.area)
            want = expression_ratios(face.mesh).mouth_width
            for check, model in ((False, plain), (True, checked)):
                image = model.swap([path(src)], target).image
                found = max(model.analyser.analyse(np.ascontiguousarray(image)), key=lambda f: f.bbox.iou(face.bbox))
                errors[check].append(abs(expression_ratios(found.mesh).mouth_width - want))
    assert sum(errors[True]) < sum(errors[False])


def test_small_faces_are_not_checked(swapper, path, monkeypatch):
    import cv2

    from faceweave.expression import EXPRESSION_MIN_FACE

    calls = []
    original = swapper.expression.check

    def counting(model, crop, source, out, timings, colour=None):
        calls.append(crop.face_size)
        return original(model, crop, source, out, timings, colour)

    monkeypatch.setattr(swapper.expression, "check", counting)
    pixels = read_image(path(COLLINS)).pixels
    face = swapper.find_faces(pixels)[0]
    assert face.size > EXPRESSION_MIN_FACE
    swapper.swap([path(BIDEN)], pixels)
    assert len(calls) == 1
    scale = 0.8 * EXPRESSION_MIN_FACE / face.size
    small = cv2.resize(pixels, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    result = swapper.swap([path(BIDEN)], small)
    assert result.swapped and result.faces[0].size < EXPRESSION_MIN_FACE
    assert len(calls) == 1  # the small face was swapped without a look


# -- sources are prepared once ----------------------------------------------------


def test_a_source_given_again_is_not_prepared_again(path, tmp_path):
    """The same file (unchanged), the same bytes or an equal array is
    recognised and its prepared face reused; a file rewritten with other
    content is prepared anew; the index follows the position in the list."""
    import shutil

    with FaceSwapper() as swapper:
        calls = []
        real = swapper.analyser.analyse

        def counting(pixels, **kwargs):
            calls.append(pixels.shape)
            return real(pixels, **kwargs)

        swapper.analyser.analyse = counting
        copy = tmp_path / "source.jpg"
        shutil.copy(path(BIDEN), copy)
        first = swapper.load_sources([copy])
        assert len(calls) == 1
        again = swapper.load_sources([path(COLLINS), copy])
        assert len(calls) == 2  # only the astronaut was new
        assert again[1].index == 1 and again[0].index == 0
        assert again[1].face is first[0].face and again[1].path == first[0].path
        # bytes and arrays: by content
        data = copy.read_bytes()
        swapper.load_sources([data])
        swapper.load_sources([bytes(data)])
        pixels = read_image(copy).pixels
        swapper.load_sources([pixels])
        swapper.load_sources([pixels.copy()])
        assert len(calls) == 4
        # the same name with other content is another source
        shutil.copy(path(COLLINS), copy)
        os_time = copy.stat().st_mtime_ns
        import os

        os.utime(copy, ns=(os_time + 10**9, os_time + 10**9))
        changed = swapper.load_sources([copy])
        assert len(calls) == 5
        assert changed[0].face.bbox != first[0].face.bbox


def test_without_a_source_cache_every_source_is_prepared(path):
    with FaceSwapper(source_cache=0) as swapper:
        calls = []
        real = swapper.analyser.analyse
        swapper.analyser.analyse = lambda pixels, **kw: calls.append(1) or real(pixels, **kw)
        swapper.load_sources([path(BIDEN)])
        swapper.load_sources([path(BIDEN)])
        assert len(calls) == 2


class _SpySwapper:
    """The mesh swapper behind the Swapper protocol, counting its calls and closes."""

    def __init__(self, inner) -> None:
        self.inner, self.calls, self.closed = inner, 0, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def swap(self, *args, **kwargs):
        self.calls += 1
        return self.inner.swap(*args, **kwargs)

    def close(self) -> None:
        self.closed += 1


def test_components_given_to_the_constructor_are_used_and_stay_the_callers(swapper, path):
    """Injected swapper, occluders and source cache: the swap runs through
    them, gives what the built ones give, and closing leaves them open."""
    from faceweave.analysis.occluders import Occluders
    from faceweave.sources import SourceCache

    spy = _SpySwapper(swapper.swapper)
    occluders = Occluders.from_options(swapper.options.masks)
    closed: list[str] = []
    occluders.close = lambda: closed.append("occluders")  # type: ignore[method-assign]
    cache = SourceCache(swapper.analyser, spy, options=swapper.options, capacity=4)
    plain = Provenance.new(watermark=False)  # no run id in the pixels: the two runs comparable
    with FaceSwapper(
        swapper.options, analyser=swapper.analyser, swapper=spy, occluders=occluders, sources=cache, provenance=plain
    ) as given:
        assert given.swapper is spy and given.occluders is occluders and given.sources is cache
        result = given.swap([path(BIDEN)], path(HAPPY))
        assert spy.calls >= 1 and len(cache.load([path(BIDEN)])) == 1
    assert spy.closed == 0 and closed == []  # the caller's, not closed
    with FaceSwapper(swapper.options, analyser=swapper.analyser, provenance=plain) as built:
        same = built.swap([path(BIDEN)], path(HAPPY))
    np.testing.assert_array_equal(result.image, same.image)
