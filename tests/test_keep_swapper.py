"""``--swapper none``: the faces are found, selected and kept, and only the
processors after the swap run on them (a lip sync for a dub, a face
enhancer, an age modifier ...), with no source photo: through the options,
the library, the command line, a video and a live session."""

from __future__ import annotations

import numpy as np
import pytest
from tests.enhancer_fixtures import lip_syncer_model, stand_in_folder, voice_extractor_model
from tests.test_cli import faceweave as _faceweave

from faceweave.errors import InvalidOptionError
from faceweave.options import SwapOptions
from faceweave.provenance.stamp import Provenance

TARGET = "single/astronaut_eileen_collins.png"
UNMARKED = Provenance.new(watermark=False)


def test_the_options_want_something_to_do_with_the_kept_faces():
    with pytest.raises(ValueError, match="swapper 'none' keeps the faces: name what to do with them"):
        SwapOptions(swapper="none")
    chosen = SwapOptions.model_validate(
        {"swapper": "none", "enhance": {"lip_syncer": "wav2lip_96", "face": "gfpgan_1.4", "age_modifier": "fran"}}
    )
    assert chosen.enhance.processors() == ("age_modifier", "lip_syncer", "face_enhancer")


def test_the_keep_swapper_gives_the_crop_back(faces_dir):
    from faceweave.crops import cut_crop
    from faceweave.pipeline import FaceSwapper
    from faceweave.swappers.keep import KeepSwapper

    with FaceSwapper(SwapOptions()) as swapper:
        pixels = swapper.read(faces_dir / TARGET, role="target").pixels
        crop = cut_crop(pixels, swapper.find_faces(pixels)[0], face_size=256)
    out = KeepSwapper().swap(None, crop)  # type: ignore[arg-type]  # the source is not looked at
    assert out.face is crop.pixels and not out.coverage.any() and not out.changed.any()


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    folder, files = tmp_path_factory.mktemp("models"), tmp_path_factory.mktemp("files")
    models = {
        "edtalk_256": lip_syncer_model("edtalk"),
        "wav2lip_gan_96": lip_syncer_model("wav2lip"),
        "kim_vocal_2": voice_extractor_model(),
    }
    return stand_in_folder(folder, files, models)


def test_a_photo_s_kept_faces_go_through_the_processors_alone(models_dir, faces_dir):
    from faceweave.io.images import read_image
    from faceweave.pipeline import FaceSwapper

    options = SwapOptions.model_validate(
        {"swapper": "none", "enhance": {"lip_syncer": "edtalk_256"}, "runtime": {"models_dir": str(models_dir)}}
    )
    target = read_image(faces_dir / TARGET).pixels
    with FaceSwapper(options, provenance=UNMARKED) as swapper:
        result = swapper.swap([], faces_dir / TARGET)
        kept = [result.faces[s.target_index] for s in result.swapped]
        expected = swapper.enhancers.lips.sync(target, kept, None)
        with pytest.raises(InvalidOptionError, match="takes no source photo"):
            swapper.swap([faces_dir / "single/biden2.jpg"], faces_dir / TARGET)
    assert [s.source_index for s in result.swapped] == [None] and result.swapped[0].source_path is None
    np.testing.assert_array_equal(result.image, expected)


def test_the_command_line_keeps_a_photo_s_faces_and_refuses_what_does_not_fit(models_dir, faces_dir, tmp_path):
    out = tmp_path / "kept.png"
    base = ["swap", "-t", faces_dir / TARGET, "-o", out, "--no-watermark", "--audit-log", tmp_path / "a.jsonl"]
    lips = ["--lip-syncer", "edtalk_256", "--models-dir", models_dir]
    done = _faceweave(*base, "--swapper", "none", *lips)
    assert done.returncode == 0, done.stderr
    assert "<- kept" in done.stdout and "kept and processed" in done.stdout and out.is_file()
    out.unlink()
    cases = [
        (["--swapper", "none"], "name what to do with them"),
        (["--swapper", "none", *lips, "-s", faces_dir / "single/biden2.jpg"], "give no --source or --map"),
        (lips, "give a source photo with --source PHOTO"),
    ]
    for args, words in cases:
        done = _faceweave(*base, *args)
        assert done.returncode == 2 and words in done.stderr and done.stderr.count("\n") == 1, done.stderr
        assert not out.exists()


@pytest.mark.slow
def test_a_video_dub_and_a_live_stream_without_a_swap(models_dir, faces_dir, tmp_path):
    """A dub with the faces kept: above the lower face (Wav2Lip's hull) the
    frames are the target's own (quality 100: x264 without loss), the mouth
    moves with the speech; a live stream keeps its faces too."""
    from tests.test_lip_syncer import write_wav

    from faceweave.video.io import VideoReader

    clip = faces_dir / "video/lp_d18_talking_face.mp4"
    t = np.arange(2 * 48000) / 48000
    tone = (np.sin(2 * np.pi * 300 * t) * 9000).astype(np.int16)
    write_wav(tmp_path / "dub.wav", np.stack((tone, tone), axis=1), 48000)
    common = ["--swapper", "none", "--lip-syncer", "wav2lip_gan_96", "--models-dir", models_dir, "--no-watermark"]
    common += ["--audit-log", tmp_path / "a.jsonl"]
    plain, dubbed = tmp_path / "plain.mp4", tmp_path / "dub.mp4"
    done = _faceweave("swap", "-t", clip, "-o", dubbed, "--trim", "0-1", "--quality", "100", *common,
                      "--lip-syncer-audio", tmp_path / "dub.wav")  # fmt: skip
    assert done.returncode == 0, done.stderr
    from faceweave.video.io import VideoWriter

    with VideoReader(clip, end=1.0) as reader, VideoWriter(plain, info=reader.info, quality=0) as writer:
        for frame in reader:
            writer.write(frame.pixels, frame.time)
    with VideoReader(dubbed) as a, VideoReader(plain) as b:
        pairs = [(x.pixels.astype(int), y.pixels.astype(int)) for x, y in zip(a, b, strict=True)]
    assert len(pairs) == 30
    corner = max(np.abs(x[:40] - y[:40]).max() for x, y in pairs)  # the top rows: hair and forehead
    face = max(np.abs(x - y).max() for x, y in pairs)
    assert corner == 0 and face > 5, (corner, face)
    done = _faceweave("live", clip, "-o", tmp_path / "live.mkv", "--duration", "1", *common)
    assert done.returncode == 0, done.stderr
    with VideoReader(tmp_path / "live.mkv") as reader:
        assert sum(1 for _ in reader) > 5


def test_the_service_keeps_faces_with_no_source_photo(models_dir, faces_dir, tmp_path):
    """POST /v1/swap with swapper 'none' and the lip syncer: a target alone is enough; a source is refused (422)."""
    import json

    from tests.service_fixtures import running_app, settings

    config = settings(tmp_path, workers=0, sync_slots=1, runtime={"models_dir": str(models_dir)})
    target = ("t.png", (faces_dir / TARGET).read_bytes())
    fields = {"options": json.dumps({"swapper": "none", "lip_syncer": "edtalk_256"})}
    with running_app(config) as client:
        kept = client.post("/v1/swap", files={"target": target}, data=fields, headers={"accept": "application/json"})
        assert kept.status_code == 200, kept.text
        assert kept.json()["faces_swapped"] == 1
        source = ("s.jpg", (faces_dir / "single/biden2.jpg").read_bytes())
        refused = client.post("/v1/swap", files={"target": target, "source": source}, data=fields)
        assert refused.status_code == 422, refused.text
        assert "send no 'source'" in refused.json()["error"]["message"]
        missing = client.post("/v1/swap", files={"target": target}, data={"swapper": "mesh"})
        assert missing.status_code == 422 and "send a 'source' photo" in missing.json()["error"]["message"]
