"""A live frame on its way to the outputs (faceweave.live.outputs.OutgoingFrame):
marked once for all the outputs, in the form each takes, the encoders' on the
4:2:0 planes' Y plane as the video writer marks them."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from skimage.data import astronaut

from faceweave.live.outputs import OutgoingFrame
from faceweave.provenance.stamp import LazyFrameMarker, Provenance, watermarker
from faceweave.video.io.sinks import rgb_to_i420


class CountingMarker:
    """A :class:`LazyFrameMarker` that counts its marks."""

    def __init__(self, provenance: Provenance) -> None:
        self.inner, self.rgb, self.luma = LazyFrameMarker(provenance), 0, 0

    def mark(self, pixels: np.ndarray) -> np.ndarray:
        self.rgb += 1
        return self.inner.mark(pixels)

    def mark_luma(self, luma: np.ndarray) -> None:
        self.luma += 1
        self.inner.mark_luma(luma)


@pytest.fixture(scope="module")
def picture() -> np.ndarray:
    return np.ascontiguousarray(cv2.resize(astronaut(), (640, 360), interpolation=cv2.INTER_AREA))


def test_the_encoders_planes_are_marked_on_y_as_the_video_writer_marks_them(picture):
    provenance = Provenance.new()
    frame = OutgoingFrame(picture, 0.5, LazyFrameMarker(provenance))
    planes = frame.i420(bt709=False)
    want = rgb_to_i420(picture, bt709=False)
    LazyFrameMarker(provenance).mark_luma(want[: picture.shape[0]])
    np.testing.assert_array_equal(planes, want)
    assert not np.array_equal(planes, rgb_to_i420(picture, bt709=False))  # a mark was made
    reading = watermarker(provenance).detect(planes[: picture.shape[0]])
    assert reading.found and reading.payload == provenance.payload


def test_each_form_is_made_once_for_every_output_that_takes_it(picture):
    marker = CountingMarker(Provenance.new())
    frame = OutgoingFrame(picture, 0.0, marker)  # type: ignore[arg-type]
    planes = frame.i420(bt709=True)
    assert frame.i420(bt709=True) is planes and (marker.rgb, marker.luma) == (0, 1)  # no RGB mark for encoders
    assert frame.rgb is frame.rgb and (marker.rgb, marker.luma) == (1, 1)
    frame.i420(bt709=False)  # the other matrix: planes of its own
    assert marker.luma == 2


def test_the_matrices_differ_and_follow_the_encoders_tags(picture):
    frame = OutgoingFrame(picture, 0.0)
    np.testing.assert_array_equal(frame.i420(bt709=True), rgb_to_i420(picture, bt709=True))
    np.testing.assert_array_equal(frame.i420(bt709=False), rgb_to_i420(picture, bt709=False))
    assert not np.array_equal(frame.i420(bt709=True), frame.i420(bt709=False))
    assert frame.rgb is picture  # no watermark: the frame as rendered


def test_a_frame_of_odd_sides_is_marked_in_rgb_then_padded(picture):
    odd = np.ascontiguousarray(picture[:101, :87])
    provenance = Provenance.new()
    frame = OutgoingFrame(odd, 0.0, LazyFrameMarker(provenance))
    planes = frame.i420(bt709=False)
    marked = LazyFrameMarker(provenance).mark(odd)
    want = rgb_to_i420(np.pad(marked, ((0, 1), (0, 1), (0, 0)), mode="edge"), bt709=False)
    assert planes.shape == (102 * 3 // 2, 88)
    np.testing.assert_array_equal(planes, want)
    np.testing.assert_array_equal(frame.rgb, marked)
