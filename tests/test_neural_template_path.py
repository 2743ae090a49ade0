"""The neural path without double resampling, and the compositing choice.

A neural swapper's face goes from the frame straight onto the model's
template in one warp and back in one inverse warp; the source embedding is
ArcFace's own alignment of the original source photo; several source photos
are averaged (FaceFusion's way) unless asked otherwise; ``compositing``
chooses FaceFusion's masks and paste-back or faceweave's own.  Tiny ONNX
stand-ins with the real signatures (see neural_fixtures)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from tests.neural_fixtures import arcface_model, swapper_model

from faceweave.compositing.blend import paste_back
from faceweave.compositing.facefusion import occlusion_mask, paste_face, paste_mask, smooth_occlusion
from faceweave.crops import cut_crop
from faceweave.embedders.arcface import ArcFaceEmbedder, l2_normalize
from faceweave.options import SwapOptions
from faceweave.pipeline import FaceSwapper
from faceweave.provenance.stamp import Provenance
from faceweave.swappers.neural.base import NeuralSwapper, box_mask
from faceweave.swappers.neural.inswapper import inswapper_latent

pytestmark = pytest.mark.slow

UNMARKED = Provenance.new(watermark=False)
EMAP = np.random.default_rng(3).normal(0, 0.05, (512, 512)).astype(np.float32)
ARC_W = np.random.default_rng(4).normal(0, 1, (3, 512)).astype(np.float32)
TARGET = "single/astronaut_eileen_collins.png"  # a face of about 107 px
SOURCES = ("single/biden2.jpg", "single/paul_rudd.jpg", "single/happy_man.png")


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    """inswapper_128 that returns its target crop unchanged (identity), its
    ArcFace, and hyperswap_1a_256 (identity too), imported as a user would."""
    from faceweave.models import ModelStore, import_model

    folder = tmp_path_factory.mktemp("models")
    files = tmp_path_factory.mktemp("files")
    onnx.save(swapper_model(128, [512], emap=EMAP), files / "inswapper.onnx")
    onnx.save(arcface_model(ARC_W, input_name="input"), files / "arcface.onnx")
    store = ModelStore(folder)
    import_model(store, "inswapper_128", files / "inswapper.onnx")
    import_model(store, "arcface_w600k_r50", files / "arcface.onnx")
    return folder


def options(models_dir, **fields) -> SwapOptions:
    return SwapOptions.model_validate(
        {"swapper": "inswapper_128", "runtime": {"models_dir": str(models_dir)}, **fields}
    )


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 10.0 * np.log10(255.0**2 / max(mse, 1e-12))


def face_box(result):
    b = result.faces[result.swapped[0].target_index].bbox
    return slice(int(b.y1), int(b.y2)), slice(int(b.x1), int(b.x2))


def test_an_identity_swapper_reproduces_the_target_face_resampled_once(models_dir, faces_dir):
    """With a stand-in that returns its input face unchanged, the facefusion
    mode's frame differs from the target only by one warp onto the template
    (at the pixel-boost size, above the face's size) and one warp back; the
    old route through a working crop resampled twice each way."""
    with FaceSwapper(options(models_dir, compositing="facefusion", pixel_boost=512), provenance=UNMARKED) as swapper:
        result = swapper.swap([faces_dir / SOURCES[0]], faces_dir / TARGET)
        target = swapper.read(faces_dir / TARGET, role="target").pixels
        face = result.faces[result.swapped[0].target_index]
        crop = cut_crop(target, face, face_size=swapper.renderer.face_size(face))
        twice = swapper.swapper.swap_batch(swapper.load_sources([faces_dir / SOURCES[0]])[0], [crop])[0]
        old = paste_back(target, twice.face, twice.coverage, crop.matrix)
    box = face_box(result)
    once = psnr(result.image[box], target[box])
    assert once > 42.0
    assert once > psnr(old[box], target[box]) + 5.0
    assert np.array_equal(result.image[:20, :20], target[:20, :20])  # nothing far from the face changes


def test_faceweave_compositing_on_the_template_crop(models_dir, faces_dir):
    """``compositing="faceweave"``: the model's template crop is the working
    crop of faceweave's compositing; the identity stand-in's face comes back
    close to the target's and the rest of the picture is untouched."""
    with FaceSwapper(options(models_dir, compositing="faceweave", pixel_boost=512), provenance=UNMARKED) as swapper:
        result = swapper.swap([faces_dir / SOURCES[0]], faces_dir / TARGET)
        target = swapper.read(faces_dir / TARGET, role="target").pixels
    box = face_box(result)
    assert psnr(result.image[box], target[box]) > 38.0
    assert np.array_equal(result.image[:20, :20], target[:20, :20])


def test_the_source_embedding_is_arcface_on_the_original_photo(models_dir, faces_dir):
    """The prepared source's embedding is ArcFace's own alignment of the
    source photo (its five points in the photo, one warp), not of a crop."""
    with FaceSwapper(options(models_dir), provenance=UNMARKED) as swapper:
        source = swapper.load_sources([faces_dir / SOURCES[1]])[0]
        photo = swapper.read(faces_dir / SOURCES[1], role="source").pixels
        embedder = swapper.swapper.embedder
        assert isinstance(embedder, ArcFaceEmbedder)
        expected = embedder.embed_raw([(photo, source.face.kps5)])
        from_crop = embedder.embed_raw([(source.crop.pixels, source.crop.mesh[:, :2])])
    assert source.image is None  # the photo is not kept in the cache
    np.testing.assert_allclose(source.prepared.embedding, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(source.prepared.tensor, inswapper_latent(expected[0], EMAP), rtol=1e-4, atol=1e-5)
    assert not np.allclose(from_crop, expected, rtol=1e-4, atol=1e-4)  # the resampled crop gives another one


def test_several_sources_are_averaged_by_default(models_dir, faces_dir):
    """FaceFusion's average: the mean of the raw embeddings (inswapper's latent
    is made from it) and of the normalised ones; one source object for every
    face, so a frame's faces still share one inference."""
    paths = [faces_dir / p for p in SOURCES]
    with FaceSwapper(options(models_dir), provenance=UNMARKED) as swapper:
        sources = swapper.load_sources(paths)
        face = sources[0].face
        averaged = swapper.choose_source(sources, face)
        assert swapper.choose_source(sources, face) is averaged
    raws = np.stack([s.prepared.embedding[0] for s in sources])
    mean = raws.mean(axis=0)
    np.testing.assert_allclose(averaged.prepared.embedding[0], mean, rtol=1e-5, atol=1e-6)
    norm_mean = l2_normalize(raws).mean(axis=0)
    np.testing.assert_allclose(averaged.prepared.embedding_norm[0], norm_mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(averaged.prepared.tensor, inswapper_latent(mean, EMAP), rtol=1e-4, atol=1e-5)
    with FaceSwapper(options(models_dir, source_blend="pose"), provenance=UNMARKED) as swapper:
        sources = swapper.load_sources(paths)
        chosen = swapper.choose_source(sources, sources[2].face)
    assert any(chosen is s for s in sources)  # one of the photos, by pose


def test_averaging_by_family():
    """hyperswap takes the mean of the normalised embeddings as it is (not
    normalised again), as FaceFusion's average face gives it."""
    from tests.neural_fixtures import OrtModel
    from tests.neural_fixtures import source_face as synthetic_source

    from faceweave.swappers.neural import NEURAL_SWAPPERS

    emb = ArcFaceEmbedder(OrtModel(arcface_model(ARC_W)))
    hyper = NEURAL_SWAPPERS["hyperswap_1a_256"].create(OrtModel(swapper_model(256, [512])), embedder=emb)
    a = hyper.prepare_source(synthetic_source(5))
    b = hyper.prepare_source(synthetic_source(9))
    both = hyper.average_sources([a, b])
    expected = (a.prepared.embedding_norm + b.prepared.embedding_norm) / 2
    np.testing.assert_allclose(both.prepared.tensor, expected, rtol=1e-5, atol=1e-6)
    assert np.linalg.norm(both.prepared.tensor) < 1.0
    assert hyper.average_sources([a]) is a


def test_facefusion_paste_is_one_float_blend():
    """:func:`paste_face` mixes the float face in under the mask through one
    inverse warp and truncates once (as FaceFusion): with an identity matrix
    it is the blend, cut to whole levels."""
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
    face = rng.uniform(0, 255, (64, 64, 3)).astype(np.float32)
    mask = box_mask(64, blur=0.3)
    out = frame.copy()
    paste_face(frame, face, mask, np.eye(2, 3), out=out)
    expected = (frame * (1 - mask[..., None]) + face * mask[..., None]).astype(np.uint8)
    assert np.abs(out.astype(int) - expected.astype(int)).max() <= 1
    assert mask[0].max() < 0.15  # the box mask is low on the border
    assert np.abs(out[0].astype(int) - frame[0].astype(int)).max() <= 255 * mask[0].max() + 1


def test_facefusions():
    box = box_mask(100, blur=0.3)
    assert box[50, 50] == pytest.approx(1.0, abs=1e-3) and box[0, 50] < 0.15
    person = np.ones((100, 100), np.float32)
    person[:, :30] = 0.0
    hands = np.zeros((100, 100), np.float32)
    hands[70:, :] = 1.0
    occ = occlusion_mask(person, hands)
    assert occ is not None and occ[50, 60] == pytest.approx(1.0, abs=1e-3) and occ[50, 10] == 0.0 and occ[95, 60] == 0.0
    assert occlusion_mask(None, None) is None
    assert np.array_equal(smooth_occlusion(np.ones((20, 20))), np.ones((20, 20), np.float32))
    np.testing.assert_array_equal(paste_mask(box, [None, occ]), np.minimum(box, occ))


def test_compositing_option_and_the_classical_swapper(models_dir):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="'facefusion' is for the neural swappers"):
        SwapOptions(compositing="facefusion")
    assert SwapOptions(compositing="auto").neural_compositing() in ("facefusion", "faceweave")
    with pytest.raises(ValidationError, match="compositing"):
        SwapOptions.model_validate({"compositing": "gimp"})
    with FaceSwapper(options(models_dir)) as swapper:
        assert isinstance(swapper.swapper, NeuralSwapper)


def test_cli_and_service_carry_the_choices(models_dir, faces_dir, tmp_path):
    from tests.test_cli import assert_clean_error, faceweave

    from faceweave.service.jobspec import JobOptions

    src, tgt = faces_dir / SOURCES[0], faces_dir / TARGET
    out = tmp_path / "out.png"
    proc = faceweave("swap", "-s", src, "-t", tgt, "-o", out, "--compositing", "facefusion")
    assert_clean_error(proc, 2, "--compositing", "'facefusion' is for the neural swappers")
    proc = faceweave("swap", "-s", src, "-t", tgt, "-o", out, "--source-blend", "mean")
    assert_clean_error(proc, 2, "--source-blend", "'average' or 'pose'")
    assert not out.exists()
    proc = faceweave(
        "swap", "-s", src, "-s", faces_dir / SOURCES[1], "-t", tgt, "-o", out, "--swapper", "inswapper_128",
        "--models-dir", models_dir, "--compositing", "faceweave", "--source-blend", "pose",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert out.is_file()
    job = JobOptions(swapper="inswapper_128", compositing="facefusion", source_blend="pose")
    made = job.swap_options(kind="image", has_reference=False, max_pixels=10**7, video_working_size=192)
    assert (made.compositing, made.source_blend) == ("facefusion", "pose")
    assert JobOptions().swap_options(kind="image", has_reference=False, max_pixels=10**7, video_working_size=192) == (
        SwapOptions(max_pixels=10**7)
    )


def test_an_enhancer_in_facefusion_mode_pastes_under_facefusions_box():
    from tests.enhancer_fixtures import face_model

    from faceweave.enhancers import create_face_enhancer

    model = face_model(size=512, batch=1, op="add", value=0.2)
    plain = create_face_enhancer("gfpgan_1.4", model)
    facefusion = create_face_enhancer("gfpgan_1.4", model, facefusion=True)
    np.testing.assert_array_equal(facefusion.mask, box_mask(512, blur=0.3))
    assert not np.allclose(plain.mask, facefusion.mask)


def test_faceweave_compositing_reads_the_target_at_the_working_size(models_dir, faces_dir):
    """Where the face is smaller on the model's template than the working
    size, faceweave's compositing crop keeps the template's geometry at a
    larger side, cut once from the frame; the model's face is resized onto
    it in register (an identity stand-in's face matches the crop)."""
    from faceweave.crops import template_crop
    from faceweave.geometry.templates import template_points

    with FaceSwapper(options(models_dir, compositing="faceweave"), provenance=UNMARKED) as swapper:
        image = swapper.read(faces_dir / "single/sad_woman.png", role="target")
        faces, indices = swapper.targets.select(image, {})
        face = faces[indices[0]]
        source = swapper.load_sources([faces_dir / SOURCES[0]])[0]
        (swap,) = swapper.swapper.swap_frame(source, image.pixels, [face.kps5])
        crop, out = template_crop(image.pixels, face, swap, face_size=256)
        chosen = [(face, source)]
        old = swapper.renderer._batched(
            swapper.swapper, image.pixels, chosen, {}, [None], [None], profile=swapper.renderer.profile("photo")
        )
        new = swapper.renderer.render(
            swapper.swapper, image.pixels, chosen, {}, [None], profile=swapper.renderer.profile("photo")
        )
    side = crop.pixels.shape[0]
    assert side > 128 and crop.face_size == pytest.approx(256, rel=0.02)
    on_big = face.kps5 @ crop.matrix[:, :2].T + crop.matrix[:, 2]
    on_model = face.kps5 @ swap.matrix[:, :2].T + swap.matrix[:, 2]
    k = side / 128
    np.testing.assert_allclose(on_big, k * (on_model + 0.5) - 0.5, atol=1e-4)  # cv2.resize's pixel centres
    np.testing.assert_allclose(on_model, template_points("arcface_128", 128), atol=6.0)
    inner = slice(side // 4, 3 * side // 4)
    assert psnr(out.face[inner, inner], crop.pixels[inner, inner]) > 28.0
    box = slice(int(face.bbox.y1), int(face.bbox.y2)), slice(int(face.bbox.x1), int(face.bbox.x2))
    target = image.pixels[box]
    assert psnr(new[box], target) > psnr(old[box], target) - 1.0  # no worse than the working crop's route
