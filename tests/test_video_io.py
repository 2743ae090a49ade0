"""Video input/output: probing, streamed decoding, encoding, audio, and clean failures."""

from __future__ import annotations

import itertools
import math
import zipfile
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
from PIL import Image as PILImage

from faceweave.errors import (
    FaceweaveError,
    ImageTooLargeError,
    InputError,
    InvalidOptionError,
    OutputError,
    UnreadableFileError,
    UnsupportedFormatError,
)
from faceweave.video.io import (
    OUTPUT_FORMATS,
    VideoInfo,
    VideoReader,
    VideoWriter,
    check_video_output,
    parse_trim,
    probe_output,
    probe_video,
)

HAMILTON = "short_hamilton_clip.mp4"  # 640x360, 29.97 fps (2997/100), no audio
TALKING = "lp_d18_talking_face.mp4"  # 480x480, 30 fps, AAC
PEDESTRIANS = "fn_pedestrians_1080p.mp4"  # 1920x1080, 25 fps, AAC


@pytest.fixture(scope="session")
def videos(faces_dir: Path) -> Path:
    folder = faces_dir / "video"
    if not (folder / TALKING).is_file():
        pytest.skip(f"test videos not found in {folder}")
    return folder


def _info(width: int = 32, height: int = 24, fps: Fraction = Fraction(30000, 1001)) -> VideoInfo:
    """A made-up input description for writing synthetic frames."""
    return VideoInfo(
        path="synthetic",
        width=width,
        height=height,
        fps=fps,
        time_base=1 / fps,
        frame_count=None,
        duration=None,
        rotation=0,
        codec="h264",
        pixel_aspect=Fraction(1),
        has_audio=False,
        audio_codec=None,
    )


def _gradient(height: int, width: int, shift: int = 0) -> np.ndarray:
    y, x = np.mgrid[0:height, 0:width]
    return np.dstack([(x * 7 + shift) % 256, (y * 5) % 256, ((x + y) * 3) % 256]).astype(np.uint8)


def _remux(source: Path, target: Path, *, kinds: tuple[str, ...], options: dict | None = None) -> Path:
    """Copy the streams of ``kinds`` ("video", "audio") from ``source`` into ``target``."""
    with av.open(str(source)) as src, av.open(str(target), "w", options=options or {}) as out:
        streams = [s for s in src.streams if s.type in kinds]
        copies = {s.index: out.add_stream_from_template(s) for s in streams}
        for packet in src.demux(streams):
            if packet.dts is not None:
                packet.stream = copies[packet.stream_index]
                out.mux(packet)
    return target


def _decoded(path: Path) -> tuple[list[float], list[np.ndarray]]:
    """Frame times and RGB pixels, decoded with plain PyAV (independent of the reader)."""
    with av.open(str(path)) as container:
        frames = [(f.time, f.to_ndarray(format="rgb24")) for f in container.decode(video=0)]
    return [t for t, _ in frames], [p for _, p in frames]


def _audio_seconds(path: Path) -> float:
    with av.open(str(path)) as container:
        return sum(f.samples / f.sample_rate for f in container.decode(audio=0))


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# ------------------------------------------------------------------ trim

TRIMS = [
    ("00:00:05-00:00:20", (5.0, 20.0)),
    ("5-20", (5.0, 20.0)),
    ("5.5-", (5.5, None)),
    ("1:02.5-1:10", (62.5, 70.0)),
    (" 0.5 - 1.5 ", (0.5, 1.5)),
    ("-20", (0.0, 20.0)),
    ("1:00:00-1:00:01.25", (3600.0, 3601.25)),
    ("5", InvalidOptionError),
    ("a-b", InvalidOptionError),
    ("20-5", InvalidOptionError),
    ("5-5", InvalidOptionError),
    ("1:70-2:00", InvalidOptionError),
    ("5-20-30", InvalidOptionError),
    ("-", InvalidOptionError),
    ("", InvalidOptionError),
]


@pytest.mark.parametrize("text, expected", TRIMS)
def test_parse_trim(text, expected):
    if isinstance(expected, type):
        with pytest.raises(expected, match="--trim"):
            parse_trim(text)
    else:
        assert parse_trim(text) == expected


# ------------------------------------------------------------ output paths

OUTPUTS = [
    ("out.mp4", "mp4"),
    ("out.M4V", "mp4"),
    ("out.mov", "mov"),
    ("out.mkv", "mkv"),
    ("out.webm", "webm"),
    ("out.gif", "gif"),
    ("frames.zip", "png_zip"),
    ("frames", "png_dir"),
    ("frames.d/", "png_dir"),
    ("out.avi", InvalidOptionError),
    ("out.png", InvalidOptionError),
    ("run.v2", InvalidOptionError),
]


@pytest.mark.parametrize("name, expected", OUTPUTS)
def test_check_video_output(tmp_path, name, expected):
    path = str(tmp_path / name) + ("/" if name.endswith("/") else "")
    if isinstance(expected, type):
        with pytest.raises(expected, match=r"accepted: \.mp4, \.m4v, \.mov, \.mkv, \.webm, \.gif, \.zip"):
            check_video_output(path)
    else:
        assert check_video_output(path) == expected


def test_check_video_output_refuses_used_folders(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "old.png").write_bytes(b"x")
    (tmp_path / "plainfile").write_bytes(b"x")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidOptionError, match="not empty"):
        check_video_output(tmp_path / "full")
    with pytest.raises(InvalidOptionError, match="is a file"):
        check_video_output(tmp_path / "plainfile")
    assert check_video_output(tmp_path / "empty") == "png_dir"
    assert set(OUTPUT_FORMATS) >= {".mp4", ".m4v", ".mov", ".mkv", ".webm", ".gif", ".zip"}


# ------------------------------------------------------------------ probing

CLIPS = [
    # name, width, height, fps, frames, duration, has audio
    (HAMILTON, 640, 360, Fraction(2997, 100), 275, 9.176, False),
    (TALKING, 480, 480, Fraction(30), 216, 7.2, True),
    (PEDESTRIANS, 1920, 1080, Fraction(25), 105, 4.2, True),
]


@pytest.mark.parametrize("name, width, height, fps, frames, duration, audio", CLIPS)
def test_probe_real_clips(videos, name, width, height, fps, frames, duration, audio):
    info = probe_video(videos / name)
    assert (info.width, info.height, info.fps, info.frame_count) == (width, height, fps, frames)
    assert info.duration == pytest.approx(duration, abs=0.01)
    assert (info.rotation, info.codec, info.pixel_aspect) == (0, "h264", 1)
    assert (info.has_audio, info.audio_codec) == (audio, "aac" if audio else None)
    assert isinstance(info.fps, Fraction) and isinstance(info.time_base, Fraction)


@pytest.fixture
def bad_inputs(tmp_path, videos) -> Path:
    """Files that are not videos faceweave reads."""
    (tmp_path / "notes.txt").write_text("not a video\n" * 40)
    (tmp_path / "empty.mp4").write_bytes(b"")
    (tmp_path / "noise.mp4").write_bytes(np.random.default_rng(0).integers(0, 256, 4096, np.uint8).tobytes())
    PILImage.fromarray(_gradient(24, 32)).save(tmp_path / "photo.png")
    PILImage.fromarray(_gradient(24, 32)).save(tmp_path / "photo.mp4", format="JPEG")
    _remux(videos / TALKING, tmp_path / "speech.m4a", kinds=("audio",))
    data = (videos / TALKING).read_bytes()
    (tmp_path / "cut.mp4").write_bytes(data[: len(data) * 4 // 10])  # index (moov) at the end: gone
    for name, packets in (("noframes.avi", 0), ("junk.mkv", 3)):  # a header only; H.264 packets of noise
        with av.open(str(tmp_path / name), "w") as out:
            stream = out.add_stream("libx264", rate=30)
            stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
            out.start_encoding()
            for i in range(packets):
                packet = av.Packet(b"\x00\x00\x01" + bytes(range(97)))
                packet.stream, packet.pts, packet.dts, packet.time_base = stream, i, i, Fraction(1, 30)
                out.mux(packet)
    (tmp_path / "folder").mkdir()
    return tmp_path


BAD_INPUTS = [
    ("missing.mp4", UnreadableFileError, "does not exist"),
    ("folder", UnreadableFileError, "is a directory"),
    ("empty.mp4", UnreadableFileError, r"empty \(0 bytes\)"),
    ("notes.txt", UnsupportedFormatError, "not a video"),
    ("noise.mp4", UnsupportedFormatError, "not a video"),
    ("photo.png", UnsupportedFormatError, "is an image"),
    ("photo.mp4", UnsupportedFormatError, "is an image"),
    ("speech.m4a", UnsupportedFormatError, "no video stream"),
    ("cut.mp4", UnreadableFileError, "truncated or corrupt"),
    ("noframes.avi", InputError, "has no frames"),
    ("junk.mkv", UnreadableFileError, "first frame cannot be decoded"),
]


@pytest.mark.parametrize("name, error, message", BAD_INPUTS)
def test_bad_inputs_raise_one_line_errors(bad_inputs, name, error, message):
    for open_it in (probe_video, VideoReader):
        with pytest.raises(error, match=message) as caught:
            open_it(bad_inputs / name)
        assert name in str(caught.value) and "\n" not in str(caught.value)


def test_truncated_stream_stops_cleanly(tmp_path, videos):
    """A file cut mid-way either fails to open with our error or reads up to the damage."""
    for ext, options in ((".mkv", {}), (".mp4", {"movflags": "+faststart"})):
        whole = _remux(videos / TALKING, tmp_path / f"whole{ext}", kinds=("video",), options=options)
        data = whole.read_bytes()
        cut = tmp_path / f"cut{ext}"
        cut.write_bytes(data[: len(data) * 4 // 10])
        try:
            with VideoReader(cut) as reader:
                times = [frame.time for frame in reader]
        except FaceweaveError:
            continue
        assert 0 < len(times) < 216
        assert reader.broken_at == pytest.approx(times[-1] + 1 / 30, abs=1e-6)
    with VideoReader(whole) as reader:
        assert sum(1 for _ in reader) == 216 and reader.broken_at is None


# ------------------------------------------------------------------ reading


def test_reader_yields_every_frame_in_order(videos):
    with VideoReader(videos / TALKING) as reader:
        frames = list(reader)
    assert len(frames) == 216 == reader.frames_read == reader.frames_decoded
    assert [f.index for f in frames] == [f.source_index for f in frames] == list(range(216))
    assert frames[0].time == 0.0 and frames[-1].time == pytest.approx(215 / 30)
    assert all(b.time > a.time for a, b in itertools.pairwise(frames))
    first = frames[0].pixels
    assert first.shape == (480, 480, 3) and first.dtype == np.uint8 and not first.flags.writeable
    assert reader.broken_at is None


def test_reader_matches_plain_decoding(videos):
    _, plain = _decoded(videos / HAMILTON)
    with VideoReader(videos / HAMILTON, end=0.2) as reader:
        frames = list(reader)
    assert len(frames) == 6
    assert np.abs(frames[5].pixels.astype(int) - plain[5]).mean() < 2.0  # BT.601 vs tagged BT.709 at most


READ_OPTIONS = [
    # options, frames, first time, first source index, frame size
    ({"start": 1.0, "end": 2.0}, 30, 1.0, 30, (480, 480)),
    ({"start": 0.51, "end": 1.5}, 29, 16 / 30, 16, (480, 480)),
    ({"start": 5.0}, 66, 5.0, 150, (480, 480)),
    ({"end": 1.0, "fps": 15}, 15, 0.0, 0, (480, 480)),
    ({"end": 1.0, "fps": 10}, 10, 0.0, 0, (480, 480)),
    ({"end": 1.0, "fps": 60}, 30, 0.0, 0, (480, 480)),
    ({"end": 0.5, "scale": 0.5}, 15, 0.0, 0, (240, 240)),
    ({"end": 0.5, "scale": 0.33}, 15, 0.0, 0, (158, 158)),
]


@pytest.mark.parametrize("options, count, first_time, first_index, size", READ_OPTIONS)
def test_reader_trim_fps_scale(videos, options, count, first_time, first_index, size):
    with VideoReader(videos / TALKING, **options) as reader:
        frames = list(reader)
    assert len(frames) == count
    assert frames[0].time == pytest.approx(first_time) and frames[0].source_index == first_index
    assert (frames[0].pixels.shape[1], frames[0].pixels.shape[0]) == size == reader.frame_size
    start, end = options.get("start", 0.0), options.get("end", 7.2)
    assert all(start - 1e-6 <= f.time < end for f in frames)
    sources = [f.source_index for f in frames]
    assert sources == sorted(set(sources))  # never a frame twice
    if "fps" in options:
        assert all(b.time - a.time >= 1 / options["fps"] - 1e-6 for a, b in itertools.pairwise(frames))
    assert abs(reader.expected_frames - count) <= 1


def test_reader_fps_on_2997(videos):
    with VideoReader(videos / HAMILTON, end=2.0, fps=15) as reader:
        frames = list(reader)
    assert len(frames) == 30 and reader.frames_decoded == 60
    assert [f.source_index for f in frames] == list(range(0, 60, 2))


BAD_READ_OPTIONS = [
    ({"start": 7.5}, InvalidOptionError, r"--trim 7\.50- is outside the video .*\(duration 7\.20 s\)"),
    ({"start": 9.0, "end": 10.0}, InvalidOptionError, r"--trim 9\.00-10\.00 is outside the video"),
    ({"start": 2.0, "end": 1.0}, InvalidOptionError, "ends before it starts"),
    ({"start": -1.0}, InvalidOptionError, "start"),
    ({"fps": 0}, InvalidOptionError, "--fps"),
    ({"scale": 1.5}, InvalidOptionError, "--scale"),
    ({"scale": 0}, InvalidOptionError, "--scale"),
    ({"max_pixels": 480 * 479}, ImageTooLargeError, "480x480 = 230400 pixels"),
]


@pytest.mark.parametrize("options, error, message", BAD_READ_OPTIONS)
def test_reader_refuses_bad_options(videos, options, error, message):
    with pytest.raises(error, match=message):
        VideoReader(videos / TALKING, **options)


@pytest.mark.parametrize("turn, rotation", [(90, 270), (-90, 90), (180, 180)])
def test_reader_applies_rotation(tmp_path, turn, rotation):
    """A phone video stores the picture sideways with a display matrix."""
    path = tmp_path / "sideways.mp4"
    stored = np.zeros((32, 64, 3), np.uint8)
    stored[:8, :8] = 255  # white corner at the stored top-left
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 64, 32, "yuv420p"
        stream.set_display_rotation(turn)  # counter-clockwise degrees
        for i in range(3):
            frame = av.VideoFrame.from_ndarray(stored, format="rgb24")
            frame.pts = i
            out.mux(stream.encode(frame))
        out.mux(stream.encode())
    info = probe_video(path)
    assert info.rotation == rotation
    with VideoReader(path) as reader:
        pixels = next(reader).pixels
    expected = np.rot90(stored, k=turn // 90)
    assert (info.width, info.height) == (expected.shape[1], expected.shape[0]) == (pixels.shape[1], pixels.shape[0])
    assert np.abs(pixels.astype(int) - expected).mean() < 8


# ------------------------------------------------------------------ writing (synthetic frames)


@pytest.mark.parametrize("name", ["odd.mp4", "odd.webm"])
def test_writer_pads_odd_sizes(tmp_path, name):
    with VideoWriter(tmp_path / name, info=_info(33, 21)) as writer:
        for i in range(4):
            writer.write(_gradient(21, 33, shift=i))
    out = probe_output(tmp_path / name)
    assert (out.width, out.height, out.frame_count) == (34, 22, 4)
    if name.endswith(".mp4"):
        assert out.fps == Fraction(30000, 1001) and out.time_base == Fraction(1, 30000)  # NTSC rate kept exactly
    _, pixels = _decoded(tmp_path / name)
    assert np.abs(pixels[0][:21, :33].astype(int) - _gradient(21, 33)).mean() < 6
    assert np.abs(pixels[0][:, 33].astype(int) - pixels[0][:, 32]).mean() < 6  # the last column repeated


def test_writer_resizes_to_size_and_keeps_fps_given(tmp_path):
    with VideoWriter(tmp_path / "out.mp4", info=_info(), fps=Fraction(15), size=(64, 48)) as writer:
        for i in range(20):
            writer.write(_gradient(24, 32, shift=i), i / 30)  # 30 fps in: every other frame is kept
    out = probe_output(tmp_path / "out.mp4")
    assert (out.width, out.height, out.fps, out.frame_count, writer.frames_written) == (64, 48, 15, 10, 10)


@pytest.mark.parametrize("name, pixel_aspect", [("a:b c.mp4", Fraction(4, 3)), ("a:b c.mkv", Fraction(16, 15))])
def test_writer_keeps_pixel_aspect_and_odd_names(tmp_path, name, pixel_aspect):
    """A name with ':' is a file, not an FFmpeg protocol."""
    info = VideoInfo(**{**_info().__dict__, "pixel_aspect": pixel_aspect})
    with VideoWriter(tmp_path / name, info=info) as writer:
        writer.write(_gradient(24, 32))
    assert probe_output(tmp_path / name).pixel_aspect == pixel_aspect
    with VideoReader(tmp_path / name) as reader:
        assert len(list(reader)) == 1


@pytest.mark.parametrize("name", ["out.mp4", "out.webm", "out.gif", "out.zip", "frames"])
@pytest.mark.parametrize("error", [RuntimeError("disk on fire"), KeyboardInterrupt()])
def test_interrupted_write_leaves_nothing(tmp_path, name, error):
    with pytest.raises(type(error)), VideoWriter(tmp_path / name, info=_info()) as writer:
        for i in range(5):
            writer.write(_gradient(24, 32, shift=i))
        raise error
    assert _leftovers(tmp_path) == []


def test_writer_errors(tmp_path):
    (tmp_path / "keep.mp4").write_bytes(b"old")
    with pytest.raises(OutputError, match="no frames"), VideoWriter(tmp_path / "keep.mp4", info=_info()):
        pass
    assert _leftovers(tmp_path) == ["keep.mp4"] and (tmp_path / "keep.mp4").read_bytes() == b"old"
    with VideoWriter(tmp_path / "x.mp4", info=_info()) as writer:
        with pytest.raises(InputError, match=r"uint8 \(H, W, 3\)"):
            writer.write(np.zeros((24, 32), np.float32))
        writer.write(_gradient(24, 32))
    for options, message in [
        ({"codec": "h265", "path": "x.webm"}, "--codec h265"),
        ({"codec": "av1"}, "--codec"),
        ({"quality": 60}, "CRF"),
        ({"preset": "ludicrous"}, "--preset"),
        ({"path": "x.avi"}, "accepted"),
    ]:
        with pytest.raises(InvalidOptionError, match=message):
            VideoWriter(tmp_path / options.pop("path", "y.mp4"), info=_info(), **options)
    assert _leftovers(tmp_path) == ["keep.mp4", "x.mp4"]


# ------------------------------------------------------------------ round trips (real clips)


def _swap_like_copy(
    videos: Path,
    name: str,
    target: Path,
    *,
    start: float,
    end: float,
    scale: float = 0.5,
    audio: bool = True,
    **writer_options,
) -> list[np.ndarray]:
    """Read a trim of a real clip and write it back, as the video swap does; return the frames written."""
    written = []
    reader = VideoReader(videos / name, start=start, end=end, scale=scale)
    audio_from = reader.info.path if audio else None
    with (
        reader,
        VideoWriter(
            target, info=reader.info, audio_from=audio_from, audio_start=start, audio_end=end, **writer_options
        ) as writer,
    ):
        for frame in reader:
            writer.write(frame.pixels, frame.time)
            written.append(frame.pixels)
    return written


ROUND_TRIPS = [
    # clip, output, writer options, video codec, audio codec ("" = none), mean error allowed
    (HAMILTON, "out.mp4", {}, "h264", "", 4.0),
    (TALKING, "out.mp4", {}, "h264", "aac", 4.0),
    (TALKING, "out.m4v", {"codec": "h265"}, "hevc", "aac", 4.0),
    (TALKING, "out.mov", {}, "h264", "aac", 4.0),
    (TALKING, "out.mkv", {}, "h264", "aac", 4.0),
    (TALKING, "out.webm", {}, "vp9", "opus", 4.0),
    (PEDESTRIANS, "out.mp4", {"quality": 18}, "h264", "aac", 4.0),
]


@pytest.mark.slow
@pytest.mark.parametrize("clip, name, options, codec, audio_codec, max_error", ROUND_TRIPS)
def test_round_trip(videos, tmp_path, clip, name, options, codec, audio_codec, max_error):
    source = probe_video(videos / clip)
    written = _swap_like_copy(videos, clip, tmp_path / name, start=0.5, end=1.5, **options)
    out = probe_output(tmp_path / name)
    step = 1 / source.fps
    assert out.fps == source.fps  # exact, 2997/100 included
    assert out.frame_count == len(written) and abs(len(written) - source.fps) <= 1
    assert out.duration == pytest.approx(len(written) * step, abs=float(step))
    assert (out.codec, out.audio_codec or "") == (codec, audio_codec)
    assert (out.width, out.height) == (source.width // 2, source.height // 2)
    times, pixels = _decoded(tmp_path / name)
    assert len(pixels) == len(written) and times[0] == pytest.approx(0, abs=0.02)
    error = np.mean([np.abs(a.astype(int) - b).mean() for a, b in zip(written[::10], pixels[::10], strict=True)])
    assert error < max_error
    if audio_codec:
        assert _audio_seconds(tmp_path / name) == pytest.approx(float(out.duration), abs=0.05)
    assert _leftovers(tmp_path) == [name]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["out.mp4", "out.webm"])
def test_audio_stays_in_sync(videos, tmp_path, name):
    """The audio of a trimmed copy (packets copied to MP4, re-encoded to Opus for WebM)
    is the source's audio from the first frame's time on."""
    _swap_like_copy(videos, PEDESTRIANS, tmp_path / name, start=1.3, end=2.5, scale=0.125)
    rate = 48_000

    def samples(path: Path) -> tuple[np.ndarray, float]:
        with av.open(str(path)) as container:
            resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
            frames = list(container.decode(audio=0))
            start = frames[0].time - float(container.streams.video[0].start_time * container.streams.video[0].time_base)
            chunks = [o.to_ndarray().ravel() for f in frames + [None] for o in resampler.resample(f)]
        return np.concatenate(chunks), start

    source, source_start = samples(videos / PEDESTRIANS)
    copy, copy_start = samples(tmp_path / name)
    first_frame = math.ceil(1.3 * 25) / 25  # the first frame at or after 1.3 s
    at = round((first_frame + copy_start - source_start) * rate) + 4800
    window = copy[4800 : 4800 + 9600]
    lags = range(-240, 241)
    errors = [np.abs(source[at + lag : at + lag + window.size] - window).mean() for lag in lags]
    assert abs(lags[int(np.argmin(errors))]) <= 96  # 2 ms
    assert min(errors) < 0.01


@pytest.mark.slow
def test_no_audio_option(videos, tmp_path):
    _swap_like_copy(videos, TALKING, tmp_path / "silent.mp4", start=0.5, end=1.0, audio=False)
    assert probe_output(tmp_path / "silent.mp4").has_audio is False


@pytest.mark.slow
def test_gif_is_size_and_rate_limited(videos, tmp_path):
    written = _swap_like_copy(videos, PEDESTRIANS, tmp_path / "out.gif", start=0.5, end=1.5, scale=0.5)
    out = probe_output(tmp_path / "out.gif")
    assert (out.width, out.height, out.codec, out.has_audio) == (480, 270, "gif", False)
    times, pixels = _decoded(tmp_path / "out.gif")
    assert len(written) == 25 and len(pixels) == 13  # 25 fps -> at most 15 fps: every other frame
    assert min(b - a for a, b in itertools.pairwise(times)) >= 1 / 15 - 0.01
    small = np.asarray(PILImage.fromarray(written[0]).resize((480, 270), PILImage.Resampling.BOX))
    assert np.abs(pixels[0].astype(int) - small).mean() < 6


@pytest.mark.slow
@pytest.mark.parametrize("name", ["frames", "frames.zip"])
def test_png_frames(videos, tmp_path, name):
    written = _swap_like_copy(videos, TALKING, tmp_path / name, start=0.5, end=1.0, scale=0.25)
    if name.endswith(".zip"):
        with zipfile.ZipFile(tmp_path / name) as archive:
            names = archive.namelist()
            first = np.asarray(PILImage.open(archive.open(names[0])).convert("RGB"))
    else:
        names = sorted(p.name for p in (tmp_path / name).iterdir())
        first = np.asarray(PILImage.open(tmp_path / name / names[0]).convert("RGB"))
    assert len(names) == len(written) == 15
    assert names[:2] == ["frame_000000.png", "frame_000001.png"]
    assert np.array_equal(first, written[0])  # lossless
    assert _leftovers(tmp_path) == [name]


@pytest.mark.parametrize("height, colorspace", [(720, "ITU709"), (480, "ITU601")])
def test_rgb_to_i420_matches_swscale(height, colorspace):
    """The encoder's own RGB -> YUV 4:2:0 conversion gives the luma FFmpeg's
    swscale gives with the matrix the stream is tagged with (BT.709 for HD,
    BT.601 below), to a level, and chroma that decodes back to the picture
    as closely as swscale's (the two subsample chroma with different
    filters, so single samples differ at sharp colour edges)."""
    import cv2
    from skimage import data

    from faceweave.video.io.sinks import rgb_to_i420

    rgb = cv2.resize(data.astronaut(), (height * 4 // 3, height), interpolation=cv2.INTER_AREA)
    rgb[:40, :40] = (255, 0, 0)  # saturated colours and black and white too
    rgb[40:80, :40] = (0, 0, 255)
    rgb[80:120, :40] = 0
    rgb[120:160, :40] = 255
    ref = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(
        format="yuv420p", dst_colorspace=colorspace, dst_color_range="MPEG"
    )

    mine = rgb_to_i420(rgb)

    assert mine.shape == (height * 3 // 2, height * 4 // 3) and mine.dtype == np.uint8
    assert np.abs(mine[:height].astype(int) - ref.to_ndarray()[:height]).max() <= 1
    assert mine[:height].min() >= 16 and mine[:height].max() <= 235  # limited range

    def round_trip_error(frame: av.VideoFrame) -> float:
        back = frame.to_ndarray(format="rgb24", src_colorspace=colorspace)
        return float(np.abs(back.astype(int) - rgb).mean())

    assert round_trip_error(av.VideoFrame.from_ndarray(mine, format="yuv420p")) <= round_trip_error(ref) + 0.05
