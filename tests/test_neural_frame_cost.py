"""The neural path's own per-frame work, made cheaper, against the
formulations it replaced: FaceFusion's paste-back in one four-channel warp
and one ``blendLinear``; the box mask made once per swapper; and frames
batched into one inference (:meth:`FaceRenderer.render_frames`)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from faceweave.compositing.facefusion import paste_area, paste_face
from faceweave.swappers.neural.base import box_mask, normalize_crops

TALK = "video/lp_d18_talking_face.mp4"


def paste_face_before(frame: np.ndarray, face: np.ndarray, mask: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """``paste_face`` as it was written before (two warps, the mix broadcast
    in NumPy, a uint8 face warped as uint8, truncated as FaceFusion's ``paste_back``)."""
    out = frame.copy()
    x1, y1, x2, y2 = paste_area(frame.shape, int(face.shape[0]), matrix)
    if x2 <= x1 or y2 <= y1:
        return out
    inv = np.asarray(cv2.invertAffineTransform(np.asarray(matrix, np.float64)), np.float64)
    inv[:, 2] -= np.array([x1, y1], np.float64)
    size = (x2 - x1, y2 - y1)
    m = cv2.warpAffine(np.ascontiguousarray(mask, np.float32), inv, size, flags=cv2.INTER_LINEAR)
    m = np.clip(m, 0.0, 1.0)[..., None]
    back = cv2.warpAffine(
        np.ascontiguousarray(face, np.uint8 if face.dtype == np.uint8 else np.float32),
        inv,
        size,
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_REPLICATE,
    )
    region = frame[y1:y2, x1:x2].astype(np.float32)
    out[y1:y2, x1:x2] = np.clip(region * (1.0 - m) + back * m, 0, 255).astype(np.uint8)
    return out


def similarity(scale: float, degrees: float, shift: tuple[float, float]) -> np.ndarray:
    """A frame -> crop similarity ``(2, 3)``."""
    a = np.deg2rad(degrees)
    c, s = scale * np.cos(a), scale * np.sin(a)
    return np.array([[c, -s, shift[0]], [s, c, shift[1]]], np.float64)


@pytest.mark.parametrize(
    ("side", "scale", "degrees", "shift", "dtype"),
    [
        (128, 0.3, 0.0, (-60.0, -20.0), np.float32),  # a large face, upright
        (128, 0.37, 17.0, (-70.0, -5.0), np.float32),  # tilted
        (128, 0.5, -40.0, (10.0, 30.0), np.float32),  # tilted, half off the frame's top left
        (256, 1.3, 5.0, (-150.0, -40.0), np.float32),  # a small face: the crop larger than its region
        (128, 0.3, 90.0, (60.0, -70.0), np.uint8),  # a uint8 face, on its side
        (128, 0.3, 0.0, (200.0, 200.0), np.float32),  # the crop off the frame: nothing pasted
        (128, 0.18, 12.0, (-60.0, -10.0), np.float32),  # a 720p face: its footprint in several strips
    ],
)
def test_paste_face_matches_the_numpy_formulation(side, scale, degrees, shift, dtype):
    rng = np.random.default_rng(side + int(degrees))
    frame = rng.integers(0, 256, (720, 1280, 3) if scale < 0.2 else (240, 320, 3), dtype=np.uint8)
    face = rng.uniform(0, 255, (side, side, 3)).astype(dtype)
    mask = np.minimum(box_mask(side, blur=0.3), rng.uniform(0.0, 1.2, (side, side)).astype(np.float32))
    matrix = similarity(scale, degrees, shift)
    out = frame.copy()
    paste_face(frame, face, mask, matrix, out=out)
    before = paste_face_before(frame, face, mask, matrix)
    diff = np.abs(out.astype(int) - before.astype(int))
    assert diff.max() <= 1
    assert np.count_nonzero(diff) <= diff.size // 10_000  # the last bit of a coordinate, at most


def test_paste_face_writes_into_the_frame_itself():
    rng = np.random.default_rng(7)
    frame = rng.integers(0, 256, (200, 200, 3), dtype=np.uint8)
    face = rng.uniform(0, 255, (128, 128, 3)).astype(np.float32)
    mask = box_mask(128)
    matrix = similarity(0.8, 10.0, (-20.0, -15.0))
    expected = paste_face_before(frame, face, mask, matrix)
    paste_face(frame, face, mask, matrix, out=frame)
    assert np.abs(frame.astype(int) - expected.astype(int)).max() <= 1


def normalize_before(crops: np.ndarray, mean, std) -> np.ndarray:
    """``normalize_crops`` as it was written before."""
    x = crops.astype(np.float32) / 255.0
    x = (x - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2), dtype=np.float32)


@pytest.mark.parametrize(
    ("mean", "std"),
    [((0.0, 0.0, 0.0), (1.0, 1.0, 1.0)), ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)), ((0.5,) * 3, (0.5,) * 3)],
)
def test_normalize_crops_gives_the_same_bits(mean, std):
    crops = np.random.default_rng(1).integers(0, 256, (3, 32, 32, 3), dtype=np.uint8)
    got = normalize_crops(crops, mean, std)
    assert got.dtype == np.float32 and got.flags.c_contiguous
    np.testing.assert_array_equal(got, normalize_before(crops, mean, std))


# -- faces of several frames in one inference ---------------------------------


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    """inswapper_128 as ``1 - target`` with a dynamic batch and one with a
    batch of 1 (folders of their own), each with its ArcFace."""
    import onnx
    from tests.neural_fixtures import arcface_model, swapper_model

    from faceweave.models import ModelStore, import_model

    folders = {}
    for batch in ("N", 1):
        folder = tmp_path_factory.mktemp(f"models_{batch}")
        files = tmp_path_factory.mktemp(f"files_{batch}")
        rng = np.random.default_rng(0)
        onnx.save(
            swapper_model(128, [512], batch=batch, gain=-1.0, offset=1.0, emap=np.eye(512)), files / "inswapper.onnx"
        )
        onnx.save(arcface_model(rng.normal(size=(3, 512)), input_name="input"), files / "arcface.onnx")
        store = ModelStore(folder)
        import_model(store, "inswapper_128", files / "inswapper.onnx")
        import_model(store, "arcface_w600k_r50", files / "arcface.onnx")
        folders[batch] = folder
    return folders


def neural(models_dir, compositing: str, batch: str | int = "N"):
    from faceweave.options import SwapOptions
    from faceweave.pipeline import FaceSwapper
    from faceweave.provenance.stamp import Provenance

    options = SwapOptions.model_validate(
        {
            "swapper": "inswapper_128",
            "compositing": compositing,
            "selection": {"mode": "many"},
            "runtime": {"models_dir": str(models_dir[batch])},
        }
    )
    return FaceSwapper(options, provenance=Provenance.new(watermark=False))


def counted(model) -> list[int]:
    """The batch of every ``run`` of ``model`` from now on."""
    batches: list[int] = []
    real = model.run

    def run(feeds):
        batches.append(len(feeds["target"]))
        return real(feeds)

    model.run = run
    return batches


def three_frames(swapper, faces_dir):
    """Two people, the same two a little darker, and a frame without a face to swap."""
    from faceweave.render import FrameFaces
    from faceweave.types import Image

    source = swapper.load_sources([faces_dir / "single/biden2.jpg"])[0]
    pixels = swapper.read(faces_dir / "group/fr_two_people.jpg", role="target").pixels
    faces, indices = swapper.targets.select(Image(pixels=pixels), {})
    chosen = tuple((faces[i], source) for i in indices)
    darker = (pixels * 0.8).astype(np.uint8)
    return [FrameFaces(pixels, chosen), FrameFaces(darker, chosen[::-1]), FrameFaces(pixels[:200].copy(), ())]


@pytest.mark.slow
@pytest.mark.parametrize("compositing", ["facefusion", "faceweave"])
def test_faces_of_several_frames_in_one_inference_give_the_same_frames(models_dir, faces_dir, compositing):
    with neural(models_dir, compositing) as swapper:
        frames = three_frames(swapper, faces_dir)
        assert len(frames[0].chosen) == 2 and swapper.batches_frames
        batches = counted(swapper.swapper.model)
        one_by_one = [swapper.swap_many(f.pixels, f.chosen, colours=f.colours, plans=f.plans) for f in frames]
        assert batches == [2, 2]  # one inference per frame with faces
        together = swapper.swap_frames(frames)
        assert batches[2:] == [4]  # the faces of both frames in one
    assert len(together) == 3
    for alone, batched in zip(one_by_one, together, strict=True):
        np.testing.assert_array_equal(batched, alone)
    assert not np.array_equal(together[0], frames[0].pixels)  # the faces were swapped
    np.testing.assert_array_equal(together[2], frames[2].pixels)  # no face: the frame as it was


@pytest.mark.slow
def test_a_fixed_batch_of_one_renders_frame_by_frame(models_dir, faces_dir):
    with neural(models_dir, "facefusion", batch=1) as swapper:
        frames = three_frames(swapper, faces_dir)
        assert not swapper.batches_frames
        batches = counted(swapper.swapper.model)
        together = swapper.swap_frames(frames)
        one_by_one = [swapper.swap_many(f.pixels, f.chosen) for f in frames]
    assert batches == [1] * 8  # the model takes one image per call: 2 faces x 2 frames, twice
    for alone, batched in zip(one_by_one, together, strict=True):
        np.testing.assert_array_equal(batched, alone)


@pytest.mark.slow
def test_face_plans_are_made_and_reused_within_a_batch(models_dir, faces_dir):
    """faceweave's compositing with a track's plan made by the first frame
    of a batch and reused by the next: the frames of a render one by one."""
    from dataclasses import replace

    from faceweave.compositing.plans import PlanSlot, PlanUse

    def planned(frames):
        slots = [PlanSlot(0), PlanSlot(0)]
        return [
            replace(frames[0], plans=tuple(PlanUse(s, makes=True) for s in slots)),
            replace(frames[1], chosen=frames[0].chosen, plans=tuple(PlanUse(s, makes=False) for s in slots)),
        ]

    with neural(models_dir, "faceweave") as swapper:
        frames = three_frames(swapper, faces_dir)
        one_by_one = [swapper.swap_many(f.pixels, f.chosen, plans=f.plans) for f in planned(frames)]
        together = swapper.swap_frames(planned(frames))
    for alone, batched in zip(one_by_one, together, strict=True):
        np.testing.assert_array_equal(batched, alone)


def test_frame_faces_check_their_lengths():
    from faceweave.render import FrameFaces

    pixels = np.zeros((8, 8, 3), np.uint8)
    assert FrameFaces(pixels, ()).plans == ()
    with pytest.raises(ValueError, match="2 faces but 1 colours"):
        FrameFaces(pixels, ((None, None), (None, None)), colours=(None,))  # type: ignore[arg-type]


# -- the stream's batches of frames ---------------------------------------------


class _Frames:
    """``n`` tiny frames, frame ``i`` filled with ``i``."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        from faceweave.video.io import VideoFrame

        for i in range(self.n):
            yield VideoFrame(index=i, source_index=i, time=i / 25, pixels=np.full((4, 4, 3), i, np.uint8))

    def close(self) -> None:
        pass


class _BatchWork:
    """Frames whose index is a multiple of ``skip`` pass through untouched;
    the others become ``255 - pixels``, rendered in batches (recorded), the
    batch of frame ``fail`` raising."""

    def __init__(self, *, skip: int = 0, fail: int | None = None) -> None:
        self.skip, self.fail = skip, fail
        self.batches: list[list[int]] = []

    def ahead(self, frame):
        return None

    def plan(self, frame, ahead):
        return None if self.skip and frame.index % self.skip == 0 else frame.index

    def render(self, frame, plan):
        return self.render_batch([(frame, plan)])[0]

    def render_batch(self, frames):
        self.batches.append([plan for _, plan in frames])
        if self.fail in self.batches[-1]:
            raise RuntimeError(f"frame {self.fail}")
        return [255 - frame.pixels for frame, _ in frames]


def run_stream(work, frames: int, **kwargs) -> list[int]:
    """The first pixel of every frame written, in order."""
    from contextlib import contextmanager

    from faceweave.video.stream import FrameStream

    written: list[int] = []

    class Sink:
        def write(self, pixels, time=None):
            written.append(int(pixels[0, 0, 0]))

    @contextmanager
    def open_sink():
        yield Sink()

    assert FrameStream(_Frames(frames), open_sink, work, **kwargs).run() == frames
    return written


@pytest.mark.parametrize(
    ("frames", "batch", "skip", "expected_batches"),
    [
        (10, 4, 0, [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]),  # the end renders what waits
        (10, 1, 0, [[i] for i in range(10)]),
        (9, 4, 5, [[1, 2, 3, 4], [6, 7, 8]]),  # frame 5 passes through: nothing waited before it
        (9, 3, 4, [[1, 2, 3], [5, 6, 7]]),
        (7, 8, 3, [[1, 2], [4, 5]]),  # a batch larger than the frames between the untouched ones
    ],
)
def test_batches_of_frames_keep_their_order(frames, batch, skip, expected_batches):
    work = _BatchWork(skip=skip)
    written = run_stream(work, frames, batch=batch, queue_size=8, workers=2)
    untouched = {i for i in range(frames) if skip and i % skip == 0}
    assert written == [i if i in untouched else 255 - i for i in range(frames)]
    assert sorted(work.batches) == expected_batches


def test_an_error_in_a_batch_is_raised_from_the_run():
    with pytest.raises(RuntimeError, match="frame 6"):
        run_stream(_BatchWork(fail=6), 40, batch=4, queue_size=4)


@pytest.mark.parametrize(
    ("work", "batch", "queue_size", "message"),
    [
        (_BatchWork(), 0, 8, "from 1 to the queue size 8; got 0"),
        (_BatchWork(), 9, 8, "from 1 to the queue size 8; got 9"),
        (object(), 2, 8, "needs work that renders batches"),
    ],
)
def test_a_batch_of_frames_is_checked(work, batch, queue_size, message):
    from faceweave.errors import InvalidOptionError
    from faceweave.video.stream import FrameStream

    with pytest.raises(InvalidOptionError, match=message):
        FrameStream(_Frames(1), lambda: None, work, batch=batch, queue_size=queue_size)  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.parametrize("compositing", ["facefusion", "faceweave"])
def test_a_video_in_batches_of_frames_gives_the_frames_of_one_by_one(models_dir, faces_dir, tmp_path, compositing):
    """``VideoOptions.neural_batch``: the faces of four frames in one
    inference, the video's frames the same as one frame at a time (PNG
    frames: no encoder in the comparison), in order; the face plans of
    faceweave's compositing made and reused across the batches."""
    from faceweave.provenance.stamp import Provenance
    from faceweave.video.pipeline import VideoOptions, VideoSwapper

    outs, runs = [], []
    with neural(models_dir, compositing) as swapper:
        batches = counted(swapper.swapper.model)
        for batch in (1, 4):
            out = tmp_path / f"frames_{batch}"
            options = VideoOptions(
                start=1.0, end=1.4, neural_batch=batch, audio=False, provenance=Provenance.new(watermark=False)
            )
            VideoSwapper(swapper).swap_video([faces_dir / "single/biden2.jpg"], faces_dir / TALK, out, options=options)
            outs.append(sorted(out.iterdir()))
            runs.append(list(batches))
            batches.clear()
    assert len(outs[0]) == len(outs[1]) >= 10
    assert set(runs[0]) == {1} and max(runs[1]) == 4 and sum(runs[1]) == sum(runs[0])
    for a, b in zip(*outs, strict=True):
        assert a.name == b.name and a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, 4),  # the default: 4 frames, a queue of 8
        ({"queue_size": 2}, 2),  # the default in a shorter queue
        ({"neural_batch": 8}, 8),
        ({"neural_batch": 1, "queue_size": 1}, 1),
        ({"neural_batch": 0}, "from 1 to queue_size \\(8\\); got 0"),
        ({"neural_batch": 4, "queue_size": 2}, "from 1 to queue_size \\(2\\); got 4"),
    ],
)
def test_video_options_check_the_batch_of_frames(fields, expected):
    from faceweave.errors import InvalidOptionError
    from faceweave.video.pipeline import VideoOptions

    if isinstance(expected, int):
        assert VideoOptions(**fields).frames_per_inference == expected
    else:
        with pytest.raises(InvalidOptionError, match=expected):
            VideoOptions(**fields)
