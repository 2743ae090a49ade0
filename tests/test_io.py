"""Image input/output: decoding by content, validation at the boundary, atomic writes."""

from __future__ import annotations

import io
import os
import struct
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image as PILImage
from PIL import ImageFile

from faceweave.errors import (
    ImageTooLargeError,
    InputError,
    InvalidOptionError,
    OutputError,
    UnreadableFileError,
    UnsupportedFormatError,
)
from faceweave.io import atomic_output, image_from_array, probe_kind, read_image, write_image

RED, BLUE = (255, 0, 0), (0, 0, 255)


def _crop(astronaut: np.ndarray) -> np.ndarray:
    """``(96, 128, 3)`` part of the astronaut with the face (small keeps tests fast)."""
    return np.ascontiguousarray(astronaut[20:116, 160:288])


def _gradient_alpha(shape: tuple[int, int]) -> np.ndarray:
    return np.tile(np.linspace(0, 255, shape[1]).astype(np.uint8), (shape[0], 1))


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width x height`` grey pixels but holds almost no data."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr) + _png_chunk(b"IDAT", zlib.compress(b"\x00" * 64))


def _encoded(pixels: np.ndarray, fmt: str) -> bytes:
    buffer = io.BytesIO()
    PILImage.fromarray(pixels).save(buffer, format=fmt)
    return buffer.getvalue()


# ------------------------------------------------------------ round trips

ROUND_TRIPS = [
    # name, mean absolute error allowed, format read back
    ("out.png", 0.0, "PNG"),
    ("out.bmp", 0.0, "BMP"),
    ("out.tif", 0.0, "TIFF"),
    ("out.tiff", 0.0, "TIFF"),
    ("out.jpg", 3.0, "JPEG"),
    ("out.JPEG", 3.0, "JPEG"),
    ("out.webp", 3.0, "WEBP"),
]


@pytest.mark.parametrize(("name", "max_error", "expected_format"), ROUND_TRIPS)
def test_round_trip(tmp_path, astronaut, name, max_error, expected_format):
    pixels = _crop(astronaut)
    written = write_image(tmp_path / name, pixels)
    image = read_image(written)
    assert written == tmp_path / name
    assert image.format == expected_format
    assert image.pixels.shape == pixels.shape and image.pixels.dtype == np.uint8
    assert np.abs(image.pixels.astype(float) - pixels).mean() <= max_error
    assert image.alpha is None
    assert image.path == str(written)
    assert not image.pixels.flags.writeable


ALPHA_KEPT = [
    # name, alpha kept (exactly)
    ("out.png", True),
    ("out.webp", True),
    ("out.tiff", True),
    ("out.jpg", False),
    ("out.bmp", False),
]


@pytest.mark.parametrize(("name", "kept"), ALPHA_KEPT)
def test_alpha_kept_or_dropped(tmp_path, astronaut, name, kept):
    pixels = _crop(astronaut)
    alpha = _gradient_alpha(pixels.shape[:2])
    image = read_image(write_image(tmp_path / name, pixels, alpha=alpha))
    if kept:
        np.testing.assert_array_equal(image.alpha, alpha)
    else:
        assert image.alpha is None


# ------------------------------------------------------------ pixel modes


def _animated(fmt: str) -> Callable[[Path], None]:
    def save(path: Path) -> None:
        red, blue = PILImage.new("RGB", (8, 6), RED), PILImage.new("RGB", (8, 6), BLUE)
        red.save(path, format=fmt, save_all=True, append_images=[blue], duration=100, loop=0, lossless=True)

    return save


def _palette_with_transparency(path: Path) -> None:
    img = PILImage.new("P", (8, 6), 1)
    img.putpalette([0, 0, 0, 10, 20, 30] + [0] * 762)
    img.save(path, format="PNG", transparency=1)


def _pil(mode: str, color, fmt: str, array: np.ndarray | None = None) -> Callable[[Path], None]:
    def save(path: Path) -> None:
        img = PILImage.fromarray(array) if array is not None else PILImage.new(mode, (8, 6), color)
        img.save(path, format=fmt)

    return save


MODES = [
    # id, writer, extension, mean error allowed, expected RGB, expected alpha (None: no alpha)
    ("grey L", _pil("L", 100, "PNG"), "png", 0, (100, 100, 100), None),
    ("1-bit", _pil("1", 1, "PNG"), "png", 0, (255, 255, 255), None),
    ("16-bit grey png", _pil("I;16", 0, "PNG", np.full((6, 8), 21845, np.uint16)), "png", 0, (85, 85, 85), None),
    ("16-bit grey tiff", _pil("I;16", 0, "TIFF", np.full((6, 8), 65535, np.uint16)), "tif", 0, (255, 255, 255), None),
    ("32-bit int tiff", _pil("I", 0, "TIFF", np.full((6, 8), 32896, np.int32)), "tif", 0, (128, 128, 128), None),
    ("float tiff", _pil("F", 0, "TIFF", np.full((6, 8), 0.5, np.float32)), "tif", 0, (128, 128, 128), None),
    ("CMYK jpeg", _pil("CMYK", (0, 255, 255, 0), "JPEG"), "jpg", 3, RED, None),
    ("CMYK tiff", _pil("CMYK", (255, 255, 0, 0), "TIFF"), "tif", 0, BLUE, None),
    ("grey with alpha", _pil("LA", (50, 128), "PNG"), "png", 0, (50, 50, 50), 128),
    ("RGBA opaque", _pil("RGBA", (1, 2, 3, 255), "PNG"), "png", 0, (1, 2, 3), None),
    ("RGBA", _pil("RGBA", (1, 2, 3, 7), "PNG"), "png", 0, (1, 2, 3), 7),
    ("palette", _pil("P", 0, "PNG"), "png", 0, (0, 0, 0), None),
    ("palette with transparency", _palette_with_transparency, "png", 0, (10, 20, 30), 0),
    ("animated gif: first frame", _animated("GIF"), "gif", 0, RED, None),
    ("animated webp: first frame", _animated("WEBP"), "webp", 0, RED, None),
]


@pytest.mark.parametrize(
    ("writer", "ext", "max_error", "rgb", "alpha"), [case[1:] for case in MODES], ids=[case[0] for case in MODES]
)
def test_pixel_modes(tmp_path, writer, ext, max_error, rgb, alpha):
    path = tmp_path / f"in.{ext}"
    writer(path)
    image = read_image(path)
    assert image.pixels.shape == (6, 8, 3) and image.pixels.dtype == np.uint8
    assert np.abs(image.pixels.astype(float) - np.array(rgb)).mean() <= max_error
    if alpha is None:
        assert image.alpha is None
    else:
        assert image.alpha is not None and image.alpha.dtype == np.uint8
        assert (image.alpha == alpha).all()


def test_16_bit_gradient_is_scaled_not_clipped(tmp_path):
    values = np.tile(np.array([0, 129, 257, 32768, 65535], np.uint16), (2, 1))
    PILImage.fromarray(values).save(tmp_path / "g16.png")
    image = read_image(tmp_path / "g16.png")
    np.testing.assert_array_equal(image.pixels[0, :, 0], [0, 1, 1, 128, 255])


# ------------------------------------------------------- EXIF orientation

ORIENTATIONS = [
    # EXIF orientation of a 40x20 picture, red left half / blue right half -> decoded shape, top-left colour
    (1, (20, 40, 3), RED),
    (3, (20, 40, 3), BLUE),
    (6, (40, 20, 3), RED),
    (8, (40, 20, 3), BLUE),
]


@pytest.mark.parametrize(("orientation", "shape", "top_left"), ORIENTATIONS)
def test_exif_orientation_applied(tmp_path, orientation, shape, top_left):
    pixels = np.zeros((20, 40, 3), np.uint8)
    pixels[:, :20], pixels[:, 20:] = RED, BLUE
    exif = PILImage.Exif()
    exif[0x0112] = orientation
    PILImage.fromarray(pixels).save(tmp_path / "o.jpg", exif=exif, quality=95)
    image = read_image(tmp_path / "o.jpg")
    assert image.pixels.shape == shape
    assert np.abs(image.pixels[2, 2].astype(int) - top_left).max() <= 16


# ----------------------------------------------- content, not extension

DISGUISED = [
    # encoder, misleading name, format read back
    ("WEBP", "photo.jpg", "WEBP"),
    ("WEBP", "photo.jpeg", "WEBP"),
    ("PNG", "photo.jpg", "PNG"),
    ("JPEG", "photo.png", "JPEG"),
    ("BMP", "photo.webp", "BMP"),
    ("TIFF", "photo", "TIFF"),
]


@pytest.mark.parametrize(("encoder", "name", "expected_format"), DISGUISED)
def test_decoded_by_content_not_extension(tmp_path, astronaut, encoder, name, expected_format):
    path = tmp_path / name
    path.write_bytes(_encoded(_crop(astronaut), encoder))
    image = read_image(path)
    assert image.format == expected_format
    assert image.pixels.shape == (96, 128, 3)


def test_bytes_source(astronaut):
    image = read_image(_encoded(_crop(astronaut), "PNG"))
    assert image.path is None and image.format == "PNG"
    np.testing.assert_array_equal(image.pixels, _crop(astronaut))


def test_real_webp_behind_jpg_name(faces_dir):
    image = read_image(faces_dir / "identity" / "scarlett_johansson" / "df_img47.jpg")
    assert image.format == "WEBP"
    assert image.pixels.shape == (1800, 1350, 3)


# ------------------------------------------------------------------ errors


def _file(content: bytes, name: str = "in.jpg") -> Callable[[Path], Path]:
    def make(tmp_path: Path) -> Path:
        (tmp_path / name).write_bytes(content)
        return tmp_path / name

    return make


def _truncated(fmt: str, name: str) -> Callable[[Path], Path]:
    def make(tmp_path: Path) -> Path:
        rng = np.random.default_rng(0)
        data = _encoded(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8), fmt)
        return _file(data[: len(data) // 2], name)(tmp_path)

    return make


def _zip(tmp_path: Path) -> Path:
    with zipfile.ZipFile(tmp_path / "in.zip", "w") as archive:
        archive.writestr("a.txt", "hello")
    return tmp_path / "in.zip"


ERRORS = [
    # id, make source, error, message fragment
    ("missing", lambda tmp: tmp / "nope.jpg", UnreadableFileError, "does not exist"),
    ("directory", lambda tmp: tmp, UnreadableFileError, "is a directory"),
    ("empty file", _file(b""), UnreadableFileError, "is empty"),
    ("empty bytes", lambda tmp: b"", UnreadableFileError, "is empty"),
    ("truncated jpeg", _truncated("JPEG", "cut.jpg"), UnreadableFileError, "truncated or corrupt"),
    ("truncated png", _truncated("PNG", "cut.png"), UnreadableFileError, "truncated or corrupt"),
    ("jpeg magic, garbage", _file(b"\xff\xd8\xff" + b"\x00" * 100), UnreadableFileError, "corrupt"),
    ("text", _file(b"hello, world\n", "notes.jpg"), UnsupportedFormatError, "accepted formats: JPEG, PNG"),
    ("pdf", _file(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n", "doc.png"), UnsupportedFormatError, "accepted formats"),
    ("zip", _zip, UnsupportedFormatError, "accepted formats"),
    ("heic", _file(b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic", "p.heic"), UnsupportedFormatError, "HEIF"),
    (
        "mp4",
        _file(b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom" + b"\x00" * 64, "clip.jpg"),
        UnsupportedFormatError,
        "is a video (MP4/MOV); an image is expected",
    ),
    (
        "mov",
        _file(b"\x00\x00\x00\x14ftypqt  \x00\x00\x02\x00qt  " + b"\x00" * 64, "clip.mov"),
        UnsupportedFormatError,
        "video",
    ),
    (
        "webm",
        _file(b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01" + b"\x00" * 64, "clip.webm"),
        UnsupportedFormatError,
        "video",
    ),
    ("avi", _file(b"RIFF\x00\x10\x00\x00AVI LIST" + b"\x00" * 64, "clip.avi"), UnsupportedFormatError, "video"),
    ("video bytes", lambda tmp: b"\x00\x00\x00\x18ftypisom" + b"\x00" * 64, UnsupportedFormatError, "video"),
]


@pytest.mark.parametrize(("make", "error", "fragment"), [case[1:] for case in ERRORS], ids=[case[0] for case in ERRORS])
def test_read_errors(tmp_path, make, error, fragment):
    source = make(tmp_path)
    with pytest.raises(error, match=None) as caught:
        read_image(source, role="source image")
    message = str(caught.value)
    assert fragment in message
    assert "\n" not in message
    assert message.startswith("source image ")
    if isinstance(source, Path):
        assert f"'{source}'" in message


REAL_ERRORS = [
    # file under faces_dir, bytes kept (None: all), error, message fragment
    ("video/lp_d18_talking_face.mp4", None, UnsupportedFormatError, "is a video"),
    ("hard/occl_ball_teresa_williams.jpg", 7000, UnreadableFileError, "is truncated or corrupt"),
    ("hard/neg_no_face.png", 4000, UnreadableFileError, "is truncated or corrupt"),
]


@pytest.mark.parametrize(("name", "keep", "error", "fragment"), REAL_ERRORS)
def test_read_errors_on_real_files(faces_dir, tmp_path, name, keep, error, fragment):
    source = faces_dir / name
    if keep is not None:
        source = tmp_path / source.name
        source.write_bytes((faces_dir / name).read_bytes()[:keep])
    with pytest.raises(error, match=fragment):
        read_image(source)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs a non-root POSIX user")
def test_unreadable_permission(tmp_path, astronaut):
    path = write_image(tmp_path / "secret.png", _crop(astronaut))
    path.chmod(0)
    with pytest.raises(UnreadableFileError, match="permission denied"):
        read_image(path)


PIXEL_LIMITS = [
    # PNG header size, max_pixels, error (None: the limit passes, and the cut data then fails), fragment
    ((512, 512), 512 * 512, None, "truncated"),
    ((512, 512), 512 * 512 - 1, ImageTooLargeError, "512x512 = 262144 pixels, over the limit of 262143 pixels"),
    ((10_000, 5_000), 40_000_000, ImageTooLargeError, r"--max-pixels\) to accept it"),
    ((20_000, 20_000), 10**12, ImageTooLargeError, "hard limit"),
]


@pytest.mark.parametrize(("size", "max_pixels", "error", "fragment"), PIXEL_LIMITS)
def test_pixel_limit_checked_from_header(size, max_pixels, error, fragment):
    with pytest.raises(error or UnreadableFileError, match=fragment):
        read_image(_png_header_only(*size), max_pixels=max_pixels)


@pytest.mark.filterwarnings("error")
def test_pillow_bomb_warning_defers_to_max_pixels():
    # 10000 x 10000 is over Pillow's warning threshold but within the caller's limit
    with pytest.raises(UnreadableFileError, match="truncated"):
        read_image(_png_header_only(10_000, 10_000), max_pixels=10**8)


@pytest.mark.parametrize(
    ("max_pixels", "error"), [(0, InvalidOptionError), (-1, InvalidOptionError), (1.5, InvalidOptionError)]
)
def test_bad_max_pixels(astronaut, max_pixels, error):
    with pytest.raises(error, match="max_pixels"):
        read_image(_encoded(_crop(astronaut), "PNG"), max_pixels=max_pixels)


def test_pillow_globals_untouched(tmp_path):
    before = (PILImage.MAX_IMAGE_PIXELS, ImageFile.LOAD_TRUNCATED_IMAGES)
    for make, *_ in [case[1:] for case in ERRORS] + [(lambda tmp: _png_header_only(20_000, 20_000),)]:
        with pytest.raises(InputError):
            read_image(make(tmp_path))
    assert before == (PILImage.MAX_IMAGE_PIXELS, ImageFile.LOAD_TRUNCATED_IMAGES)


# ------------------------------------------------------------- probe_kind

PROBES = [
    # first bytes, kind
    (b"\xff\xd8\xff\xe0\x00\x10JFIF", "image"),
    (b"\x89PNG\r\n\x1a\n\x00\x00", "image"),
    (b"GIF89a\x01\x00", "image"),
    (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "image"),
    (b"BM" + b"\x00" * 12 + struct.pack("<I", 40) + b"\x00" * 8, "image"),
    (b"II*\x00\x08\x00\x00\x00", "image"),
    (b"MM\x00*\x00\x00\x00\x08", "image"),
    (b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00", "image"),
    (b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00", "video"),
    (b"\x00\x00\x00\x14ftypqt  \x00\x00\x02\x00", "video"),
    (b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81", "video"),
    (b"RIFF\x00\x00\x00\x00AVI LIST", "video"),
    (b"\x00\x00\x00\x20ftypM4A \x00\x00\x00\x00", "unknown"),
    (b"RIFF\x00\x00\x00\x00WAVEfmt ", "unknown"),
    (b"BMW is a car\n" + b" " * 20, "unknown"),
    (b"%PDF-1.4\n", "unknown"),
    (b"hello\n", "unknown"),
    (b"", "unknown"),
]


@pytest.mark.parametrize(("head", "kind"), PROBES)
def test_probe_kind(tmp_path, head, kind):
    path = tmp_path / "file.bin"
    path.write_bytes(head)
    assert probe_kind(path) == kind


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("video/lp_d18_talking_face.mp4", "video"),
        ("identity/scarlett_johansson/df_img47.jpg", "image"),
        ("hard/neg_no_face.png", "image"),
        ("identities.csv", "unknown"),
    ],
)
def test_probe_kind_real_files(faces_dir, name, kind):
    assert probe_kind(faces_dir / name) == kind


def test_probe_kind_missing(tmp_path):
    with pytest.raises(UnreadableFileError, match="does not exist"):
        probe_kind(tmp_path / "nope.mp4")


# -------------------------------------------------------- image_from_array

ARRAYS = [
    # shape, dtype, expected (has alpha) or error
    ((4, 5, 3), np.uint8, False),
    ((4, 5), np.uint8, False),
    ((4, 5, 4), np.uint8, True),
    ((4, 5, 3), np.float32, InputError),
    ((4, 5, 3), np.uint16, InputError),
    ((4, 5, 2), np.uint8, InputError),
    ((4, 5, 3, 1), np.uint8, InputError),
    ((0, 5, 3), np.uint8, InputError),
    ((5,), np.uint8, InputError),
]


@pytest.mark.parametrize(("shape", "dtype", "expected"), ARRAYS)
def test_image_from_array(shape, dtype, expected):
    array = np.arange(int(np.prod(shape))).reshape(shape).astype(dtype)
    if isinstance(expected, type):
        with pytest.raises(expected, match=rf"expected a uint8 array .* got {np.dtype(dtype)} \({shape[0]},"):
            image_from_array(array)
        return
    image = image_from_array(array, path="mem.png")
    assert image.pixels.shape == (4, 5, 3) and image.path == "mem.png"
    assert (image.alpha is not None) == expected
    array[...] = 0  # the image holds its own, read-only copy
    assert image.pixels.any() and not image.pixels.flags.writeable


def test_image_from_array_opaque_alpha_is_none():
    assert image_from_array(np.full((2, 3, 4), 255, np.uint8)).alpha is None


# --------------------------------------------------------------- writing

WRITE_ERRORS = [
    # name, keyword arguments, error, message fragment
    ("out.gif", {}, InvalidOptionError, "unknown image extension '.gif'; accepted: .png, .jpg"),
    ("out", {}, InvalidOptionError, "unknown image extension ''"),
    ("out.jpg", {"quality": 0}, InvalidOptionError, "quality must be an integer from 1 to 100"),
    ("out.webp", {"quality": 101}, InvalidOptionError, "quality"),
    ("out.jpg", {"quality": 50.5}, InvalidOptionError, "quality"),
    ("out.jpg", {"quality": True}, InvalidOptionError, "quality"),
    ("out.png", {"pixels": np.zeros((4, 5), np.uint8)}, InputError, r"uint8 \(H, W, 3\) RGB; got uint8 \(4, 5\)"),
    ("out.png", {"pixels": np.zeros((4, 5, 3), np.float32)}, InputError, "got float32"),
    ("out.png", {"alpha": np.zeros((4, 4), np.uint8)}, InputError, r"alpha must be uint8 \(H, W\) = \(4, 5\)"),
]


@pytest.mark.parametrize(("name", "kwargs", "error", "fragment"), WRITE_ERRORS)
def test_write_errors_before_any_work(tmp_path, name, kwargs, error, fragment):
    kwargs = {"pixels": np.zeros((4, 5, 3), np.uint8), **kwargs}
    with pytest.raises(error, match=fragment):
        write_image(tmp_path / "sub" / name, **kwargs)
    assert not (tmp_path / "sub").exists()


QUALITIES = [
    # extension, quality, outcome
    ("jpg", 1, "written"),
    ("jpg", 100, "written"),
    ("webp", 1, "written"),
    ("png", 50, "written"),
]


@pytest.mark.parametrize(("ext", "quality", "outcome"), QUALITIES)
def test_quality_bounds_accepted(tmp_path, astronaut, ext, quality, outcome):
    path = write_image(tmp_path / f"q.{ext}", _crop(astronaut), quality=quality)
    assert ("written" if path.stat().st_size > 0 else "empty") == outcome


def test_jpeg_quality_changes_size(tmp_path, astronaut):
    low = write_image(tmp_path / "low.jpg", _crop(astronaut), quality=10).stat().st_size
    high = write_image(tmp_path / "high.jpg", _crop(astronaut), quality=95).stat().st_size
    assert low < high


def test_png_is_written_at_the_chosen_zlib_level_and_reads_back_exactly(tmp_path, astronaut, monkeypatch):
    from faceweave.io import images

    levels = []
    save = PILImage.Image.save

    def spy(self, fp, format=None, **params):  # noqa: A002 - Pillow's own name
        levels.append(params.get("compress_level"))
        return save(self, fp, format=format, **params)

    monkeypatch.setattr(PILImage.Image, "save", spy)
    out = write_image(tmp_path / "out.png", astronaut, xmp=b"<x:xmpmeta xmlns:x='adobe:ns:meta/'/>")
    write_image(tmp_path / "out.jpg", astronaut)
    assert levels == [images.PNG_COMPRESS_LEVEL, None]
    assert np.array_equal(read_image(out).pixels, astronaut)


def test_write_creates_parent_folder(tmp_path, astronaut):
    path = write_image(str(tmp_path / "a" / "b" / "out.png"), _crop(astronaut))
    assert path == tmp_path / "a" / "b" / "out.png" and path.is_file()
    assert sorted(p.name for p in path.parent.iterdir()) == ["out.png"]


def _failing_save(self, fp, *args, **kwargs):
    Path(fp).write_bytes(b"half an image")
    raise OSError(28, "No space left on device")


@pytest.mark.parametrize(("existing", "expected_files"), [(None, []), (b"old", ["out.png"])])
def test_failed_write_leaves_no_partial_file(tmp_path, astronaut, monkeypatch, existing, expected_files):
    target = tmp_path / "out.png"
    if existing is not None:
        target.write_bytes(existing)
    monkeypatch.setattr(PILImage.Image, "save", _failing_save)
    with pytest.raises(OutputError, match=r"cannot write image '.*out.png': No space left on device"):
        write_image(target, _crop(astronaut))
    assert sorted(p.name for p in tmp_path.iterdir()) == expected_files
    if existing is not None:
        assert target.read_bytes() == existing


def test_write_onto_a_directory_fails_cleanly(tmp_path, astronaut):
    (tmp_path / "out.png").mkdir()
    with pytest.raises(OutputError, match="out.png"):
        write_image(tmp_path / "out.png", _crop(astronaut))
    assert [p.name for p in tmp_path.iterdir()] == ["out.png"]


# ----------------------------------------------------------- atomic_output


def test_atomic_output_renames_on_success(tmp_path):
    target = tmp_path / "result.mp4"
    with atomic_output(target, ".tmp.mp4") as temp:
        assert temp.parent == tmp_path and temp.exists()
        assert temp.name.startswith(".result.mp4.") and temp.name.endswith(".tmp.mp4")
        temp.write_bytes(b"complete")
        assert not target.exists()
    assert target.read_bytes() == b"complete"
    assert [p.name for p in tmp_path.iterdir()] == ["result.mp4"]


def test_atomic_output_cleans_up_and_reraises(tmp_path):
    target = tmp_path / "result.png"
    target.write_bytes(b"old")
    with pytest.raises(KeyError), atomic_output(target, ".tmp") as temp:
        temp.write_bytes(b"partial")
        raise KeyError("boom")
    assert [p.name for p in tmp_path.iterdir()] == ["result.png"]
    assert target.read_bytes() == b"old"


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_atomic_output_permissions_follow_umask(tmp_path):
    reference = tmp_path / "reference"
    reference.write_bytes(b"")
    with atomic_output(tmp_path / "result", ".tmp") as temp:
        temp.write_bytes(b"x")
    assert (tmp_path / "result").stat().st_mode == reference.stat().st_mode
