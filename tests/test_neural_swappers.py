"""Neural swappers and ArcFace embedders, on tiny ONNX models that have the
real models' names, shapes and initializer layout (see neural_fixtures)."""

from __future__ import annotations

import cv2
import numpy as np
import onnx
import pytest

from faceweave.embedders import ArcFaceEmbedder, EmbeddingConverter
from faceweave.embedders.arcface import l2_normalize
from faceweave.errors import InvalidOptionError, ModelFormatError, ModelSignatureError
from faceweave.geometry.templates import points5, warp_to_template
from faceweave.swappers import AlignedCrop, SourceFace, Swapper
from faceweave.swappers.neural import NEURAL_SWAPPERS, read_emap
from faceweave.swappers.neural.base import (
    PreparedSource,
    blend_factor,
    box_mask,
    denormalize_outputs,
    normalize_crops,
)
from faceweave.swappers.neural.pixel_boost import boost_factor, tile, untile
from neural_fixtures import OrtModel, arcface_model, converter_model, swapper_model
from neural_fixtures import face_crop as synthetic_crop
from neural_fixtures import source_face as synthetic_source

RNG_W = np.random.default_rng(7).normal(0, 1, (3, 512)).astype(np.float32)
EMAP = np.random.default_rng(8).normal(0, 0.05, (512, 512)).astype(np.float32)


# -- building swappers on tiny models -------------------------------------------
def embedder(batch="None") -> ArcFaceEmbedder:
    return ArcFaceEmbedder(OrtModel(arcface_model(RNG_W, batch=batch)))


def build(name: str, *, batch="N", gain=1.0, offset=0.0, **kwargs):
    spec = NEURAL_SWAPPERS[name].spec
    if spec.source == "embedding":
        source_shape = [512]
        kwargs.setdefault("embedder", embedder())
    else:
        source_shape = [3, spec.source_size, spec.source_size]
    if spec.converter:
        kwargs.setdefault("converter", EmbeddingConverter(OrtModel(converter_model()), name=spec.converter))
    if spec.family == "inswapper":
        kwargs.setdefault("emap", EMAP)
    model = OrtModel(
        swapper_model(
            spec.size,
            source_shape,
            batch=batch,
            gain=gain,
            offset=offset,
            emap=EMAP if spec.family == "inswapper" else None,
            mask_output=spec.family == "hyperswap",
            source_first=spec.family == "hyperswap",
        )
    )
    return NEURAL_SWAPPERS[name].create(model, **kwargs), model


def raw_embedding(crop: AlignedCrop) -> np.ndarray:
    """The tiny ArcFace by hand: align (arcface_112_v2, 112), (x - 127.5) / 127.5
    in RGB order, channel means, @ W."""
    aligned, _ = warp_to_template(crop.pixels, points5(crop), "arcface_112_v2", 112)
    means = ((aligned.astype(np.float64) - 127.5) / 127.5).mean(axis=(0, 1))  # R, G, B
    return (means @ RNG_W.astype(np.float64)).astype(np.float32)


def inside(out) -> np.ndarray:
    return out.coverage > 0.99


# -- pure pieces ---------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 2, 4])
def test_pixel_boost_tiles_interleave_and_round_trip_exactly(k):
    crop = np.random.default_rng(k).integers(0, 256, (32 * k, 32 * k, 3), dtype=np.uint8)
    tiles = tile(crop, k)
    assert tiles.shape == (k * k, 32, 32, 3)
    for i in range(k):
        for j in range(k):
            np.testing.assert_array_equal(tiles[i * k + j], crop[i::k, j::k])
    np.testing.assert_array_equal(untile(tiles, k), crop)


@pytest.mark.parametrize(
    "model_size, boost, expected",
    [
        (128, None, 1),
        (128, 128, 1),
        (128, 256, 2),
        (128, 512, 4),
        (256, 512, 2),
        (128, 200, InvalidOptionError),
        (256, 128, InvalidOptionError),
    ],
)
def test_boost_factor(model_size, boost, expected):
    if isinstance(expected, type):
        with pytest.raises(expected, match="multiple of the model size"):
            boost_factor(model_size, boost)
    else:
        assert boost_factor(model_size, boost) == expected


def test_box_mask_without_blur_is_a_hard_box_with_padding():
    m = box_mask(128, blur=0.0, padding=(10, 0, 5, 0))
    assert m.dtype == np.float32 and m.shape == (128, 128)
    assert m[:12].max() == 0 and m[12:-6, 1:-1].min() == 1.0  # int(12.8) rows on top, int(6.4) below
    assert m[-6:].max() == 0 and m[:, 0].max() == 0 and m[:, -1].max() == 0


def test_box_mask_with_facefusion_blur_is_feathered_and_symmetric():
    m = box_mask(128)  # blur 0.3: a 9-px border, Gaussian sigma 4.75
    assert m[64, 64] == pytest.approx(1.0, abs=1e-6) and m[0, 0] < 0.02
    assert 0.2 < m[9, 64] < 0.8  # the feathered edge
    np.testing.assert_allclose(m, m.T, atol=1e-6)
    np.testing.assert_allclose(m, m[::-1, ::-1], atol=1e-6)


def test_blend_factor_is_facefusions_weight_mapping():
    assert [blend_factor(w) for w in (0.0, 0.5, 1.0)] == pytest.approx([0.35, 0.0, -0.35])


def test_normalize_and_denormalize_by_hand():
    crops = np.array([[[[255, 0, 51]]]], np.uint8)  # one RGB pixel
    x = normalize_crops(crops, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
    assert x.shape == (1, 3, 1, 1) and x.dtype == np.float32
    np.testing.assert_allclose(x.ravel(), [1.0, -1.0, -0.6], atol=1e-6)
    back = denormalize_outputs(x, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5), denormalize=True)
    np.testing.assert_allclose(back.ravel(), [255.0, 0.0, 51.0], atol=1e-4)
    raw = denormalize_outputs(x, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5), denormalize=False)
    np.testing.assert_allclose(raw.ravel(), [255.0, 0.0, 0.0], atol=1e-4)  # clipped to [0, 1]


# -- ArcFace ----------------------------------------------------------------
def test_arcface_embedding_normalisation_channel_order_and_unit_length():
    crop = synthetic_crop(seed=3)
    emb = embedder()
    raw = emb.embed_raw([(crop.pixels, points5(crop))])[0]
    np.testing.assert_allclose(raw, raw_embedding(crop), rtol=1e-4, atol=1e-4)
    # BGR order would give another vector: the channels differ
    aligned, _ = warp_to_template(crop.pixels, points5(crop), "arcface_112_v2", 112)
    bgr = ((aligned[..., ::-1].astype(np.float64) - 127.5) / 127.5).mean(axis=(0, 1)) @ RNG_W
    assert np.abs(raw - bgr).max() > 1e-2
    unit = emb.embed(crop.pixels, crop.mesh)
    assert unit.shape == (512,) and unit.dtype == np.float32
    assert np.linalg.norm(unit) == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(unit, raw / np.linalg.norm(raw), atol=1e-6)


@pytest.mark.parametrize("batch, runs", [("None", 1), (1, 3)])
def test_arcface_batch_equals_single_faces(batch, runs):
    crops = [synthetic_crop(seed=s) for s in (1, 2, 3)]
    emb = embedder(batch)
    together = l2_normalize(emb.embed_raw([(c.pixels, points5(c)) for c in crops]))
    assert len(emb.model.calls) == runs
    singles = np.stack([emb.embed(c.pixels, points5(c)) for c in crops])
    np.testing.assert_allclose(together, singles, atol=1e-6)


def test_arcface_rejects_a_wrong_input_shape():
    bad = OrtModel(swapper_model(64, [512]))
    with pytest.raises(ModelSignatureError, match="112"):
        ArcFaceEmbedder(bad)


# -- every registered model: signature, normalisation, paste-back -----------------
ALL = sorted(NEURAL_SWAPPERS)


def test_registry_lists_every_facefusion_model():
    assert set(ALL) >= {
        "inswapper_128",
        "simswap_256",
        "simswap_unofficial_512",
        "hyperswap_1a_256",
        "hyperswap_1b_256",
        "hyperswap_1c_256",
        "ghost_1_256",
        "ghost_2_256",
        "ghost_3_256",
        "blendswap_256",
        "uniface_256",
    }


@pytest.mark.parametrize("name", ALL)
def test_target_is_fed_with_the_models_exact_normalisation(name):
    swapper, model = build(name)
    assert isinstance(swapper, Swapper) and swapper.name == name
    spec = swapper.spec
    target = synthetic_crop()
    swapper.swap(swapper.prepare_source(synthetic_source()), target)
    (call,) = model.calls
    aligned, _ = warp_to_template(target.pixels, points5(target), spec.template, spec.size)
    for c in range(3):  # channel c of the feed is the crop's RGB channel c
        expected = (aligned[..., c].astype(np.float64) / 255.0 - spec.mean[c]) / spec.std[c]
        np.testing.assert_allclose(call["target"][0, c], expected, atol=1e-5)
    assert call["target"].dtype == np.float32 and call["source"].dtype == np.float32


@pytest.mark.parametrize("name", ALL)
def test_identity_model_pastes_the_crop_back_inside_the_box(name):
    """Identity model: the result is the target crop itself (families whose
    output is de-normalised, or plain [0, 1]) or, for simswap_256, the crop
    passed through ImageNet normalisation and clipped, as FaceFusion does."""
    swapper, _ = build(name)
    spec = swapper.spec
    target = synthetic_crop()
    out = swapper.swap(synthetic_source(), target)
    assert out.face.shape == target.pixels.shape and out.face.dtype == np.uint8
    assert out.coverage.shape == target.pixels.shape[:2] and out.coverage.dtype == np.float32
    assert out.background is target.pixels and out.mesh is target.mesh and not out.changed.any()
    px = target.pixels.astype(np.float64)
    if spec.denormalize or spec.mean == (0.0, 0.0, 0.0):
        expected = px
    else:
        expected = np.clip((px / 255.0 - np.array(spec.mean)) / np.array(spec.std), 0, 1) * 255.0
    diff = np.abs(out.face.astype(np.float64) - expected)[inside(out)]
    assert inside(out).mean() > 0.1
    assert diff.mean() < 1.5 and np.percentile(diff, 99) < 8


@pytest.mark.parametrize("name", ["inswapper_128", "hyperswap_1a_256", "uniface_256"])
def test_coverage_is_the_warped_box_mask(name):
    swapper, _ = build(name)
    target = synthetic_crop()
    out = swapper.swap(synthetic_source(), target)
    nose = np.round(points5(target)[2]).astype(int)
    assert out.coverage[nose[1], nose[0]] == pytest.approx(1.0, abs=1e-4)
    assert out.coverage.min() == 0.0 and out.coverage.max() <= 1.0
    # a hand-warped box mask at the model size gives the same coverage
    _, m = warp_to_template(target.pixels, points5(target), swapper.spec.template, swapper.spec.size)
    hand = cv2.warpAffine(box_mask(swapper.spec.size), cv2.invertAffineTransform(m), target.size)
    np.testing.assert_allclose(out.coverage, np.clip(hand, 0, 1), atol=1e-5)


# -- source preparation --------------------------------------------------------
def test_inswapper_latent_uses_the_emap_initializer():
    swapper, model = build("inswapper_128")
    source = swapper.prepare_source(synthetic_source())
    assert isinstance(source.prepared, PreparedSource)
    e = raw_embedding(source.crop).astype(np.float64)
    expected = e @ EMAP.astype(np.float64) / np.linalg.norm(e)
    np.testing.assert_allclose(source.prepared.tensor[0], expected, rtol=1e-3, atol=1e-4)
    swapper.swap(source, synthetic_crop())
    np.testing.assert_array_equal(model.calls[0]["source"], source.prepared.tensor)
    again, _ = build("inswapper_128", renormalize_latent=True)
    assert np.linalg.norm(again.prepare_source(synthetic_source()).prepared.tensor) == pytest.approx(1.0, abs=1e-5)


def test_read_emap_from_a_file_a_model_and_the_last_initializer(tmp_path):
    proto = swapper_model(128, [512], emap=EMAP)
    path = tmp_path / "inswapper_128.onnx"
    onnx.save(proto, str(path))
    np.testing.assert_array_equal(read_emap(path), EMAP)
    np.testing.assert_array_equal(read_emap(proto), EMAP)
    proto.graph.initializer[-1].name = "buff2fs"  # not named emap: the last one is taken
    np.testing.assert_array_equal(read_emap(proto), EMAP)
    with pytest.raises(ModelSignatureError, match=r"\(512, 512\)"):
        read_emap(swapper_model(128, [512]))  # last initializer is a scalar
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not an onnx file")
    with pytest.raises(ModelFormatError, match="bad.onnx"):
        read_emap(bad)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("hyperswap_1a_256", lambda e: e / np.linalg.norm(e)),
        ("simswap_256", lambda e: (e * 2 + 1) / np.linalg.norm(e * 2 + 1)),  # crossface converter, then L2
        ("ghost_2_256", lambda e: e * 2 + 1),  # crossface converter, raw
    ],
)
def test_embedding_sources(name, expected):
    swapper, _ = build(name)
    source = swapper.prepare_source(synthetic_source())
    assert source.prepared.tensor.shape == (1, 512)
    np.testing.assert_allclose(
        source.prepared.tensor[0], expected(raw_embedding(source.crop).astype(np.float64)), rtol=1e-3, atol=1e-4
    )


@pytest.mark.parametrize(
    "name, template, size", [("blendswap_256", "arcface_112_v2", 112), ("uniface_256", "ffhq_512", 256)]
)
def test_image_sources_are_rgb_crops_in_unit_range(name, template, size):
    swapper, _ = build(name)
    source = swapper.prepare_source(synthetic_source())
    crop, _ = warp_to_template(source.crop.pixels, points5(source.crop), template, size)
    assert source.prepared.tensor.shape == (1, 3, size, size)
    np.testing.assert_allclose(source.prepared.tensor[0], crop.transpose(2, 0, 1) / 255.0, atol=1e-6)


@pytest.mark.parametrize("name, weight", [("inswapper_128", 0.0), ("ghost_1_256", 1.0)])
def test_weight_mixes_in_each_targets_embedding(name, weight):
    swapper, model = build(name, weight=weight)
    source = swapper.prepare_source(synthetic_source())
    targets = [synthetic_crop(seed=1), synthetic_crop(seed=9)]
    swapper.swap_batch(source, targets)
    fed = model.calls[0]["source"]
    b = blend_factor(weight)
    for row, t in zip(fed, targets, strict=False):
        te = raw_embedding(t).astype(np.float64)
        if swapper.normalize_target_embedding:
            te = te / np.linalg.norm(te)
        np.testing.assert_allclose(row, source.prepared.tensor[0] * (1 - b) + te * b, rtol=1e-3, atol=1e-4)
    assert np.abs(fed[0] - fed[1]).max() > 1e-3


# -- batching and pixel boost -----------------------------------------------------
@pytest.mark.parametrize("name", ["inswapper_128", "hyperswap_1b_256", "blendswap_256"])
def test_two_faces_in_one_run_equal_two_single_runs(name):
    swapper, model = build(name, gain=0.8, offset=0.1)
    source = swapper.prepare_source(synthetic_source())
    targets = [synthetic_crop(seed=1), synthetic_crop(190, seed=4, degrees=-12.0)]
    together = swapper.swap_batch(source, targets)
    assert len(model.calls) == 1 and model.calls[0]["target"].shape[0] == 2
    singles = [swapper.swap(source, t) for t in targets]
    for a, b in zip(together, singles, strict=False):
        np.testing.assert_array_equal(a.face, b.face)
        np.testing.assert_array_equal(a.coverage, b.coverage)
    fixed, fixed_model = build(name, batch=1, gain=0.8, offset=0.1)
    looped = fixed.swap_batch(fixed.prepare_source(synthetic_source()), targets)
    assert len(fixed_model.calls) == 2 and all(c["target"].shape[0] == 1 for c in fixed_model.calls)
    for a, b in zip(together, looped, strict=False):
        np.testing.assert_array_equal(a.face, b.face)


def test_pixel_boost_runs_the_interleaved_tiles_as_one_batch():
    swapper, model = build("inswapper_128", pixel_boost=256)
    target = synthetic_crop(240, seed=2)
    out = swapper.swap(synthetic_source(), target)
    (call,) = model.calls
    aligned, _ = warp_to_template(target.pixels, points5(target), "arcface_128", 256)
    expected = tile(aligned, 2).transpose(0, 3, 1, 2) / 255.0
    np.testing.assert_allclose(call["target"], expected, atol=1e-6)
    diff = np.abs(out.face.astype(float) - target.pixels)[inside(out)]
    assert diff.mean() < 1.0
    fixed, fixed_model = build("inswapper_128", batch=1, pixel_boost=256)
    fixed_out = fixed.swap_batch(synthetic_source(), [target, target])
    assert len(fixed_model.calls) == 8
    np.testing.assert_array_equal(fixed_out[0].face, out.face)


def test_pixel_boost_keeps_more_detail_than_the_plain_model():
    target = synthetic_crop(256, seed=2)
    sharp = target.pixels.copy()
    sharp[::2] = 255 - sharp[::2]  # fine stripes a 128-px model cannot keep
    target = AlignedCrop(pixels=sharp, matrix=target.matrix, mesh=target.mesh, face_size=target.face_size)
    plain, _ = build("inswapper_128")
    boosted, _ = build("inswapper_128", pixel_boost=512)
    a, b = plain.swap(synthetic_source(), target), boosted.swap(synthetic_source(), target)
    region = inside(a) & inside(b)
    err = [np.abs(o.face.astype(float) - sharp)[region].mean() for o in (a, b)]
    assert err[1] < err[0] * 0.6


# -- bad models and options ---------------------------------------------------------
def test_signature_and_option_errors():
    emb = embedder()
    with pytest.raises(ModelSignatureError, match="named 'target'"):
        NEURAL_SWAPPERS["hyperswap_1a_256"].create(OrtModel(converter_model()), embedder=emb)
    with pytest.raises(ModelSignatureError, match=r"\[N, 3, 128, 128\]"):
        NEURAL_SWAPPERS["inswapper_128"].create(OrtModel(swapper_model(256, [512])), embedder=emb, emap=EMAP)
    with pytest.raises(ModelSignatureError, match=r"\[N, 512\]"):
        NEURAL_SWAPPERS["hyperswap_1a_256"].create(OrtModel(swapper_model(256, [256])), embedder=emb)
    with pytest.raises(ModelSignatureError, match=r"\[N, 3, 112, 112\]"):
        NEURAL_SWAPPERS["blendswap_256"].create(OrtModel(swapper_model(256, [3, 256, 256])))
    with pytest.raises(ModelSignatureError, match="emap"):
        NEURAL_SWAPPERS["inswapper_128"].create(OrtModel(swapper_model(128, [512])), embedder=emb, emap=np.eye(4))
    with pytest.raises(InvalidOptionError, match="embedder"):
        NEURAL_SWAPPERS["hyperswap_1a_256"].create(OrtModel(swapper_model(256, [512])))
    with pytest.raises(InvalidOptionError, match="multiple of the model size"):
        NEURAL_SWAPPERS["hyperswap_1a_256"].create(OrtModel(swapper_model(256, [512])), embedder=emb, pixel_boost=384)
    with pytest.raises(InvalidOptionError, match=r"\[0, 1\]"):
        NEURAL_SWAPPERS["hyperswap_1a_256"].create(OrtModel(swapper_model(256, [512])), embedder=emb, weight=1.5)
    # an unknown name: the registry's one error, whichever factory would have built it
    from faceweave.options import SwapOptions
    from faceweave.sessions import ModelSessions
    from faceweave.swappers import SwapperContext
    from faceweave.swappers.registry import create_swapper

    options = SwapOptions()
    with pytest.raises(InvalidOptionError, match="unknown swapper 'roop'; available: .*inswapper_128"):
        create_swapper("roop", SwapperContext(options=options, sessions=ModelSessions(options.runtime)))


# -- a real photo through the pipeline's own pieces -----------------------------
@pytest.fixture(scope="module")
def astronaut_face(astronaut):
    from faceweave.analysis import FaceAnalyser

    analyser = FaceAnalyser()
    faces = analyser.analyse(np.ascontiguousarray(astronaut), small_faces=False)
    assert faces, "the astronaut photo has a face"
    yield analyser, max(faces, key=lambda f: f.bbox.area)
    analyser.close()


@pytest.mark.parametrize("name, gain, offset", [("inswapper_128", 1.0, 0.0), ("hyperswap_1a_256", -1.0, 0.0)])
def test_full_swap_on_a_real_photo(astronaut, astronaut_face, name, gain, offset):
    """cut_crop -> neural swap -> the pipeline's composite and paste-back: the
    frame keeps its shape, an identity model leaves the face nearly as it was,
    an inverting one changes it, and nothing far from the face moves."""
    from faceweave.options import SwapOptions
    from faceweave.pipeline import FaceSwapper, cut_crop

    analyser, face = astronaut_face
    pixels = np.array(astronaut)
    fs = FaceSwapper(SwapOptions(), analyser=analyser)
    fs.swapper, _ = build(name, gain=gain, offset=offset)
    crop = cut_crop(pixels, face, face_size=fs.working_size(face))
    source = fs.swapper.prepare_source(SourceFace(index=0, path=None, face=face, crop=crop))
    out = fs.swap_many(pixels, [(face, source)])
    assert out.shape == pixels.shape and out.dtype == np.uint8
    box = face.bbox.scaled(2.2).clipped(pixels.shape[1], pixels.shape[0])
    far = np.ones(pixels.shape[:2], bool)
    far[int(box.y1) : int(np.ceil(box.y2)), int(box.x1) : int(np.ceil(box.x2))] = False
    np.testing.assert_array_equal(out[far], pixels[far])
    core = face.bbox.scaled(0.5)
    sl = (slice(int(core.y1), int(core.y2)), slice(int(core.x1), int(core.x2)))
    change = np.abs(out[sl].astype(float) - pixels[sl]).mean()
    if gain > 0:
        assert change < 4.0
    else:
        assert change > 15.0


# -- the swapper contract -----------------------------------------------------------
@pytest.mark.parametrize("name", ["mesh", *ALL])
def test_every_registered_swapper_declares_its_capabilities(name):
    """The pipeline reads ``adjusts_expression`` and ``batches`` instead of
    probing: every registered kind declares both, and has the protocol's methods."""
    from faceweave.swappers.mesh import MeshSwapper

    cls = MeshSwapper if name == "mesh" else NEURAL_SWAPPERS[name].cls
    assert isinstance(cls.adjusts_expression, bool) and isinstance(cls.batches, bool)
    for method in ("prepare", "prepare_source", "swap", "swap_batch", "close"):
        assert callable(getattr(cls, method))


def test_a_neural_swapper_refuses_an_expression_correction():
    from faceweave.geometry.expression import ExpressionCorrection

    swapper, _ = build("inswapper_128")
    assert not swapper.adjusts_expression and swapper.batches
    with pytest.raises(InvalidOptionError, match="expression"):
        swapper.swap(synthetic_source(), synthetic_crop(), correction=ExpressionCorrection())


def _crop_with(**changes):
    crop = synthetic_crop(64)
    values = {"pixels": crop.pixels, "matrix": crop.matrix, "mesh": crop.mesh, "face_size": crop.face_size}
    return {**values, **changes}


@pytest.mark.parametrize(
    "changes, message",
    [
        ({}, None),
        ({"pixels": np.zeros((64, 48, 3), np.uint8)}, "square"),
        ({"pixels": np.zeros((64, 64, 3), np.float32)}, "uint8"),
        ({"pixels": np.zeros((64, 64), np.uint8)}, r"shape \(None, None, 3\)"),
        ({"matrix": np.eye(3)}, r"shape \(2, 3\)"),
        ({"mesh": np.zeros((468, 3), np.float32)}, r"shape \(478, 3\)"),
        ({"mesh": np.zeros((478, 3), np.float64)}, "float32"),
        ({"face_size": 0.0}, "positive"),
    ],
)
def test_an_aligned_crop_checks_its_arrays(changes, message):
    if message is None:
        crop = AlignedCrop(**_crop_with())
        assert not crop.pixels.flags.writeable and not crop.mesh.flags.writeable
        return
    with pytest.raises(ValueError, match=message):
        AlignedCrop(**_crop_with(**changes))


def test_a_swap_output_checks_its_arrays_against_the_face():
    from faceweave.swappers import SwapOutput

    s = 32
    good = {
        "face": np.zeros((s, s, 3), np.uint8),
        "background": np.zeros((s, s, 3), np.uint8),
        "coverage": np.zeros((s, s), np.float32),
        "mesh": np.zeros((478, 3), np.float32),
        "changed": np.zeros((s, s), np.float32),
    }
    out = SwapOutput(**good)
    assert not out.face.flags.writeable and out.source_clean is None
    with pytest.raises(ValueError, match=r"coverage: expected shape \(32, 32\)"):
        SwapOutput(**{**good, "coverage": np.zeros((s, s + 1), np.float32)})
    with pytest.raises(ValueError, match="source clean"):
        SwapOutput(**good, source_clean=np.zeros((s, s), np.float64))
    with pytest.raises(ValueError, match="source clean map"):
        SourceFace(**{**vars(synthetic_source()), "clean": np.zeros((3, 3), np.float32)})
