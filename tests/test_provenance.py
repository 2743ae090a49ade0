"""Provenance: the AI-generated label (XMP, container tags), stamping outputs,
reading both back with verify_file, and the audit log."""

from __future__ import annotations

import json
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest

from faceweave.errors import InvalidOptionError, UnreadableFileError, UnsupportedFormatError
from faceweave.io.images import read_image, read_xmp, write_image
from faceweave.provenance.audit import AuditEntry, AuditInput, AuditLog, default_audit_path, outcome_of, sha256_file
from faceweave.provenance.label import TRAINED_ALGORITHMIC_MEDIA, Label, from_tags, from_xmp, to_tags, to_xmp
from faceweave.provenance.payload import Payload
from faceweave.provenance.stamp import (
    WATERMARK_DISABLED,
    Provenance,
    audit_watermark,
    image_metadata,
    stamp_image,
    video_metadata,
    writer_stamp,
)
from faceweave.provenance.verify import verify_file, vote
from faceweave.provenance.watermark import Watermarker

LABEL = Label(tool="faceweave", version="0.1.0", created="2025-01-31T12:00:00Z", run_id="00abcd")
PROV = Provenance(run_id=0x00ABCD, created="2025-01-31T12:00:00Z", version="0.1.0")


# ------------------------------------------------------------------ label


def test_xmp_round_trip_and_content():
    packet = to_xmp(LABEL)
    text = packet.decode("utf-8")
    assert text.startswith("<?xpacket begin=") and text.endswith('<?xpacket end="w"?>')
    assert f'Iptc4xmpExt:DigitalSourceType="{TRAINED_ALGORITHMIC_MEDIA}"' in text
    assert 'xmp:CreatorTool="faceweave 0.1.0"' in text
    assert from_xmp(packet) == LABEL
    assert from_xmp(packet).ai_generated


@pytest.mark.parametrize(
    "packet",
    [
        None,
        b"",
        b"not xml at all",
        b"<x:xmpmeta xmlns:x='adobe:ns:meta/'><broken></x:xmpmeta>",
        # well-formed XMP from another tool, without a digital source type
        b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
        b'<rdf:Description xmlns:xmp="http://ns.adobe.com/xap/1.0/" xmp:CreatorTool="GIMP"/></rdf:RDF></x:xmpmeta>',
        b'<!DOCTYPE x [<!ENTITY a "aaaa">]><x:xmpmeta xmlns:x="adobe:ns:meta/">&a;</x:xmpmeta>',
    ],
)
def test_xmp_without_a_label_reads_as_none(packet):
    assert from_xmp(packet) is None


def test_xmp_from_another_tool_with_an_element_source_type():
    packet = (
        '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
        '<rdf:Description xmlns:Iptc4xmpExt="http://iptc.org/std/Iptc4xmpExt/2008-02-29/" xmlns:xmp="http://ns.adobe.com/xap/1.0/"'
        ' xmp:CreatorTool="OtherTool 2.0"><Iptc4xmpExt:DigitalSourceType>'
        f"{TRAINED_ALGORITHMIC_MEDIA}</Iptc4xmpExt:DigitalSourceType></rdf:Description></rdf:RDF></x:xmpmeta>"
    )
    label = from_xmp(packet)
    assert label is not None and label.ai_generated and (label.tool, label.version) == ("OtherTool", "2.0")


def test_tags_round_trip_json_upper_case_keys_and_comment_fallback():
    tags = to_tags(LABEL)
    assert json.loads(tags["faceweave_provenance"])["run_id"] == "00abcd"
    assert from_tags(tags) == LABEL
    # Matroska upper-cases tag names
    assert from_tags({k.upper(): v for k, v in tags.items()}) == LABEL
    # only the human sentence survived (e.g. a remux that dropped custom keys)
    assert from_tags({"comment": tags["comment"]}) == LABEL
    assert from_tags({"comment": "holiday video"}) is None
    assert from_tags({}) is None and from_tags(None) is None


# ------------------------------------------------------------ image files


@pytest.mark.parametrize("ext", ["png", "jpg", "webp", "tiff"])
def test_write_image_stores_xmp_that_reads_back(tmp_path, astronaut, ext):
    path = write_image(tmp_path / f"a.{ext}", astronaut, **image_metadata(PROV, f"a.{ext}"))
    assert from_xmp(read_xmp(path)) == LABEL
    assert read_image(path).pixels.shape == astronaut.shape


def test_bmp_cannot_hold_xmp(tmp_path, astronaut):
    assert image_metadata(PROV, "out.bmp") == {}
    with pytest.raises(InvalidOptionError, match="XMP"):
        write_image(tmp_path / "a.bmp", astronaut, xmp=to_xmp(LABEL))
    assert not (tmp_path / "a.bmp").exists()


def test_image_without_xmp_reads_none(tmp_path, astronaut):
    assert read_xmp(write_image(tmp_path / "plain.png", astronaut)) is None


def test_stamp_image_embeds_the_run_payload(astronaut):
    marked = stamp_image(astronaut, PROV)
    assert marked.shape == astronaut.shape and marked.dtype == np.uint8
    assert 0 < np.abs(marked.astype(int) - astronaut).mean() < 4  # invisible, but there
    reading = Watermarker().detect(marked)
    assert reading.found and reading.payload == Payload(run_id=0x00ABCD)


def test_watermark_off_or_no_provenance_leaves_pixels_and_says_so(astronaut):
    off = Provenance(run_id=1, watermark=False)
    assert stamp_image(astronaut, off) is astronaut
    assert stamp_image(astronaut, None) is astronaut
    assert audit_watermark(off) == WATERMARK_DISABLED
    assert audit_watermark(PROV) == {"tool_id": "0xFACE", "version": 1, "run_id": "00abcd"}
    assert writer_stamp(off)["frame_marker"] is None and writer_stamp(off)["metadata"] == video_metadata(off)
    assert writer_stamp(None) == {}
    no_label = Provenance(run_id=1, label=False)
    assert image_metadata(no_label, "a.png") == {} and video_metadata(no_label) == {}


def test_verify_image_finds_label_and_watermark(tmp_path, astronaut):
    path = write_image(
        tmp_path / "out.jpg", stamp_image(astronaut, PROV), quality=90, **image_metadata(PROV, "out.jpg")
    )
    result = verify_file(path)
    assert result.marked and result.kind == "image" and result.label == LABEL
    assert result.watermark.found and result.watermark.payload.run_id == 0x00ABCD
    assert result.as_dict()["watermark"]["payload"]["run_id"] == "00abcd"


def test_verify_unmarked_photo(faces_dir):
    result = verify_file(faces_dir / "single/biden2.jpg")
    assert not result.marked and result.label is None and not result.watermark.found


@pytest.mark.parametrize(
    "content, error",
    [
        (b"just some text\n", UnsupportedFormatError),
        (b"", UnreadableFileError),
        ("truncated-png", UnreadableFileError),
    ],
)
def test_verify_bad_files_raise(tmp_path, astronaut, content, error):
    path = tmp_path / "bad.png"
    if content == "truncated-png":
        full = write_image(tmp_path / "full.png", astronaut, **image_metadata(PROV, "x.png")).read_bytes()
        content = full[: len(full) // 2]
    path.write_bytes(content)
    with pytest.raises(error):
        verify_file(path)


def test_vote_takes_the_majority_payload():
    a, b = Payload(run_id=1), Payload(run_id=2)
    reading = lambda p, c: SimpleNamespace(found=p is not None, payload=p, confidence=c)  # noqa: E731
    found = vote([reading(a, 10.0), reading(b, 20.0), reading(a, 12.0), reading(None, 4.0), None])
    assert (found.found, found.payload, found.frames_checked, found.frames_agreeing) == (True, a, 5, 2)
    assert found.confidence == pytest.approx(11.0)
    nothing = vote([reading(None, 4.5), reading(None, 3.0)])
    assert (nothing.found, nothing.payload, nothing.confidence) == (False, None, 4.5)


# ------------------------------------------------------------------ video


@pytest.mark.parametrize("ext", ["mp4", "webm", "mkv"])
def test_video_writer_tags_and_marks_every_frame(tmp_path, astronaut, ext):
    from faceweave.video.io import VideoWriter
    from faceweave.video.io.probe import VideoInfo

    info = VideoInfo(
        path="in",
        width=320,
        height=240,
        fps=Fraction(10),
        time_base=Fraction(1, 10),
        frame_count=6,
        duration=0.6,
        rotation=0,
        codec="h264",
        pixel_aspect=Fraction(1),
        has_audio=False,
        audio_codec=None,
    )
    out = tmp_path / f"v.{ext}"
    with VideoWriter(out, info=info, quality=10, **writer_stamp(PROV)) as writer:
        for i in range(6):
            writer.write(np.ascontiguousarray(astronaut[i * 20 : i * 20 + 240, 100:420]))
    result = verify_file(out, frames=3)
    assert result.kind == "video" and result.label == LABEL
    assert result.watermark.found and result.watermark.payload.run_id == 0x00ABCD
    assert result.watermark.frames_checked == 3 and result.watermark.frames_agreeing >= 2


def test_video_without_provenance_is_not_marked(tmp_path, astronaut):
    from faceweave.video.io import VideoWriter
    from faceweave.video.io.probe import VideoInfo

    info = VideoInfo(
        path="in",
        width=320,
        height=240,
        fps=Fraction(10),
        time_base=Fraction(1, 10),
        frame_count=4,
        duration=0.4,
        rotation=0,
        codec="h264",
        pixel_aspect=Fraction(1),
        has_audio=False,
        audio_codec=None,
    )
    out = tmp_path / "plain.mp4"
    with VideoWriter(out, info=info, quality=10) as writer:
        for _ in range(4):
            writer.write(np.ascontiguousarray(astronaut[:240, :320]))
    result = verify_file(out, frames=2)
    assert not result.marked and result.watermark.frames_checked == 2


# ------------------------------------------------------------------- audit


def _entry(n: int, **kw) -> AuditEntry:
    fields = {
        "command": "swap",
        "inputs": (AuditInput(role="target", path=f"t{n}.jpg", sha256="0" * 64),),
        "options": {"n": n},
        "outcome": "ok",
        "watermark": WATERMARK_DISABLED,
        "output": f"o{n}.png",
        "user": "tester",
        "time": "2025-01-31T12:00:00Z",
    }
    return AuditEntry(**{**fields, **kw})


def test_audit_line_has_every_field(tmp_path):
    log = AuditLog(tmp_path / "audit.jsonl")
    log.append(_entry(1, run_id="00abcd", **outcome_of(InvalidOptionError("bad\nthing"))))
    (line,) = (tmp_path / "audit.jsonl").read_text().splitlines()
    data = json.loads(line)
    assert data["command"] == "swap" and data["user"] == "tester" and data["time"] == "2025-01-31T12:00:00Z"
    assert data["inputs"] == [{"role": "target", "path": "t1.jpg", "sha256": "0" * 64}]
    assert data["options"] == {"n": 1} and data["output"] == "o1.png" and data["run_id"] == "00abcd"
    assert (data["outcome"], data["code"], data["message"]) == ("error", "invalid_option", "bad thing")
    assert data["watermark"] == "disabled by --no-watermark"


def test_audit_rotation_keeps_every_line_in_order(tmp_path):
    path = tmp_path / "audit.jsonl"
    line_size = len(_entry(0).to_json()) + 1
    log = AuditLog(path, max_bytes=3 * line_size, backups=2)
    for n in range(11):
        log.append(_entry(n))
    files = [path.with_name("audit.jsonl.2"), path.with_name("audit.jsonl.1"), path]
    assert not path.with_name("audit.jsonl.3").exists()
    numbers = [json.loads(line)["options"]["n"] for f in files for line in f.read_text().splitlines()]
    # 11 lines, 3 fit in a file: rotated at lines 3, 6 and 9; lines 0-2 fell off the end
    assert numbers == [3, 4, 5, 6, 7, 8, 9, 10]
    assert all(f.stat().st_size <= 3 * line_size for f in files)


def test_audit_options_are_checked_and_paths_default(tmp_path):
    with pytest.raises(InvalidOptionError):
        AuditLog(tmp_path / "a.jsonl", max_bytes=0)
    with pytest.raises(InvalidOptionError):
        AuditLog(tmp_path / "a.jsonl", backups=-1)
    assert default_audit_path({"XDG_STATE_HOME": "/s"}).as_posix() == "/s/faceweave/audit.jsonl"
    assert default_audit_path({"HOME": "/h"}).as_posix() == "/h/.local/state/faceweave/audit.jsonl"
    assert (
        default_audit_path({"XDG_STATE_HOME": "relative", "HOME": "/h"}).as_posix()
        == "/h/.local/state/faceweave/audit.jsonl"
    )


def test_sha256_file(tmp_path):
    path = tmp_path / "x.txt"
    path.write_bytes(b"abc")
    assert sha256_file(path) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert sha256_file(tmp_path / "missing") is None


# ---------------------------------------------------- C2PA (optional extra)


@pytest.mark.parametrize("ext", ["png", "jpg"])
def test_c2pa_manifest_signs_offline_and_keeps_the_xmp_label(tmp_path, astronaut, ext):
    from faceweave.provenance import c2pa_manifest

    if not c2pa_manifest.available():
        pytest.skip("c2pa-python is not installed (pip install 'faceweave[c2pa]')")
    path = write_image(tmp_path / f"out.{ext}", astronaut, **image_metadata(PROV, f"out.{ext}"))
    signer = c2pa_manifest.C2paSigner(tmp_path / "keys")
    try:
        signer.sign(path, LABEL)
    finally:
        signer.close()
    assert (tmp_path / "keys/signer.key.pem").stat().st_mode & 0o077 == 0
    found = c2pa_manifest.read_manifest(path)
    assert found is not None and found["state"] == "Valid"
    (action,) = found["manifest"]["assertions"][0]["data"]["actions"]
    assert action["digitalSourceType"] == TRAINED_ALGORITHMIC_MEDIA
    assert from_xmp(read_xmp(path)) == LABEL and read_image(path).pixels.shape == astronaut.shape


def test_gif_comment_extension_is_added_and_read_back(tmp_path):
    import av
    from PIL import Image as PILImage

    from faceweave.video.io.sinks import with_gif_comment

    frames = [PILImage.fromarray(np.full((32, 48, 3), v, np.uint8)) for v in (10, 200)]
    plain = tmp_path / "plain.gif"
    frames[0].save(plain, save_all=True, append_images=frames[1:])
    text = "AI-generated (trainedAlgorithmicMedia) by faceweave " + "x" * 300  # more than one sub-block
    marked = tmp_path / "marked.gif"
    marked.write_bytes(with_gif_comment(plain.read_bytes(), text))
    with PILImage.open(marked) as pil:
        assert pil.info["comment"].decode() == text and pil.n_frames == 2
    with av.open(str(marked)) as container:
        assert container.metadata["comment"] == text
        assert sum(1 for _ in container.decode(video=0)) == 2
    assert with_gif_comment(b"not a gif", text) == b"not a gif"


@pytest.mark.slow
def test_a_gif_output_carries_the_label(tmp_path, faces_dir):
    from faceweave.provenance.stamp import writer_stamp
    from faceweave.provenance.verify import verify_file
    from faceweave.video.io import VideoReader, VideoWriter

    out = tmp_path / "out.gif"
    prov = Provenance.new()
    with (
        VideoReader(faces_dir / "video/lp_d18_talking_face.mp4", end=0.5) as reader,
        VideoWriter(out, info=reader.info, **writer_stamp(prov)) as writer,
    ):
        for frame in reader:
            writer.write(frame.pixels, frame.time)
    found = verify_file(out)
    assert found.label is not None and found.label.run_id == prov.run_hex
    assert found.watermark.found
