"""Region helpers of the compositing stage and the mesh swapper's texture
rules, on a real frontal mesh (the public-domain astronaut)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from faceweave.compositing import colour
from faceweave.compositing.colour import side_lighting
from faceweave.compositing.regions import (
    above_brows,
    below_nose,
    face_rim,
    forehead_fade,
    inner_face,
    skin_region,
)
from faceweave.compositing.skin import darker_than_skin
from faceweave.geometry import topology as topo
from faceweave.swappers.mesh import shape_confidence, source_texture, triangle_areas

SIZE = (512, 512)


@pytest.fixture(scope="module")
def mesh(astronaut):
    from faceweave.analysis import FaceAnalyser

    with FaceAnalyser() as analyser:
        (face,) = analyser.analyse(astronaut)
    return np.array(face.mesh)


def at(mask: np.ndarray, point: np.ndarray) -> float:
    x, y = np.round(point[:2]).astype(int)
    return float(mask[y, x])


@pytest.mark.slow
def test_vertical_zones_split_the_face_where_they_say(mesh):
    chin, top, brow, tip = mesh[topo.CHIN], mesh[topo.FOREHEAD_TOP], mesh[topo.left_eyebrow()[0]], mesh[topo.NOSE_TIP]
    lower_lip = mesh[topo.LOWER_LIP_INNER]
    below = below_nose(SIZE, mesh, soft=2.0)
    assert at(below, lower_lip) == 1.0 and at(below, tip) == 0.0
    assert at(below, mesh[topo.face_oval()][8]) == 0.0  # the cheek outline is outside the beard zone
    above = above_brows(SIZE, mesh, soft=2.0)
    assert at(above, top + (brow - top) * 0.3) == 1.0 and at(above, tip) == 0.0 and at(above, chin) == 0.0
    fade = forehead_fade(SIZE, mesh, length=10.0)
    assert at(fade, top - np.array([0, 5, 0])) == 0.0 and at(fade, tip) == 1.0


@pytest.mark.slow
def test_rim_and_inner_face(mesh):
    rim = face_rim(SIZE, mesh, 100.0, inner_scale=0.7)
    assert at(rim, mesh[topo.NOSE_TIP]) == 0.0
    assert at(rim, mesh[topo.face_oval()][9]) > 0.9  # on the outline
    inner = inner_face(SIZE, mesh, 100.0)
    assert at(inner, mesh[topo.NOSE_TIP]) == 1.0
    assert at(inner, mesh[topo.face_oval()][9]) < 0.5  # the very side of the face is left out


@pytest.mark.slow
def test_skin_region_avoids_the_features(mesh):
    region = skin_region(SIZE, mesh, 100.0)
    assert region.dtype == np.float32 and set(np.unique(region)) <= {0.0, 1.0}
    for idx in (topo.right_eye(), topo.left_eye(), topo.lips_outer()):
        assert all(at(region, p) == 0.0 for p in mesh[idx])
    assert region.sum() > 1000


@pytest.mark.slow
def test_darker_than_skin_and_side_lighting(mesh):
    lab = np.zeros((SIZE[1], SIZE[0], 3), np.float32)
    lab[..., 0] = 60.0 + np.random.default_rng(0).normal(0, 2, SIZE[::-1])
    lab[..., 1], lab[..., 2] = 15.0, 18.0
    region = skin_region(SIZE, mesh, 100.0)
    beard = lab.copy()
    y = int(mesh[topo.CHIN][1]) + 5
    beard[y:, :, 0] = 25.0  # a dark patch below the chin, outside the skin region
    assert float(darker_than_skin(lab, region).mean()) < 0.05
    darker = darker_than_skin(beard, region)
    assert float(darker[y:].mean()) == 1.0 and float(darker[: y - 5].mean()) < 0.05
    assert abs(side_lighting(lab, mesh, region)) < 1.0
    lit = lab.copy()
    lit[:, int(mesh[topo.NOSE_TIP][0]) :, 0] += 20.0  # light from the image right
    assert side_lighting(lit, mesh, region) > 10.0


@pytest.mark.parametrize(
    "source_yaw, target_yaw, expected",
    [(0.0, 0.0, 1.0), (10.0, -25.0, 1.0), (0.0, 42.5, 0.5), (-60.0, 0.0, 0.0), (0.0, 80.0, 0.0)],
)
def test_shape_confidence(source_yaw, target_yaw, expected):
    assert shape_confidence(source_yaw, target_yaw) == pytest.approx(expected)


def test_triangle_areas():
    tris = np.array([[[0, 0], [4, 0], [0, 3]], [[0, 0], [0, 3], [4, 0]], [[1, 1], [2, 2], [3, 3]]], np.float32)
    np.testing.assert_allclose(triangle_areas(tris), [6.0, 6.0, 0.0])


@pytest.mark.slow
def test_source_texture_mirrors_only_turned_away_triangles(mesh):
    frontal = source_texture(mesh)
    tris = topo.triangles()
    own = np.asarray(mesh[:, :2], np.float32)[tris]
    # a frontal face shows nearly all its triangles: few, if any, are mirrored
    mirrored = ~np.all(np.isclose(frontal.coords, own), axis=(1, 2))
    assert mirrored.mean() < 0.05
    assert frontal.quality.shape == (len(tris),) and frontal.quality.min() >= 0 and frontal.quality.max() <= 1
    # turn the head 60 degrees: the far side is turned away and takes its mirror's texture
    angle = np.radians(60.0)
    rot = np.array([[np.cos(angle), 0, np.sin(angle)], [0, 1, 0], [-np.sin(angle), 0, np.cos(angle)]])
    centre = mesh.mean(axis=0)
    turned = (mesh - centre) @ rot.T + centre
    texture = source_texture(turned)
    own_turned = np.asarray(turned[:, :2], np.float32)[tris]
    assert (~np.all(np.isclose(texture.coords, own_turned), axis=(1, 2))).mean() > 0.1


def test_achromatic_lab_helper_round_trip():
    grey = np.full((4, 4, 3), 128, np.uint8)
    lab = colour.to_lab(grey)
    assert np.abs(lab[..., 1:]).max() < 0.5


@pytest.mark.slow
def test_a_blond_strand_across_the_source_cheek_is_not_clean(faces_dir):
    """Hair across the middle of a source face is skin-light but far from
    skin in hue: the clean map marks it, and leaves the bare cheek beside it."""
    import cv2

    from faceweave.compositing.occlusion import source_clean_map
    from faceweave.io import read_image
    from faceweave.pipeline import FaceSwapper, cut_crop

    pixels = read_image(faces_dir / "single/biden2.jpg").pixels.copy()
    with FaceSwapper() as swapper:
        face = swapper.find_faces(pixels)[0]
        crop = cut_crop(pixels, face, face_size=256)
    mesh = crop.mesh
    # a strand from the outer eye corner down the cheek on the image left
    top, bottom = mesh[33, :2], mesh[57, :2]
    strand = np.zeros(crop.pixels.shape[:2], np.uint8)
    cv2.line(strand, tuple(int(v) for v in top + (0, 20)), tuple(int(v) for v in bottom - (40, 0)), 1, 7)
    blond = colour.to_rgb(np.array([[[74.0, 1.0, 24.0]]], np.float32))[0, 0]
    painted = crop.pixels.copy()
    painted[strand > 0] = blond
    from dataclasses import replace

    clean = source_clean_map(replace(crop, pixels=painted))
    on_strand = clean[strand > 0].mean()
    cheek = np.zeros_like(strand)
    cv2.circle(cheek, tuple(int(v) for v in mesh[425, :2]), 8, 1, -1)  # the other cheek, bare
    assert on_strand < 0.4
    assert clean[cheek > 0].mean() > 0.8


@pytest.mark.slow
def test_fine_skin_coloured_strands_at_the_source_face_edge_are_not_clean(faces_dir):
    """Blond hair over the side of a source face can have the skin's own
    colour and hue: its fine streaks still mark it (the texture test at the
    scale of strands), so it is left out and does not travel onto the
    target, while the bare cheek on the other side stays clean."""
    import cv2

    from faceweave.compositing.occlusion import source_clean_map
    from faceweave.geometry import topology as topo
    from faceweave.io import read_image
    from faceweave.pipeline import FaceSwapper, cut_crop

    pixels = read_image(faces_dir / "single/biden2.jpg").pixels.copy()
    with FaceSwapper() as swapper:
        face = swapper.find_faces(pixels)[0]
        crop = cut_crop(pixels, face, face_size=256)
    size = (crop.pixels.shape[1], crop.pixels.shape[0])
    oval = crop.mesh[topo.face_oval(), :2]
    centre = oval.mean(axis=0)

    def inside(points: np.ndarray) -> np.ndarray:
        mask = np.zeros((size[1], size[0]), np.uint8)
        cv2.fillPoly(mask, [np.round(points).astype(np.int32)], 1)
        return mask

    band = inside(oval) - inside(centre + (oval - centre) * 0.8)
    rows = np.arange(size[1])[:, None]
    band[(rows[:, 0] < crop.mesh[33, 1]) | (rows[:, 0] > crop.mesh[61, 1])] = 0
    band[:, int(centre[0]) :] = 0
    # streaks of the skin's own colour, 3 px lighter and darker lines
    lab = colour.to_lab(crop.pixels)
    skin = np.median(lab[band > 0], axis=0)
    streaks = np.where((np.arange(size[0])[None, :] + rows) // 3 % 2 == 0, 9.0, -9.0).astype(np.float32)
    painted_lab = lab.copy()
    painted_lab[band > 0] = skin
    painted_lab[..., 0][band > 0] += streaks[band > 0]
    painted = crop.pixels.copy()
    painted[band > 0] = colour.to_rgb(painted_lab)[band > 0]
    from dataclasses import replace

    clean = source_clean_map(replace(crop, pixels=painted))
    cheek = np.zeros_like(band)
    cv2.circle(cheek, tuple(int(v) for v in crop.mesh[425, :2]), 8, 1, -1)  # the other cheek, bare
    assert clean[band > 0].mean() < 0.4
    assert clean[cheek > 0].mean() > 0.8


@pytest.mark.slow
def test_a_surgical_mask_on_the_target_stays_in_front(faces_dir):
    """The mouth and chin under a face mask are not painted over: the mask
    stays as it was, while the eyes get the source's."""
    import cv2

    from faceweave.io import read_image
    from faceweave.pipeline import FaceSwapper
    from faceweave.provenance.stamp import Provenance

    target = read_image(faces_dir / "hard/occl_surgical_mask.jpg").pixels
    with FaceSwapper() as swapper:
        # no watermark: its random payload moved the cheek's figure by about 1 either side of the bound
        result = swapper.swap([faces_dir / "single/biden2.jpg"], target, provenance=Provenance.new(watermark=False))
    mesh = result.faces[0].mesh
    diff = np.abs(result.image.astype(int) - target.astype(int)).sum(axis=2)

    def around(index: int, radius: int) -> np.ndarray:
        disk = np.zeros(diff.shape, np.uint8)
        cv2.circle(disk, tuple(int(v) for v in mesh[index, :2]), radius, 1, -1)
        return diff[disk > 0]

    # without the cover test: chin 34, lips 30, cheek 86, eye 111 (sum of
    # the three channels' differences); with it the mask keeps its own
    # pixels up to the reshaping of the jaw and the grain matching
    assert around(topo.CHIN, 12).mean() < 25  # the chin: the mask
    assert around(14, 12).mean() < 18  # where the lips would be
    assert around(205, 12).mean() < 30  # the cheek under the mask
    assert around(159, 10).mean() > 60  # an eye: swapped


@pytest.mark.slow
@pytest.mark.parametrize(
    "photo",
    ["single/biden2.jpg", "single/sad_woman.png", "hard/small_face_240p.jpg", "single/attr_1561_older_woman.jpg"],
)
def test_a_bare_lower_face_is_not_taken_for_a_mask(faces_dir, photo):
    from faceweave.compositing.occlusion import lower_face_cover
    from faceweave.compositing.regions import skin_region
    from faceweave.io import read_image
    from faceweave.pipeline import FaceSwapper, cut_crop

    pixels = read_image(faces_dir / photo).pixels
    with FaceSwapper() as swapper:
        face = swapper.find_faces(pixels)[0]
    crop = cut_crop(pixels, face, face_size=128)
    skin = skin_region(crop.size, crop.mesh, crop.face_size)
    assert lower_face_cover(colour.to_lab(crop.pixels), crop.mesh, skin, crop.face_size) is None


def _bridge_geometry(mesh: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """The top of the nose bridge, the unit vector across the face and the
    face width of a mesh."""
    top, chin = mesh[topo.FOREHEAD_TOP, :2], mesh[topo.CHIN, :2]
    down = (chin - top) / np.linalg.norm(chin - top)
    return mesh[topo.NOSE_BRIDGE_TOP, :2], np.array([-down[1], down[0]]), float(np.ptp(mesh[topo.face_oval(), 0]))


@pytest.mark.slow
def test_glasses_are_a_dark_bar_across_the_bridge_not_frown_lines(mesh):
    import cv2

    from faceweave.compositing.occlusion import wears_glasses

    bridge, across, width = _bridge_geometry(mesh)
    gap = float(np.linalg.norm(mesh[topo.LEFT_EYE_INNER, :2] - mesh[topo.RIGHT_EYE_INNER, :2]))
    h, w = SIZE[1], SIZE[0]

    def drawn(*segments: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        frames = np.zeros((h, w), np.float32)
        for a, b in segments:
            cv2.line(frames, tuple(int(v) for v in np.round(a)), tuple(int(v) for v in np.round(b)), 1.0, 2)
        return frames

    bar = drawn((bridge - across * gap * 0.6, bridge + across * gap * 0.6))
    assert wears_glasses(SIZE, mesh, bar, width)
    # two frown lines between the brows run down the face, as long as the bar is wide
    down = np.array([across[1], -across[0]])
    frown = drawn(*[(bridge + across * s - down * gap * 0.5, bridge + across * s + down * gap * 0.5) for s in (-6, 6)])
    assert not wears_glasses(SIZE, mesh, frown, width)
    # a short crease beside the bridge is not a bar either
    crease = drawn((bridge - across * gap * 0.1, bridge + across * gap * 0.1))
    assert not wears_glasses(SIZE, mesh, crease, width)
    assert not wears_glasses(SIZE, mesh, np.zeros((h, w), np.float32), width)


@pytest.mark.slow
@pytest.mark.parametrize(
    "photo, glasses",
    [
        ("hard/glasses_curly_lp_d8.jpg", True),
        ("identity/sundar_pichai/df_img24.jpg", True),
        # strong frown lines and wrinkles between the eyes, no glasses
        ("identity/jeff_bezos/df_img21.jpg", False),
        ("identity/robert_downey_jr/rd_d3.jpeg", False),
        ("identity/mark_zuckerberg/df_img14.jpg", False),
    ],
)
def test_glasses_on_real_photos(faces_dir, photo, glasses):
    from faceweave.compositing import masks
    from faceweave.compositing.occlusion import wears_glasses
    from faceweave.io import read_image
    from faceweave.pipeline import FaceSwapper, cut_crop

    pixels = read_image(faces_dir / photo).pixels
    with FaceSwapper() as swapper:
        face = swapper.find_faces(pixels)[0]
    crop = cut_crop(pixels, face, face_size=256)
    # as the compositing stage looks: at half resolution
    half = (crop.size[0] // 2, crop.size[1] // 2)
    mesh = crop.mesh.copy()
    mesh[:, :2] = (mesh[:, :2] + 0.5) / 2.0 - 0.5
    import cv2

    lab = colour.to_lab(cv2.resize(crop.pixels, half, interpolation=cv2.INTER_AREA))
    fs = crop.face_size / 2.0
    frames = masks.thin_dark(lab[..., 0], width=0.08 * fs)
    assert wears_glasses(half, mesh, frames, fs) is glasses


@pytest.mark.slow
def test_hair_coming_in_from_the_edge_is_grown_but_a_speck_is_not(faces_dir, monkeypatch):
    """A grey strand that enters the source face from its edge is left out
    with a margin around it (its rim and the gaps beside it would show as
    streaks); a speck in the middle of the cheek keeps its surroundings."""
    from dataclasses import replace

    import cv2

    import faceweave.compositing.occlusion as comp
    from faceweave.io import read_image
    from faceweave.pipeline import FaceSwapper, cut_crop

    pixels = read_image(faces_dir / "single/biden2.jpg").pixels.copy()
    with FaceSwapper() as swapper:
        face = swapper.find_faces(pixels)[0]
        crop = cut_crop(pixels, face, face_size=256)
    mesh, fs = crop.mesh, crop.face_size
    oval = mesh[topo.face_oval(), :2]
    centre = oval.mean(axis=0)
    # from outside the cheek on the image left (at the height of the nose
    # tip), in across the cheek, below the eye
    left = oval[oval[:, 0] < centre[0]]
    edge = left[np.argmin(np.abs(left[:, 1] - mesh[topo.NOSE_TIP, 1]))]
    strand = np.zeros(crop.pixels.shape[:2], np.uint8)
    a, b = centre + (edge - centre) * 1.2, centre + (edge - centre) * 0.45
    cv2.line(strand, tuple(int(v) for v in a), tuple(int(v) for v in b), 1, 5)
    speck = np.zeros_like(strand)
    cv2.circle(speck, tuple(int(v) for v in mesh[425, :2]), 4, 1, -1)  # the other cheek
    grey = colour.to_rgb(np.array([[[60.0, 0.0, 1.0]]], np.float32))[0, 0]
    painted = crop.pixels.copy()
    painted[(strand > 0) | (speck > 0)] = grey
    photo = replace(crop, pixels=painted)

    monkeypatch.setattr(comp, "SOURCE_HAIR_GROW", 0.0)
    plain = comp.source_clean_map(photo)
    monkeypatch.undo()
    grown = comp.source_clean_map(photo)

    def beside(mark: np.ndarray) -> np.ndarray:
        k = int(round(0.6 * comp.SOURCE_HAIR_GROW * fs)) * 2 + 1
        near = cv2.dilate(mark, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))
        return (near > 0) & (mark == 0) & (plain > 0.9)  # bare skin before growing

    assert plain[strand > 0].mean() < 0.3 and grown[strand > 0].mean() < 0.3
    assert grown[beside(strand)].mean() < 0.3  # the margin beside the strand is left out too
    assert plain[beside(speck)].mean() > 0.9 and grown[beside(speck)].mean() > 0.9  # a speck's surroundings stay


@pytest.mark.slow
def test_a_closed_eye_keeps_the_targets_lids(mesh):
    """The source's open eye is not squeezed into a shut eye's slit (it shows
    as a white smear): the triangles around a closing eye fade out, an open
    eye's stay."""
    from faceweave.geometry.expression import ExpressionCorrection, apply_correction
    from faceweave.geometry.shape import eye_openness
    from faceweave.swappers.mesh import _eyelid_weights

    tris = topo.triangles()
    touching = np.isin(tris, topo.right_eye()).any(axis=1) | np.isin(tris, topo.left_eye()).any(axis=1)
    opened = _eyelid_weights(mesh, tris)
    assert eye_openness(mesh, topo.right_eye(), (topo.RIGHT_EYE_OUTER, topo.RIGHT_EYE_INNER)) > 0.2
    assert np.all(opened == 1.0)
    shut = apply_correction(mesh, ExpressionCorrection(eye_open=0.2))
    assert eye_openness(shut, topo.left_eye(), (topo.LEFT_EYE_OUTER, topo.LEFT_EYE_INNER)) < 0.1
    closed = _eyelid_weights(shut, tris)
    assert np.all(closed[touching] == 0.0) and np.all(closed[~touching] == 1.0)


@pytest.mark.slow
def test_small_spots_inside_the_face_are_not_occluders(mesh):
    """A nostril, an eyeliner wing or a mole is not something in front of the
    face: small non-skin islands that touch nothing outside the face are
    cleared; a strand reaching in from beyond the outline and a large patch
    stay covered."""
    import cv2

    from faceweave.compositing.occlusion import ISLAND_MAX, without_islands

    face_size = float(np.ptp(mesh[topo.face_oval(), 0]))
    skin = np.ones(SIZE[::-1], np.float32)
    oval = mesh[topo.face_oval(), :2]
    centre = oval.mean(axis=0)

    def point(p: np.ndarray) -> tuple[int, int]:
        return int(round(p[0])), int(round(p[1]))

    tip = point(mesh[topo.NOSE_TIP] + np.array([0.0, 10.0, 0.0]))
    cv2.circle(skin, tip, 4, 0.0, -1)  # a nostril-sized spot
    # a strand from beyond the outline to the middle of one cheek, and the
    # same strand alone, not reaching the outline
    side, other = oval[np.argmax(oval[:, 0])], oval[np.argmin(oval[:, 0])]
    strand_end = point((side + centre) / 2.0)
    cv2.line(skin, point(side + (side - centre) * 0.3), strand_end, 0.0, 3)
    lone = point((other + centre) / 2.0), point(other * 0.2 + centre * 0.8)
    cv2.line(skin, lone[0], lone[1], 0.0, 3)
    big = int(np.sqrt(2.0 * ISLAND_MAX) * face_size / 2.0)  # a square of twice the largest island's area
    fx, fy = point(mesh[topo.FOREHEAD_TOP, :2] * 0.4 + centre * 0.6)
    skin[fy - big : fy + big, fx - big : fx + big] = 0.0

    out = without_islands(skin, mesh, face_size)

    assert out[tip[1], tip[0]] == 1.0  # the spot is skin again
    assert out[lone[0][1], lone[0][0]] == 1.0  # so is the strand that reaches nothing
    assert out[strand_end[1], strand_end[0]] < 0.5  # the strand from outside still covers
    assert out[fy, fx] < 0.5  # so does the large patch
    assert out.min() >= 0.0 and out.max() <= 1.0 and (out >= skin).all()


def test_only_triangles_near_the_outline_fade_at_a_silhouette():
    from faceweave.swappers.mesh import _SILHOUETTE_RINGS, _silhouette_triangles

    near = _silhouette_triangles()
    tris = topo.triangles()
    rings = topo.oval_rings()[tris].min(axis=1)
    assert near.shape == (len(tris),) and not near.flags.writeable
    assert near[rings == 0].all() and not near[rings > _SILHOUETTE_RINGS].any()
    # the nose, the nostrils and the eye fills are inside the face
    assert not near[np.isin(tris, [topo.NOSE_TIP]).any(axis=1)].any()
    assert not near[len(topo.tessellation()) :].any()


@pytest.mark.parametrize("full", [(345, 345), (173, 170), (200, 201)])
def test_upsampled_window_is_the_window_of_the_resized_half_map(full):
    """The shading offset is found at half resolution and brought back only
    under the blend's region: the same as resizing all of it and cutting."""
    from faceweave.compositing.resample import half as halved
    from faceweave.compositing.resample import upsampled_window

    w, h = full
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    field = np.dstack([0.3 * xx + 0.2 * yy, np.sin(xx / 30.0) * 5.0, yy * 0.1]).astype(np.float32)
    half = halved(field)
    whole = cv2.resize(half, full, interpolation=cv2.INTER_LINEAR)
    for box in [(0, 0, w, h), (13, 7, w - 3, h - 5), (40, 50, 120, 140)]:
        window = upsampled_window(half, full, box)
        np.testing.assert_allclose(window, whole[box[1] : box[3], box[0] : box[2]], atol=0.02)


def _composite_value(**change):
    from faceweave.compositing.values import Composite

    fields = {
        "pixels": np.zeros((8, 8, 3), np.uint8),
        "mask": np.zeros((8, 8), np.float32),
        "paste": np.zeros((8, 8), np.float32),
        "detail": np.zeros((8, 8), np.float32),
    }
    return Composite(**{**fields, **change})


def _half_crop(**change):
    from faceweave.compositing.values import HalfCrop

    fields = {
        "face_lab": np.zeros((4, 4, 3), np.float32),
        "behind_lab": np.zeros((4, 4, 3), np.float32),
        "mesh": np.zeros((478, 3), np.float32),
        "face_size": 3.0,
    }
    return HalfCrop(**{**fields, **change})


def _colour_plan(**change):
    from faceweave.compositing.colour import ColourMatch, SkinColour
    from faceweave.compositing.values import ColourPlan

    skin = SkinColour(mean=np.zeros(3, np.float32), std=np.ones(3, np.float32))
    fields = {"match": ColourMatch(source=skin, target=skin), "shading": np.zeros((4, 4, 3), np.float32), "amount": 0.5}
    return ColourPlan(**{**fields, **change})


def _masks(**change):
    from faceweave.compositing.values import CompositeMasks

    full = np.zeros((8, 8), np.float32)
    fields = {"mask": full, "paste": full, "detail": full, "skin": np.zeros((4, 4), np.float32)}
    return CompositeMasks(**{**fields, **change})


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda: _composite_value(), None),
        (lambda: _composite_value(pixels=np.zeros((8, 8, 4), np.uint8)), ValueError),
        (lambda: _composite_value(pixels=np.zeros((8, 8, 3), np.float32)), ValueError),
        (lambda: _composite_value(mask=np.zeros((8, 8), np.float64)), ValueError),
        (lambda: _composite_value(paste=np.zeros((8, 9), np.float32)), ValueError),
        (lambda: _half_crop(), None),
        (lambda: _half_crop(mesh=np.zeros((468, 3), np.float32)), ValueError),
        (lambda: _half_crop(behind_lab=np.zeros((4, 5, 3), np.float32)), ValueError),
        (lambda: _half_crop(face_size=0.0), ValueError),
        (lambda: _masks(), None),
        (lambda: _masks(detail=np.zeros((8, 7), np.float32)), ValueError),
        (lambda: _colour_plan(), None),
        (lambda: _colour_plan(amount=1.5), ValueError),
        (lambda: _colour_plan(shading=np.zeros((4, 4), np.float32)), ValueError),
        (lambda: colour.SkinColour(mean=np.zeros(4, np.float32), std=np.ones(3, np.float32)), ValueError),
    ],
)
def test_compositing_values_check_their_arrays(make, error):
    """The values passed between the compositing steps are frozen, hold
    read-only arrays, and refuse arrays of the wrong shape or dtype."""
    if error is not None:
        with pytest.raises(error):
            make()
        return
    value = make()
    arrays = [v for v in vars(value).values() if isinstance(v, np.ndarray)]
    assert arrays and all(not a.flags.writeable for a in arrays)
    with pytest.raises(AttributeError):
        value.mask = None


def test_the_targets_beard_is_found_below_the_nose_only(mesh):
    """``target_beard``: a patch clearly darker than the cheeks below the
    nose is beard; the same darkness above it (a shadow beside the eye) is
    not, nor is an even face."""
    from faceweave.compositing.occlusion import target_beard

    lab = np.zeros((SIZE[1], SIZE[0], 3), np.float32)
    lab[..., 0] = 62.0 + np.random.default_rng(1).normal(0, 1.5, SIZE[::-1])
    lab[..., 1], lab[..., 2] = 14.0, 17.0
    region = skin_region(SIZE, mesh, 100.0)
    assert float(target_beard(lab, mesh, region, 100.0).max()) < 0.2
    bearded = lab.copy()
    chin, nose = mesh[topo.CHIN, :2], mesh[topo.NOSE_TIP, :2]
    cv2.circle(bearded, tuple(int(v) for v in chin - (0, 15)), 22, (30.0, 8.0, 10.0), -1)
    cv2.circle(bearded, tuple(int(v) for v in nose - (35, 45)), 10, (30.0, 8.0, 10.0), -1)  # beside an eye
    beard = target_beard(bearded, mesh, region, 100.0)
    assert at(beard, chin - (0, 15)) > 0.9
    assert at(beard, nose - (35, 45)) < 0.05
    # the cheeks stay bare: their own lightness sets what is darker
    assert at(beard, mesh[205]) < 0.05 and at(beard, mesh[425]) < 0.05


def test_a_beard_is_told_from_long_hair_by_the_chin(mesh):
    """``beard_presence``: a dark chin is a beard; the same darkness at the
    sides of the lower face (hair hanging past the cheeks) with a bare chin
    is not, nor is a face with nothing dark."""
    from faceweave.compositing.occlusion import beard_presence

    h, w = SIZE[1], SIZE[0]
    bare = np.zeros((h, w), np.float32)
    assert beard_presence(bare, mesh) == 0.0
    chin_point = (mesh[17, :2] + mesh[topo.CHIN, :2]) / 2.0
    bearded = bare.copy()
    cv2.circle(bearded, tuple(int(v) for v in chin_point), 40, 1.0, -1)
    assert beard_presence(bearded, mesh) == 1.0
    # long hair: dark down both sides of the lower face, the chin bare
    hair = bare.copy()
    for corner in (topo.MOUTH_CORNER_RIGHT, topo.MOUTH_CORNER_LEFT):
        outward = mesh[corner, :2] + 1.6 * (mesh[corner, :2] - chin_point * 0.5 - mesh[corner, :2] * 0.5)
        cv2.circle(hair, tuple(int(v) for v in outward), 25, 1.0, -1)
    assert float(hair.sum()) > 1000.0
    assert beard_presence(hair, mesh) == 0.0
    # a stubbled chin, dark in places: partly
    stubble = np.where(np.random.default_rng(2).random((h, w)) < 0.35, 1.0, 0.0).astype(np.float32)
    assert 0.2 < beard_presence(stubble, mesh) < 0.8


def test_a_beard_on_the_target_is_left_out_of_the_colour_and_detail_masks(mesh):
    """Where the target shows a beard, the new face's shading is not learnt
    (the colour skin mask) and the photo's texture is not restored (the
    detail mask)."""
    from faceweave.compositing.composite import blend_masks, half_crop
    from faceweave.options import MaskOptions
    from faceweave.swappers.base import SwapOutput

    size = 256
    m = mesh.copy()
    m[:, :2] = (m[:, :2] - m[:, :2].mean(axis=0)) * (size * 0.55 / np.ptp(m[:, 0])) + size / 2
    skin_rgb = np.full((size, size, 3), (200, 160, 140), np.uint8)
    behind = skin_rgb.copy()
    chin = m[topo.CHIN, :2]
    cv2.circle(behind, tuple(int(v) for v in chin - (0, 12)), 18, (70, 55, 45), -1)
    ones = np.ones((size, size), np.float32)
    out = SwapOutput(face=skin_rgb, background=behind, coverage=ones, mesh=m, changed=np.zeros_like(ones))
    fs = float(np.ptp(m[:, 0]))
    args = dict(options=MaskOptions(occlusion=False), person_mask=None, hands=None, full=(size, size))
    bearded = blend_masks(half_crop(out, behind, face_size=fs), out, **args)
    shaven = blend_masks(half_crop(out, skin_rgb, face_size=fs), out, **args)
    spot = chin - (0, 12)
    hx, hy = (int(round((v + 0.5) / 2 - 0.5)) for v in spot)
    assert shaven.skin[hy, hx] == 1.0 and bearded.skin[hy, hx] == 0.0
    assert at(shaven.detail, spot) > 0.5 and at(bearded.detail, spot) < 0.1
    # elsewhere the masks are the same
    cheek = m[205, :2]
    assert at(bearded.detail, cheek) == pytest.approx(at(shaven.detail, cheek), abs=1e-6)


def test_a_smooth_skinned_source_on_a_bearded_target_grows_no_ghost_beard(faces_dir):
    """The new chin (below the lower lip) is about as light as the new
    cheeks, where the target's own chin is a dark beard; learnt on the beard,
    the shading and the restored texture put a grey ghost of it on the new
    chin (-14.6 L* below the cheeks, against +3.4 with the beard left out)."""
    from faceweave.compositing.colour import to_lab
    from faceweave.io import read_image
    from faceweave.pipeline import FaceSwapper
    from faceweave.provenance.stamp import Provenance

    target = read_image(faces_dir / "identity/alex_lacamoire/knn_train_img1.jpg").pixels
    with FaceSwapper() as swapper:
        result = swapper.swap(
            [faces_dir / "identity/scarlett_johansson/df_img9.jpg"], target, provenance=Provenance.new(watermark=False)
        )
    mesh = result.faces[0].mesh
    radius = max(3, int(0.04 * float(np.ptp(mesh[:, 0]))))

    def lightness(lab: np.ndarray, points: tuple[int, ...]) -> float:
        zone = np.zeros(lab.shape[:2], np.uint8)
        for i in points:
            cv2.circle(zone, tuple(int(v) for v in mesh[i, :2]), radius, 1, -1)
        return float(np.median(lab[zone > 0][:, 0]))

    chin, cheeks = (200, 18), (205, 425)
    before, after = to_lab(target), to_lab(result.image)
    assert lightness(before, chin) - lightness(before, cheeks) < -15.0  # the target's beard
    assert lightness(after, chin) - lightness(after, cheeks) > -7.0
