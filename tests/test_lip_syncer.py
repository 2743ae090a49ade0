"""The lip syncer (FaceFusion's ``lip_syncer``: Wav2Lip, Wav2Lip-GAN, EDTalk)
and its speech (``voice_extractor``, ``audio.py``): FaceFusion 3.8.1's
steps written out here beside faceweave's (its ``prepare_crop_frame``,
``normalize_crop_frame``, ``prepare_audio_frame`` and
``extract_audio_frames``; FaceFusion works in BGR), the voice extractor's
pieces and their inverse, the mel features on tones, then the lip syncer on
faces, through the options, the pipeline, the command line, a video (in
step with its audio, or a dub) and a live session, on stand-in models with
the real input and output names and shapes."""

from __future__ import annotations

import wave

import numpy as np
import pytest
from tests.enhancer_fixtures import analysed_astronaut, lip_syncer_model, stand_in_folder, voice_extractor_model
from tests.test_cli import faceweave as _faceweave

from faceweave.audio import features
from faceweave.audio.reading import SAMPLE_RATE, read_audio
from faceweave.audio.speech import Speech, samples_speech
from faceweave.audio.voice import VoiceExtractor
from faceweave.enhancers.lips import LipSyncer, box_crop, face_points68, model_face, wav2lip_input
from faceweave.errors import InvalidOptionError, ModelSignatureError, UnreadableFileError, UnsupportedFormatError
from faceweave.options import SwapOptions
from faceweave.types import Face

# --- FaceFusion 3.8.1's formulation (BGR), written out ----------------------------


def ff_prepare_wav2lip(area_bgr: np.ndarray) -> np.ndarray:
    frame = np.expand_dims(area_bgr, axis=0)
    blanked = frame.copy()
    blanked[:, 96 // 2 :] = 0
    return np.concatenate((blanked, frame), axis=3).transpose(0, 3, 1, 2).astype(np.float32) / 255.0


def ff_normalize(output: np.ndarray) -> np.ndarray:
    return (output[0].transpose(1, 2, 0).clip(0, 1) * 255).astype(np.uint8)


def ff_audio_frame(window: np.ndarray, weight: float | None) -> np.ndarray:
    frame = np.log10(np.maximum(np.exp(-5 * np.log(10)), window)) * 1.6 + 3.2
    frame = frame.clip(-4, 4).astype(np.float32)
    if weight is not None:
        frame = frame * weight * 2.0
    return np.expand_dims(frame, axis=(0, 1))


def ff_audio_frames(spectrogram: np.ndarray, fps: float) -> list[np.ndarray]:
    indices = np.arange(0, spectrogram.shape[1], 80 / fps).astype(np.int16)
    return [spectrogram[:, max(0, i - 16) : i] for i in indices[indices >= 16]]


@pytest.fixture(scope="module")
def astronaut():
    return analysed_astronaut()


def _words(seed: int) -> np.ndarray:
    return np.abs(np.random.default_rng(seed).normal(size=(80, 16))) * 3.0


def test_the_wav2lip_input_and_output_are_facefusion_s(astronaut):
    pixels, _ = astronaut
    area = np.ascontiguousarray(pixels[100:196, 180:276])
    np.testing.assert_array_equal(wav2lip_input(area), ff_prepare_wav2lip(area[:, :, ::-1]))
    output = np.random.default_rng(1).uniform(-0.2, 1.2, (1, 3, 96, 96)).astype(np.float32)
    np.testing.assert_array_equal(model_face(output, bgr=True), ff_normalize(output)[:, :, ::-1])


@pytest.mark.parametrize("weight", [None, 0.0, 0.35, 1.0])
def test_the_speech_input_is_facefusion_s(weight):
    window = _words(2)
    window[3, :4] = 0.0  # below FaceFusion's floor of 1e-5
    scale = None if weight is None else weight * 2.0
    np.testing.assert_array_equal(features.speech_input(window, scale=scale), ff_audio_frame(window, weight))
    silence = ff_audio_frame(np.zeros((80, 16), np.int16), weight)
    np.testing.assert_array_equal(features.speech_input(None, scale=scale), silence)


@pytest.mark.parametrize("fps", [25.0, 30.0, 30000 / 1001, 24.0, 60.0])
def test_each_frame_gets_facefusion_s_window(fps):
    mel = np.random.default_rng(3).uniform(0, 1, (80, 400))
    speech = Speech(mel, fps=fps, offset=2.0)
    theirs = ff_audio_frames(mel, fps)
    assert speech.frames == len(theirs)
    for number, window in enumerate(theirs):
        np.testing.assert_array_equal(speech.window(number), window)
        np.testing.assert_array_equal(speech.at(2.0 + number / fps), window)
    assert speech.window(len(theirs)) is None and speech.at(1.0) is None


def test_the_mel_features_put_a_tone_in_its_band():
    """80 columns a second; a 1 kHz tone's energy is in the filter whose
    triangle peaks nearest 1 kHz; a silent track stays silent (no NaN)."""
    bank = features.mel_filter_bank()
    assert bank.shape == (80, 401) and bank.max() <= 1.0 and np.all(bank.sum(axis=1) > 0)
    seconds = 2.0
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    tone = (np.sin(2 * np.pi * 1000 * t) * 10000).astype(np.int16)
    mel = features.spectrogram(features.prepare_voice(np.stack((tone, tone), axis=1)))
    assert abs(mel.shape[1] - seconds * 80) <= 1
    centres = bank.argmax(axis=1) * features.FEATURE_RATE / features.MEL_BINS
    assert abs(centres[int(np.argmax(mel[:, 40:120].mean(axis=1)))] - 1000) < 100
    quiet = features.spectrogram(features.prepare_voice(np.zeros((SAMPLE_RATE, 2), np.int16)))
    assert np.all(np.isfinite(quiet)) and not np.any(quiet)


# --- the voice extractor --------------------------------------------------------------


def _stereo(seconds: float, *, seed: int = 0) -> np.ndarray:
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    left = np.sin(2 * np.pi * 440 * t) + 0.3 * np.sin(2 * np.pi * 2500 * t)
    right = np.sin(2 * np.pi * 3000 * t + 1.0) * np.linspace(0.2, 1.0, len(t))
    return (np.stack((left, right), axis=1) * 9000).astype(np.int16)


@pytest.mark.parametrize("seconds", [1.3, 7.0])
def test_the_voice_extractor_s_pieces_go_back_together(seconds):
    """With a model that keeps every sound, the voice is the audio itself
    (as floats), across the pieces, the chunks and their overlaps (7 s: two
    chunks), but for a few samples at each chunk's very ends, which the
    transform's window cannot reach (FaceFusion's chunks have them too); a
    model that halves gives half."""
    from faceweave.audio.voice import CHUNK, STEP

    audio = _stereo(seconds)
    voice = VoiceExtractor(voice_extractor_model(), name="kim_vocal_2").extract(audio)
    assert voice.shape == audio.shape and voice.dtype == np.float32
    ends = [0, len(audio)] + [e for s in range(STEP, len(audio), STEP) for e in (s, min(s - STEP + CHUNK, len(audio)))]
    inner = np.ones(len(audio), bool)
    for end in ends:
        inner[max(0, end - 16) : end + 16] = False
    np.testing.assert_allclose(voice[inner], audio[inner] / 32767.0, atol=2e-3)
    assert inner.sum() > len(audio) - 200
    half = VoiceExtractor(voice_extractor_model(scale=0.5), name="uvr_mdxnet").extract(audio)
    np.testing.assert_allclose(half, voice / 2, atol=1e-4)


def test_a_voice_extractor_of_the_wrong_shape_or_name_is_refused():
    from onnx import TensorProto, helper
    from tests.enhancer_fixtures import OrtModel, _model

    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 2, 3072, 256])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 2, 3072, 256])
    wrong = OrtModel(_model([helper.make_node("Identity", ["input"], ["output"])], [x], [y]))
    with pytest.raises(ModelSignatureError, match=r"kim_vocal_1: input 'input' expected shape \[N, 4, 3072, 256\]"):
        VoiceExtractor(wrong, name="kim_vocal_1")
    with pytest.raises(InvalidOptionError, match="unknown voice extractor 'kim'"):
        VoiceExtractor(voice_extractor_model(), name="kim")


def test_the_speech_of_samples_follows_the_sound():
    """Loud in the second half only: the frames of the first half get a
    window of silence (the model's -4 everywhere), those of the second do not."""
    audio = _stereo(2.0)
    audio[:SAMPLE_RATE] = 0
    speech = samples_speech(audio, fps=25.0)
    quiet, loud = features.speech_input(speech.window(5)), features.speech_input(speech.window(40))
    assert np.all(quiet == -4.0) and loud.max() > 0.0


# --- the lip syncer on faces --------------------------------------------------------


@pytest.mark.parametrize(("family", "name"), [("wav2lip", "wav2lip_gan_96"), ("edtalk", "edtalk_256")])
def test_the_lip_syncer_moves_the_mouth_and_nothing_above_it(astronaut, family, name):
    pixels, faces = astronaut
    syncer = LipSyncer(lip_syncer_model(family), name=name, weight=0.5)
    said, other = syncer.sync(pixels, faces, _words(4)), syncer.sync(pixels, faces, _words(5))
    silent = syncer.sync(pixels, faces, None)
    mouth = faces[0].mesh[[13, 14], :2].mean(axis=0).astype(int)
    y, x = mouth[1], mouth[0]
    assert np.abs(said[y - 3 : y + 3, x - 3 : x + 3].astype(int) - silent[y - 3 : y + 3, x - 3 : x + 3]).max() > 0
    assert not np.array_equal(said, other)
    changed = np.any(said != pixels, axis=2)
    if family == "wav2lip":  # under the lower face's hull: nothing at the eyes
        eyes = faces[0].mesh[[33, 263], 1].max()
        assert not changed[: int(eyes) + 1].any() and changed.sum() > 500
    assert syncer.sync(pixels, [], _words(4)) is pixels


def test_wav2lip_s_weight_scales_the_speech(astronaut):
    """Weight 0 scales Wav2Lip's speech to nothing: any words, or silence, give one mouth."""
    pixels, faces = astronaut
    mute = LipSyncer(lip_syncer_model("wav2lip"), name="wav2lip_96", weight=0.0)
    said = mute.sync(pixels, faces, _words(4))
    np.testing.assert_array_equal(said, mute.sync(pixels, faces, _words(9)))
    np.testing.assert_array_equal(said, mute.sync(pixels, faces, None))
    loud = LipSyncer(lip_syncer_model("wav2lip"), name="wav2lip_96", weight=1.0)
    assert not np.array_equal(loud.sync(pixels, faces, _words(4)), loud.sync(pixels, faces, _words(9)))


class _Recording:
    """A model that records what it was given."""

    def __init__(self, inner) -> None:
        self.inner, self.inputs, self.outputs, self.fed = inner, inner.inputs, inner.outputs, []

    def run(self, feeds):
        self.fed.append({k: np.array(v) for k, v in feeds.items()})
        return self.inner.run(feeds)


def test_the_models_are_fed_as_facefusion_feeds_them(astronaut):
    from faceweave.compositing.facefusion import crop_points
    from faceweave.geometry.templates import warp_to_template

    pixels, faces = astronaut
    wav2lip = _Recording(lip_syncer_model("wav2lip"))
    LipSyncer(wav2lip, name="wav2lip_gan_96", weight=0.25).sync(pixels, faces, _words(6))
    crop, matrix = warp_to_template(pixels, np.asarray(faces[0].kps5, np.float64), "ffhq_512", 512)
    area, _ = box_crop(crop, crop_points(face_points68(faces[0]), matrix).astype(np.float32), 96)
    fed = wav2lip.fed[0]
    np.testing.assert_allclose(fed["target"], wav2lip_input(area), atol=1 / 255 + 1e-6)
    assert not fed["target"][0, :3, 48:].any() and fed["target"][0, :3, :48].any()
    np.testing.assert_array_equal(fed["source"], ff_audio_frame(_words(6), 0.25))
    edtalk = _Recording(lip_syncer_model("edtalk"))
    LipSyncer(edtalk, name="edtalk_256", weight=0.75).sync(pixels, faces, _words(6))
    assert edtalk.fed[0]["weight"].tolist() == [0.75] and edtalk.fed[0]["target"].shape == (1, 3, 256, 256)
    np.testing.assert_array_equal(edtalk.fed[0]["source"], ff_audio_frame(_words(6), None))


def test_a_face_with_only_five_points_is_left_to_edtalk(astronaut):
    """Wav2Lip needs the 68 points (its box and lower face); a face kept
    from a detector's five points alone is left as it is."""
    pixels, faces = astronaut
    bare = Face(bbox=faces[0].bbox, score=0.9, mesh=None, pose=faces[0].pose, landmarks5=faces[0].kps5)
    assert face_points68(bare) is None
    wav2lip = LipSyncer(lip_syncer_model("wav2lip"), name="wav2lip_96")
    np.testing.assert_array_equal(wav2lip.sync(pixels, [bare], _words(1)), pixels)
    edtalk = LipSyncer(lip_syncer_model("edtalk"), name="edtalk_256")
    assert not np.array_equal(edtalk.sync(pixels, [bare], _words(1)), pixels)


def test_a_lip_syncer_refuses_what_it_cannot_run():
    with pytest.raises(ModelSignatureError, match=r"wav2lip_96: input 'target' expected shape \[N, 6, 96, 96\]"):
        LipSyncer(lip_syncer_model("edtalk"), name="wav2lip_96")
    with pytest.raises(ModelSignatureError, match="edtalk_256: the model has no input 'weight'"):
        LipSyncer(lip_syncer_model("edtalk", weight=False), name="edtalk_256")
    with pytest.raises(InvalidOptionError, match="unknown lip syncer 'wav2lip'"):
        LipSyncer(lip_syncer_model("wav2lip"), name="wav2lip")
    with pytest.raises(InvalidOptionError, match="lip syncer weight must be from 0 to 1"):
        LipSyncer(lip_syncer_model("wav2lip"), name="wav2lip_96", weight=1.5)


def test_the_options_name_the_lip_syncers_and_voice_extractors():
    chosen = SwapOptions.model_validate({"enhance": {"lip_syncer": "wav2lip_96", "voice_extractor": "none"}})
    assert chosen.enhance.lip_syncer == "wav2lip_96" and chosen.enhance.voice_extractor == "none"
    with pytest.raises(ValueError, match="unknown lip syncer 'w'; one of wav2lip_gan_96, wav2lip_96, edtalk_256"):
        SwapOptions.model_validate({"enhance": {"lip_syncer": "w"}})
    with pytest.raises(ValueError, match="kim_vocal_2, kim_vocal_1, uvr_mdxnet, none"):
        SwapOptions.model_validate({"enhance": {"voice_extractor": "kim"}})
    with pytest.raises(ValueError, match="choose one, --lip-syncer"):
        SwapOptions.model_validate({"enhance": {"lip_syncer_audio": "dub.wav"}})


# --- audio files --------------------------------------------------------------------


def write_wav(path, samples: np.ndarray, rate: int) -> None:
    """``samples`` ``(N,)`` or ``(N, C)`` int16 as a WAV file."""
    samples = samples.reshape(len(samples), -1)
    with wave.open(str(path), "wb") as out:
        out.setnchannels(samples.shape[1])
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(np.ascontiguousarray(samples).tobytes())


def test_an_audio_file_is_read_at_48_khz_in_its_window(tmp_path):
    t = np.arange(16000 * 3) / 16000
    write_wav(tmp_path / "a.wav", (np.sin(2 * np.pi * 300 * t) * 8000).astype(np.int16), 16000)
    whole = read_audio(tmp_path / "a.wav")
    assert whole.dtype == np.int16 and whole.shape[1] == 2 and abs(len(whole) - 3 * SAMPLE_RATE) < 100
    np.testing.assert_array_equal(whole[:, 0], whole[:, 1])
    part = read_audio(tmp_path / "a.wav", start=1.0, end=2.5)
    assert abs(len(part) - 1.5 * SAMPLE_RATE) < 100
    np.testing.assert_allclose(part[:1000, 0], whole[SAMPLE_RATE : SAMPLE_RATE + 1000, 0], atol=2)


def test_a_bad_audio_file_is_refused_with_what_was_wrong(tmp_path, faces_dir):
    (tmp_path / "empty.wav").write_bytes(b"")
    (tmp_path / "text.wav").write_text("not audio at all\n" * 50)
    cases = [
        (tmp_path / "missing.wav", UnreadableFileError, "does not exist"),
        (tmp_path, UnreadableFileError, "is a directory"),
        (tmp_path / "empty.wav", UnreadableFileError, "is empty"),
        (tmp_path / "text.wav", UnsupportedFormatError, "not a file FFmpeg can read"),
        (faces_dir / "video/short_hamilton_clip.mp4", UnsupportedFormatError, "has no audio stream"),
    ]
    for path, error, words in cases:
        with pytest.raises(error, match=words):
            read_audio(path)


# --- through the pipeline and the command line --------------------------------------


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    """A model folder with the lip syncer and voice extractor stand-ins, imported as users import them."""
    folder, files = tmp_path_factory.mktemp("models"), tmp_path_factory.mktemp("files")
    models = {
        "wav2lip_gan_96": lip_syncer_model("wav2lip"),
        "edtalk_256": lip_syncer_model("edtalk"),
        "kim_vocal_2": voice_extractor_model(),
    }
    return stand_in_folder(folder, files, models)


def test_a_photo_s_lips_close_to_silence(models_dir, faces_dir):
    from faceweave.pipeline import FaceSwapper
    from faceweave.provenance.stamp import Provenance

    unmarked = Provenance.new(watermark=False)
    source, target = faces_dir / "single/biden2.jpg", faces_dir / "single/astronaut_eileen_collins.png"
    plain = FaceSwapper(SwapOptions(), provenance=unmarked).swap([source], target)
    options = SwapOptions.model_validate(
        {"enhance": {"lip_syncer": "wav2lip_gan_96"}, "runtime": {"models_dir": str(models_dir)}}
    )
    with FaceSwapper(options, provenance=unmarked) as swapper:
        synced = swapper.swap([source], target)
        chosen = [plain.faces[s.target_index] for s in plain.swapped]
        expected = swapper.enhancers.lips.sync(plain.image, chosen, None)
    assert "lips" in synced.timings_ms
    np.testing.assert_array_equal(synced.image, expected)


def _frames(path) -> list[np.ndarray]:
    from faceweave.video.io import VideoReader

    with VideoReader(path) as reader:
        return [frame.pixels.astype(int) for frame in reader]


def _audio_seconds(path) -> float:
    import av

    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        return float(stream.duration * stream.time_base)


def _in_step(synced: list[np.ndarray], silent: list[np.ndarray]) -> tuple[int, int]:
    """The largest change over the first half's frames and the smallest over
    the second's, between a video synced to speech silent for its first
    second and loud for its second, and the same synced to silence.

    A frame's window runs 0.2 s past it, so the last few frames of the first
    half hear the tone; the resampling to 16 kHz is periodic (scipy's FFT
    resampling, as FaceFusion's), so the very first frames hear its end; and
    FaceFusion's windows start 16 columns (0.2 s) in, so the last 0.2 s of
    speech as long as the video has none."""
    half = len(synced) // 2
    assert len(synced) == len(silent) and half > 10
    first = max(np.abs(a - b).max() for a, b in zip(synced[3 : half - 8], silent[3 : half - 8], strict=True))
    second = min(np.abs(a - b).max() for a, b in zip(synced[half + 1 : -8], silent[half + 1 : -8], strict=True))
    return first, second


@pytest.mark.slow
def test_a_video_s_lips_follow_a_dub_or_its_own_audio_in_step(models_dir, faces_dir, tmp_path):
    """Lips synced to a 2 s dub, silent then loud, against a silent dub: the
    same frames while the dub is silent, others once it speaks; the output
    carries the dub.  Then that output, synced to its own audio (the dub),
    against a silent dub: the same again.  At quality 100 (CRF 0) the same
    frames in give the same frames out."""
    source, clip = faces_dir / "single/biden2.jpg", faces_dir / "video/lp_d18_talking_face.mp4"
    common = ["-s", source, "--scale", "0.5", "--no-watermark", "--quality", "100", "--audit-log", tmp_path / "a.jsonl"]
    common += ["--models-dir", models_dir, "--lip-syncer", "wav2lip_gan_96"]
    t = np.arange(2 * SAMPLE_RATE) / SAMPLE_RATE
    loud = (np.sin(2 * np.pi * 220 * t) * 12000 * (t >= 1.0)).astype(np.int16)
    write_wav(tmp_path / "dub.wav", np.stack((loud, loud), axis=1), SAMPLE_RATE)
    write_wav(tmp_path / "mute.wav", np.zeros((2 * SAMPLE_RATE, 2), np.int16), SAMPLE_RATE)
    mute = ["--lip-syncer-audio", tmp_path / "mute.wav", "--voice-extractor", "none"]
    runs = {
        "dub": [clip, "--trim", "1-3", "--lip-syncer-audio", tmp_path / "dub.wav"],
        "mute": [clip, "--trim", "1-3", *mute],
        "own": [tmp_path / "dub.mp4"],
        "own_mute": [tmp_path / "dub.mp4", *mute],
    }
    for name, extra in runs.items():
        done = _faceweave("swap", "-o", tmp_path / f"{name}.mp4", *common, "-t", *extra)
        assert done.returncode == 0, done.stderr
    assert abs(_audio_seconds(tmp_path / "dub.mp4") - 2.0) < 0.1
    first, second = _in_step(_frames(tmp_path / "dub.mp4"), _frames(tmp_path / "mute.mp4"))
    assert first == 0 and second >= 3, (first, second)
    first, second = _in_step(_frames(tmp_path / "own.mp4"), _frames(tmp_path / "own_mute.mp4"))
    assert first == 0 and second >= 3, (first, second)


@pytest.mark.slow
def test_the_command_line_refuses_what_the_lip_syncer_cannot_follow(models_dir, faces_dir, tmp_path):
    source = faces_dir / "single/biden2.jpg"
    base = ["swap", "-s", source, "-o", tmp_path / "o.mp4", "--no-watermark", "--audit-log", tmp_path / "a.jsonl"]
    silent = ["-t", faces_dir / "video/short_hamilton_clip.mp4"]
    (tmp_path / "text.wav").write_text("not audio\n" * 40)
    cases = [
        ([*silent, "--lip-syncer", "edtalk_256", "--models-dir", models_dir], "has no audio for the lip syncer"),
        ([*silent, "--lip-syncer-audio", tmp_path / "text.wav"], "choose one, --lip-syncer"),
        (
            [
                *silent,
                "--lip-syncer",
                "edtalk_256",
                "--models-dir",
                models_dir,
                "--lip-syncer-audio",
                tmp_path / "text.wav",
            ],
            "not a file FFmpeg can read",
        ),
        ([*silent, "--lip-syncer", "wav2lip_96", "--models-dir", models_dir], "wav2lip_96 is not present"),
    ]
    lonely = tmp_path / "models"  # the lip syncer without its voice extractor
    lonely.mkdir()
    (lonely / "edtalk_256.onnx").symlink_to(models_dir / "edtalk_256.onnx")
    spoken = ["-t", faces_dir / "video/lp_d18_talking_face.mp4", "--lip-syncer", "edtalk_256"]
    cases.append(([*spoken, "--models-dir", lonely], "voice extractor kim_vocal_2: model kim_vocal_2 is not present"))
    for args, words in cases:
        done = _faceweave(*base, *args)
        assert done.returncode == 2 and words in done.stderr and done.stderr.count("\n") == 1, done.stderr
        assert not (tmp_path / "o.mp4").exists()


@pytest.mark.slow
def test_a_live_session_s_lips_get_silence(models_dir, faces_dir, tmp_path):
    source, clip = faces_dir / "single/biden2.jpg", faces_dir / "video/lp_d18_talking_face.mp4"
    common = ["-s", source, "--scale", "0.5", "--no-watermark", "--audit-log", tmp_path / "a.jsonl"]
    recording = tmp_path / "live.mkv"
    lips = ["--lip-syncer", "edtalk_256", "--models-dir", models_dir]
    done = _faceweave("live", clip, "-o", recording, "--duration", "1", *common, *lips, "--json")
    assert done.returncode == 0, done.stderr
    assert _frames(recording)
