"""Face and frame enhancers on tiny ONNX models with the real models' names
and shapes: normalisation, colour order, CodeFormer's weight, paste-back,
blend, batching, tiling and seams, checked against hand-computed values."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from enhancer_fixtures import codeformer_model, face_model, frame_model
from faceweave.enhancers import (
    FACE_ENHANCERS,
    FrameEnhancerSpec,
    RestorationEnhancer,
    TiledFrameEnhancer,
    available_frame_enhancers,
    create_face_enhancer,
    create_frame_enhancer,
)
from faceweave.enhancers.face import denormalize_crops, normalize_crops
from faceweave.enhancers.tiles import (
    axis_weights,
    make_grid,
    merge_tiles,
    split_tiles,
    tile_starts,
)
from faceweave.errors import InputError, InvalidOptionError, ModelSignatureError
from faceweave.geometry.templates import TEMPLATES, estimate_alignment, warp_crop

# a face whose eyes are 40 px apart in a 200 x 240 frame, its crop centred on
# (120, 100): the 512 crop magnifies 3.1x and covers x 37..203, y 17..183
KPS = (TEMPLATES["ffhq_512"] - 0.5) * 512 / 3.1 + (120, 100)
FACE_CENTRE = (120, 100)  # (x, y)


def flat(value=(100, 100, 100), shape=(200, 240)) -> np.ndarray:
    return np.full(shape + (3,), value, np.uint8)


def footprint(matrix: np.ndarray, size: int, shape: tuple[int, int]) -> np.ndarray:
    """Bool ``(H, W)``: frame pixels inside the crop's square (plus 2 px)."""
    inv = cv2.invertAffineTransform(matrix)
    corners = np.array([[0, 0], [size, 0], [size, size], [0, size]], np.float64) @ inv[:, :2].T + inv[:, 2]
    m = np.zeros(shape, np.uint8)
    cv2.fillConvexPoly(m, np.round(corners).astype(np.int32), 1)
    return cv2.dilate(m, np.ones((5, 5), np.uint8)) > 0


def gfpgan(model, **kw):
    return create_face_enhancer("gfpgan_1.4", model, **kw)


# -- pure steps -------------------------------------------------------------
def test_normalisation_round_trip_is_exact_for_every_level():
    levels = np.arange(256, dtype=np.uint8)
    crops = np.stack([levels, levels[::-1], levels], axis=-1).reshape(1, 16, 16, 3)
    x = normalize_crops(crops)
    assert x.shape == (1, 3, 16, 16) and x.dtype == np.float32
    assert x[0, 0, 0, 0] == -1.0 and x[0, 0, 15, 15] == 1.0 and x[0, 1, 0, 0] == 1.0  # channel 0 is R
    assert np.array_equal(denormalize_crops(x), crops)


@pytest.mark.parametrize(("value", "expected"), [(2.0, 255), (-3.0, 0), (0.0, 128), (0.6, 204)])
def test_denormalise_clips_and_rounds(value, expected):
    # (v + 1) / 2 * 255: 0 -> 127.5 -> 128 (round half to even), 0.6 -> 204
    assert denormalize_crops(np.full((1, 3, 2, 2), value, np.float32))[0, 0, 0, 0] == expected


def test_alignment_puts_the_points_on_the_template():
    kps = TEMPLATES["ffhq_512"] * 100 + (30, 40)  # half-size, shifted template
    m = estimate_alignment(kps, "ffhq_512", 512)
    assert np.allclose(m, [[5.12, 0, -153.6], [0, 5.12, -204.8]], atol=1e-9)
    assert np.allclose(kps @ m[:, :2].T + m[:, 2], TEMPLATES["ffhq_512"] * 512, atol=1e-9)


def test_warp_crop_of_a_large_face_is_antialiased():
    # 1-pixel stripes shrunk 4x average to grey instead of aliasing
    frame = np.zeros((800, 800, 3), np.uint8)
    frame[::2] = 255
    m = np.array([[0.25, 0, 0], [0, 0.25, 0]])
    crop = warp_crop(frame, m, 128)
    assert abs(float(crop[20:100, 20:100].mean()) - 127.5) < 3 and crop[20:100, 20:100].std() < 3


# -- face enhancers -----------------------------------------------------------
def test_identity_model_leaves_the_face_and_the_rest_of_the_frame():
    yy, xx = np.mgrid[0:200, 0:240]
    frame = np.stack([xx, yy, 0.5 * xx + 0.3 * yy], -1).astype(np.uint8)  # linear: bilinear resampling is exact
    out = gfpgan(face_model()).enhance(frame, [KPS], blend=1.0)
    m = estimate_alignment(KPS, "ffhq_512", 512)
    inside = footprint(m, 512, frame.shape[:2])
    assert np.abs(out.astype(int) - frame).max() <= 1
    assert np.array_equal(out[~inside], frame[~inside])
    assert out is not frame


@pytest.mark.parametrize(
    ("value", "blend", "expected"),
    [
        (0.4, 1.0, 151),  # 100 + 0.4 * 127.5
        (0.4, 0.6, 131),  # 100 + 0.6 * 51 = 130.6
        (5.0, 1.0, 255),  # clipped to 1 before denormalising
        (0.4, 0.0, 100),
    ],
)
def test_model_output_and_blend_at_the_face_centre(value, blend, expected):
    out = gfpgan(face_model(op="add", value=value)).enhance(flat(), [KPS], blend=blend)
    x, y = FACE_CENTRE
    assert np.abs(out[y, x].astype(int) - expected).max() <= 1
    assert np.array_equal(out[:, :30], flat()[:, :30]) and np.array_equal(out[:12], flat()[:12])  # outside the crop


def test_blend_zero_does_not_run_the_model():
    model = face_model(op="add", value=0.4)
    frame = flat()
    out = gfpgan(model).enhance(frame, [KPS], blend=0.0)
    assert np.array_equal(out, frame) and out is not frame and model.calls == []


def test_mask_feathers_towards_the_crop_edge():
    out = gfpgan(face_model(op="add", value=0.4)).enhance(flat(), [KPS], blend=1.0)
    row = out[100, :, 0].astype(int)
    # 151 at the centre, falling smoothly to 100 outside the crop
    assert row[120] == 151 and row[10] == 100
    assert np.all(np.diff(row[10:121]) >= 0) and np.abs(np.diff(row[10:121])).max() <= 6


def test_model_sees_rgb_in_rgb_order():
    out = gfpgan(face_model(op="red")).enhance(flat((200, 100, 50)), [KPS], blend=1.0)
    x, y = FACE_CENTRE
    assert np.abs(out[y, x].astype(int) - 200).max() <= 1


@pytest.mark.parametrize(
    ("weight", "runtime", "expected"), [(1.0, False, 200), (0.5, False, 164), (0.0, False, 128), (0.5, True, 164)]
)
def test_codeformer_weight_reaches_the_graph(weight, runtime, expected):
    # output = input * weight -> 255 / 2 * (1 - weight) + 200 * weight, e.g. 0.5: 63.75 + 100
    enhancer = create_face_enhancer("codeformer", codeformer_model(runtime=runtime), weight=weight)
    out = enhancer.enhance(flat((200, 200, 200)), [KPS], blend=1.0)
    x, y = FACE_CENTRE
    assert np.abs(out[y, x].astype(int) - expected).max() <= 1
    assert enhancer.model.calls[0]["weight"] == (1,)


def test_faces_are_batched_when_the_batch_is_dynamic_and_match_single_runs():
    rng = np.random.default_rng(0)
    frame = cv2.GaussianBlur(rng.integers(0, 256, (240, 400, 3), dtype=np.uint8), (0, 0), 2)
    faces = [KPS + (dx, dy) for dx, dy in [(0, 0), (150, 40), (260, 10)]]
    batched, single = face_model(op="add", value=0.3, batch="N"), face_model(op="add", value=0.3)
    a = gfpgan(batched).enhance(frame, faces, blend=0.8)
    b = gfpgan(single).enhance(frame, faces, blend=0.8)
    assert np.array_equal(a, b)
    assert [c["input"][0] for c in batched.calls] == [3] and [c["input"][0] for c in single.calls] == [1, 1, 1]
    assert not np.array_equal(a, frame)


def test_max_batch_splits_runs():
    model = face_model(batch="N")
    gfpgan(model, max_batch=2).enhance(flat(), [KPS] * 5, blend=1.0)
    assert [c["input"][0] for c in model.calls] == [2, 2, 1]


@pytest.mark.parametrize("name", sorted(FACE_ENHANCERS))
def test_every_registered_face_enhancer_runs(name):
    spec = FACE_ENHANCERS[name]
    model = codeformer_model(size=spec.size) if spec.weight_input else face_model(size=spec.size, op="add", value=0.4)
    enhancer = create_face_enhancer(name, model)
    assert isinstance(enhancer, RestorationEnhancer) and enhancer.name == name
    out = enhancer.enhance(flat(), [KPS], blend=1.0)
    assert out.shape == (200, 240, 3) and not np.array_equal(out, flat())


@pytest.mark.parametrize(
    ("build", "error"),
    [
        (lambda: gfpgan(face_model(input_name="x")), ModelSignatureError),
        (lambda: gfpgan(face_model(size=256)), ModelSignatureError),
        (lambda: create_face_enhancer("codeformer", face_model()), ModelSignatureError),
        (lambda: gfpgan(face_model(op="resize", out_size=256)).enhance(flat(), [KPS]), ModelSignatureError),
        (lambda: create_face_enhancer("gfpgan_9", face_model()), InvalidOptionError),
        (lambda: create_face_enhancer("codeformer", codeformer_model(), weight=1.5), InvalidOptionError),
        (lambda: gfpgan(face_model(), mask_blur=2.0), InvalidOptionError),
        (lambda: gfpgan(face_model()).enhance(flat(), [KPS], blend=1.5), InvalidOptionError),
        (lambda: gfpgan(face_model()).enhance(flat(), [KPS[:4]]), InputError),
        (lambda: gfpgan(face_model()).enhance(flat().astype(np.float32), [KPS]), InputError),
    ],
)
def test_errors(build, error):
    with pytest.raises(error):
        build()


def test_real_photo_face_is_enhanced_and_nothing_else(astronaut):
    from faceweave.analysis import FaceAnalyser
    from faceweave.options import AnalysisOptions

    with FaceAnalyser(AnalysisOptions(small_faces=False)) as analyser:
        faces = analyser.analyse(astronaut)
    assert len(faces) == 1
    face = faces[0]
    assert face.kps5[0, 0] < face.kps5[1, 0] and face.kps5[3, 0] < face.kps5[4, 0]  # image-left first
    m = estimate_alignment(face.kps5, "ffhq_512", 512)
    inside = footprint(m, 512, astronaut.shape[:2])
    assert 0.05 < inside.mean() < 0.5

    same = gfpgan(face_model()).enhance(astronaut, [face], blend=1.0)
    b = face.bbox
    box = (slice(int(b.y1), int(b.y2)), slice(int(b.x1), int(b.x2)))
    mse = np.mean((same[box].astype(float) - astronaut[box]) ** 2)
    assert 10 * np.log10(255**2 / max(mse, 1e-9)) > 35  # identity model: only resampling error
    assert np.array_equal(same[~inside], astronaut[~inside])

    brighter = gfpgan(face_model(op="add", value=0.2)).enhance(astronaut, [face], blend=0.8)
    gain = brighter[box].astype(float) - astronaut[box]
    assert 15 < np.median(gain) <= 21  # 0.2 * 127.5 * 0.8 = 20.4 where the mask is 1
    assert np.array_equal(brighter[~inside], astronaut[~inside])


# -- tiles --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("length", "tile", "overlap", "expected"),
    [
        (10, 4, 1, (0, 3, 6)),
        (4, 4, 1, (0,)),
        (3, 4, 1, (0,)),
        (5, 4, 2, (0, 1)),
        (12, 4, 0, (0, 4, 8)),
        (13, 4, 0, (0, 3, 6, 9)),
    ],
)
def test_tile_starts(length, tile, overlap, expected):
    assert tile_starts(length, tile, overlap) == expected


def test_axis_weights_are_linear_ramps_across_overlaps():
    w = axis_weights((0, 3, 6), 4)
    assert (
        np.allclose(w[0], [1, 1, 1, 0.5]) and np.allclose(w[1], [0.5, 1, 1, 0.5]) and np.allclose(w[2], [0.5, 1, 1, 1])
    )
    w = axis_weights((0, 4), 8)  # overlap 4: ramps 1/8, 3/8, 5/8, 7/8 and back
    assert np.allclose(w[0][4:], [7 / 8, 5 / 8, 3 / 8, 1 / 8]) and np.allclose(w[1][:4], [1 / 8, 3 / 8, 5 / 8, 7 / 8])


@pytest.mark.parametrize(
    ("shape", "tile", "overlap"), [((37, 53), 16, 4), ((64, 64), 16, 8), ((10, 70), 32, 5), ((16, 16), 16, 4)]
)
def test_split_then_merge_gives_the_image_back(shape, tile, overlap):
    image = np.random.default_rng(1).random(shape + (3,), np.float32)
    grid = make_grid(*shape, tile=tile, overlap=overlap)
    assert np.allclose(merge_tiles(split_tiles(image, grid), grid), image, atol=1e-6)
    ones = merge_tiles((np.ones((grid.tile_h, grid.tile_w), np.float32) for _ in range(len(grid))), grid)
    assert np.allclose(ones, 1.0, atol=1e-6)


# -- frame enhancers ----------------------------------------------------------
def esrgan(model, **kw):
    return create_frame_enhancer("real_esrgan_x2", model, **kw)


def noise(shape=(37, 53)) -> np.ndarray:
    return np.random.default_rng(2).integers(0, 256, shape + (3,), dtype=np.uint8)


@pytest.mark.parametrize(("tile", "overlap", "pad"), [(16, 4, 3), (16, 8, 0), (24, 6, 16), (512, 32, 16)])
def test_tiled_upscale_equals_the_hand_computed_result(tile, overlap, pad):
    frame = noise()
    out = esrgan(frame_model(), tile_size=tile, tile_overlap=overlap, tile_pad=pad).enhance(frame)
    assert out.shape == (74, 106, 3)
    assert np.array_equal(out, frame.repeat(2, 0).repeat(2, 1))


def test_pixelwise_model_tiled_equals_untiled():
    spec = FrameEnhancerSpec("square_x1", scale=1)
    frame = noise((50, 61))
    tiled = TiledFrameEnhancer(frame_model(op="square", scale=1), spec=spec, tile_size=16, tile_overlap=5).enhance(
        frame
    )
    whole = TiledFrameEnhancer(frame_model(op="square", scale=1), spec=spec, tile_size=128).enhance(frame)
    assert np.array_equal(tiled, whole)
    assert np.array_equal(whole, np.round(frame.astype(float) ** 2 / 255))  # (v / 255)^2 * 255


def test_overlap_hides_the_seams_of_a_model_that_is_wrong_at_tile_edges():
    spec = FrameEnhancerSpec("blur_x1", scale=1)
    frame = noise((64, 80))

    def run(tile, overlap):
        return (
            TiledFrameEnhancer(frame_model(op="blur", scale=1), spec=spec, tile_size=tile, tile_overlap=overlap)
            .enhance(frame)
            .astype(int)
        )

    whole = run(128, 0)
    seams = np.abs(run(32, 0) - whole).max()
    smooth = np.abs(run(32, 8) - whole).max()
    # an edge pixel misses 3 of 9 neighbours (<= 255 / 3) and weighs 0.5 / overlap
    assert smooth <= 255 / 3 * 0.5 / 8 + 1
    assert seams > 20 and smooth < seams / 5


def test_fixed_tile_model_pads_small_frames_and_refuses_other_tile_sizes():
    model = frame_model(tile=32)
    frame = noise((20, 70))
    enhancer = esrgan(model, tile_overlap=4, tile_pad=2)
    assert enhancer.tile_size == 32
    assert np.array_equal(enhancer.enhance(frame), frame.repeat(2, 0).repeat(2, 1))
    assert all(c["input"] == (1, 3, 32, 32) for c in model.calls)
    with pytest.raises(InvalidOptionError):
        esrgan(frame_model(tile=32), tile_size=64)


def test_dynamic_batch_runs_several_tiles_at_once():
    model = frame_model(batch="N")
    frame = noise((40, 40))
    out = esrgan(model, tile_size=16, tile_overlap=4, tile_pad=0, max_batch=4).enhance(frame)
    assert np.array_equal(out, frame.repeat(2, 0).repeat(2, 1))
    assert [c["input"][0] for c in model.calls] == [4, 4, 1]


def test_restore_size_and_blend():
    frame = noise()
    assert np.array_equal(esrgan(frame_model(), restore_size=True).enhance(frame), frame)  # area-averaging 2x2 copies
    unchanged = esrgan(frame_model(), restore_size=True).enhance(frame, blend=0.0)
    assert np.array_equal(unchanged, frame)
    half = esrgan(frame_model()).enhance(frame, blend=0.5)
    base = cv2.resize(frame, (106, 74), interpolation=cv2.INTER_LINEAR).astype(float)
    expected = 0.5 * base + 0.5 * frame.repeat(2, 0).repeat(2, 1)
    assert np.abs(half - expected).max() <= 0.5 + 1e-6


@pytest.mark.parametrize(
    ("build", "error"),
    [
        (lambda: esrgan(frame_model(), tile_overlap=20, tile_size=32), InvalidOptionError),
        (lambda: esrgan(frame_model(), tile_pad=-1), InvalidOptionError),
        (lambda: create_frame_enhancer("real_esrgan_x3", frame_model()), InvalidOptionError),
        (lambda: create_frame_enhancer("real_esrgan_x4", frame_model(scale=2)).enhance(noise()), ModelSignatureError),
        (lambda: esrgan(face_model(input_name="image")), ModelSignatureError),
        (lambda: esrgan(frame_model()).enhance(noise(), blend=-0.1), InvalidOptionError),
    ],
)
def test_frame_errors(build, error):
    with pytest.raises(error):
        build()


def test_registered_frame_enhancers_have_their_scale():
    for name in available_frame_enhancers():
        scale = int(name.split("_x")[1][0])
        out = create_frame_enhancer(name, frame_model(scale=scale), tile_size=16, tile_overlap=4).enhance(
            noise((10, 12))
        )
        assert out.shape == (10 * scale, 12 * scale, 3)


# -- the pipeline step --------------------------------------------------------
def test_the_enhancers_run_face_then_frame():
    from faceweave.enhancement import Enhancers

    frame = flat()
    assert Enhancers().apply(frame, [KPS]) is frame
    face = gfpgan(face_model(op="add", value=0.4))
    up = esrgan(frame_model())
    done = Enhancers(face=face, frame=up, face_blend=1.0).finish(frame, [KPS])
    assert done.pixels.shape == (400, 480, 3) and done.mask is None
    assert np.array_equal(done.pixels, face.enhance(frame, [KPS], blend=1.0).repeat(2, 0).repeat(2, 1))
    assert np.array_equal(Enhancers(face=face).apply(frame, []), frame)
