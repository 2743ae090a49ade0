"""The swapper entries added with the catalog work: hififace_unofficial_256
with crossface_hififace, and hyperswap's own ``mask`` output (ignored by
default, as FaceFusion does; combined with the box mask on request)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from tests.neural_fixtures import OrtModel, arcface_model, converter_model, face_crop, source_face, swapper_model

from faceweave.embedders import ArcFaceEmbedder, EmbeddingConverter
from faceweave.errors import InvalidOptionError, ModelSignatureError
from faceweave.geometry.templates import points5, warp_to_template
from faceweave.swappers.neural import NEURAL_SWAPPERS
from faceweave.swappers.neural.base import box_mask, model_mask

W = np.random.default_rng(3).normal(0, 1, (3, 512)).astype(np.float32)


def _embedder() -> ArcFaceEmbedder:
    return ArcFaceEmbedder(OrtModel(arcface_model(W)))


def _raw_embedding(crop) -> np.ndarray:
    aligned, _ = warp_to_template(crop.pixels, points5(crop), "arcface_112_v2", 112)
    return ((aligned.astype(np.float64) - 127.5) / 127.5).mean(axis=(0, 1)) @ W.astype(np.float64)


# -- hififace --------------------------------------------------------------------


def _hififace(**kwargs):
    model = OrtModel(swapper_model(256, [512]))
    converter = EmbeddingConverter(OrtModel(converter_model(scale=2.0, shift=1.0)), name="crossface_hififace")
    kwargs.setdefault("converter", converter)
    return NEURAL_SWAPPERS["hififace_unofficial_256"].create(model, embedder=_embedder(), **kwargs), model


def test_hififace_source_is_the_converted_then_normalised_embedding():
    swapper, model = _hififace()
    source = swapper.prepare_source(source_face())
    converted = _raw_embedding(source.crop) * 2 + 1
    np.testing.assert_allclose(source.prepared.tensor[0], converted / np.linalg.norm(converted), rtol=1e-3, atol=1e-4)
    target = face_crop()
    swapper.swap(source, target)
    aligned, _ = warp_to_template(target.pixels, points5(target), "mtcnn_512", 256)
    np.testing.assert_allclose(model.calls[0]["target"][0, 1], aligned[..., 1] / 127.5 - 1.0, atol=1e-5)


def test_hififace_output_is_denormalised_like_facefusions():
    swapper, _ = _hififace()
    target = face_crop()
    out = swapper.swap(source_face(), target)
    inside = out.coverage > 0.99
    assert inside.mean() > 0.1
    assert np.abs(out.face.astype(float) - target.pixels.astype(float))[inside].mean() < 1.5


def test_hififace_refuses_to_run_without_its_converter():
    with pytest.raises(InvalidOptionError, match="crossface_hififace"):
        _hififace(converter=None)


# -- hyperswap's mask --------------------------------------------------------------


def _hyperswap(**kwargs):
    """A stand-in whose ``mask`` output is the mean of the normalised target
    over channels (``[-1, 1]``: clipping matters) and whose face is the target."""
    model = OrtModel(swapper_model(256, [512], mask_output=True, source_first=True))
    return NEURAL_SWAPPERS["hyperswap_1a_256"].create(model, embedder=_embedder(), **kwargs), model


def _hand_coverage(target, *, boost: int = 1) -> np.ndarray:
    """The box mask times the model mask (clipped, minimum), warped back by hand."""
    side = 256 * boost
    aligned, m = warp_to_template(target.pixels, points5(target), "arcface_128", side)
    normalised = aligned.astype(np.float32) / 127.5 - 1.0
    mask = np.minimum(box_mask(side), np.clip(normalised.mean(axis=2), 0.0, 1.0))
    return np.clip(cv2.warpAffine(mask, cv2.invertAffineTransform(m), target.size), 0.0, 1.0)


def test_hyperswap_ignores_its_mask_by_default_as_facefusion_does():
    swapper, _ = _hyperswap()
    target = face_crop()
    out = swapper.swap(source_face(), target)
    _, m = warp_to_template(target.pixels, points5(target), "arcface_128", 256)
    plain = np.clip(cv2.warpAffine(box_mask(256), cv2.invertAffineTransform(m), target.size), 0.0, 1.0)
    np.testing.assert_allclose(out.coverage, plain, atol=1e-5)


@pytest.mark.parametrize("boost", [1, 2])
def test_hyperswap_model_mask_is_clipped_and_combined_with_the_box(boost):
    swapper, _ = _hyperswap(use_model_mask=True, pixel_boost=256 * boost)
    target = face_crop()
    out = swapper.swap(source_face(), target)
    np.testing.assert_allclose(out.coverage, _hand_coverage(target, boost=boost), atol=2e-3)
    plain, _ = _hyperswap(pixel_boost=256 * boost)
    box_only = plain.swap(source_face(), target).coverage
    assert np.all(out.coverage <= box_only + 1e-5)  # the minimum of both masks
    assert (out.coverage < box_only - 0.1).mean() > 0.05  # and the model's mask shows


def test_hyperswap_model_mask_needs_the_mask_output():
    model = OrtModel(swapper_model(256, [512]))
    with pytest.raises(ModelSignatureError, match="'mask'"):
        NEURAL_SWAPPERS["hyperswap_1a_256"].create(model, embedder=_embedder(), use_model_mask=True)


@pytest.mark.parametrize(
    "values, expected",
    [
        (np.full((1, 1, 4, 4), 2.0), np.ones((1, 8, 8, 1))),
        (np.full((2, 8, 8), -1.0), np.zeros((2, 8, 8, 1))),
        (np.full((1, 1, 8, 8), 0.25), np.full((1, 8, 8, 1), 0.25)),
        (np.zeros((1, 3, 8, 8)), ModelSignatureError),
    ],
)
def test_model_mask_shapes_and_range(values, expected):
    if isinstance(expected, type):
        with pytest.raises(expected, match=r"\[N, 1, H, W\]"):
            model_mask(values, 8)
        return
    np.testing.assert_allclose(model_mask(values, 8), expected)
