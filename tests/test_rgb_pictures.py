"""Decoded pictures as RGB (faceweave/video/io/pictures.py): one kept swscale
context gives what PyAV's own per-picture conversion gives, HD pictures
that do not say their matrix read as BT.709 and full-range ones as full
range, across pictures of several sizes and kinds in one stream."""

from __future__ import annotations

import av
import numpy as np
import pytest

from faceweave.video.io.pictures import RgbPictures


def _picture(height: int, width: int, seed: int, *, colorspace: int, full_range: bool) -> av.VideoFrame:
    rng = np.random.default_rng(seed)
    planes = rng.integers(16, 236, (height * 3 // 2, width), dtype=np.uint8)
    picture = av.VideoFrame.from_ndarray(planes, format="yuv420p")
    picture.colorspace = colorspace
    picture.color_range = 2 if full_range else 1
    return picture


@pytest.mark.parametrize(
    ("height", "colorspace", "full_range", "options"),
    [
        (720, 2, False, {"src_colorspace": "ITU709"}),  # HD, matrix unspecified: BT.709
        (480, 2, False, {}),  # SD, unspecified: swscale's default (BT.601)
        (720, 1, False, {}),  # says BT.709
        (720, 5, True, {"src_color_range": "JPEG"}),  # full range
    ],
)
def test_pictures_read_as_players_read_them(height, colorspace, full_range, options):
    convert = RgbPictures()
    for seed in range(3):  # the kept context, picture after picture
        picture = _picture(height, 2 * (height // 2 + 8), seed, colorspace=colorspace, full_range=full_range)
        got = convert(picture)
        assert got.shape == (picture.height, picture.width, 3) and got.dtype == np.uint8
        np.testing.assert_array_equal(got, picture.to_ndarray(format="rgb24", **options))


def test_one_converter_follows_a_stream_that_changes_size_and_kind():
    convert = RgbPictures()
    kinds = [(720, 2, False), (360, 2, False), (720, 5, True), (720, 2, False)]
    for seed, (height, colorspace, full_range) in enumerate(kinds):
        picture = _picture(height, 640, seed, colorspace=colorspace, full_range=full_range)
        options = {"src_colorspace": "ITU709"} if colorspace == 2 and height >= 720 else {}
        options |= {"src_color_range": "JPEG"} if full_range else {}
        np.testing.assert_array_equal(convert(picture), picture.to_ndarray(format="rgb24", **options))
