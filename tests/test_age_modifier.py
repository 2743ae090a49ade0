"""Age modifiers (FaceFusion's ``age_modifier``: FRAN, StyleGANEX) and the
face classifier FRAN's age comes from (FairFace): FaceFusion 3.8.1's steps
written out here beside faceweave's (its ``prepare_vision_frame``,
``normalize_extend_frame``, ``match_frame_color``, the direction of each
model, ``classify_face``'s classes; FaceFusion works in BGR, and both
models take RGB, so its flips cancel), then the modifier on faces, through
the options, the pipeline, the command line, a video and a live session,
on stand-in models with the real input and output names and shapes."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from tests.enhancer_fixtures import age_modifier_model, analysed_astronaut, face_classifier_model, stand_in_folder
from tests.test_cli import faceweave as _faceweave

from faceweave.analysis.face_classifier import AGE_CLASSES, FaceClassifier, classifier_input
from faceweave.compositing.facefusion import paste_area
from faceweave.enhancers.age import AgeModifier, match_colour, model_input, scale_points
from faceweave.errors import InvalidOptionError, ModelSignatureError
from faceweave.geometry.templates import estimate_alignment
from faceweave.options import SwapOptions

# --- FaceFusion 3.8.1's formulation, written out ------------------------------------


def ff_equalize(source: np.ndarray, target: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    small_source = cv2.resize(source, size, interpolation=cv2.INTER_AREA).astype(np.float32)
    small_target = cv2.resize(target, size, interpolation=cv2.INTER_AREA).astype(np.float32)
    difference = cv2.resize(small_source - small_target, target.shape[:2][::-1], interpolation=cv2.INTER_CUBIC)
    return np.add(target, difference).clip(0, 255).astype(np.uint8)


def ff_match(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    for side in np.linspace(16, target.shape[0], 3, endpoint=False):
        source = ff_equalize(source, target, (round(side / 2) * 2, round(side / 2) * 2))
    return ff_equalize(source, target, target.shape[:2][::-1])


def ff_prepare(frame_bgr: np.ndarray, mean: float, std: float) -> np.ndarray:
    frame = (frame_bgr[:, :, ::-1] / 255.0 - np.array([mean] * 3)) / np.array([std] * 3)
    return np.expand_dims(frame.transpose(2, 0, 1), axis=0).astype(np.float32)


def ff_fran_direction(age: range, direction: int) -> np.ndarray:
    years = np.mean(age)
    return (np.array([years, years + direction], dtype=np.float32) / 100).clip(0, 1)


def ff_styleganex_direction(direction: int) -> np.ndarray:
    return np.array(np.interp(direction, [-100, 100], [2.5, -2.5])).astype(np.float32)


@pytest.fixture(scope="module")
def astronaut():
    return analysed_astronaut()


def test_the_inputs_are_facefusion_s(astronaut):
    pixels, _ = astronaut
    crop = np.ascontiguousarray(pixels[50:306, 150:406])
    for mean, std in ((0.0, 1.0), (0.5, 0.5)):
        np.testing.assert_array_equal(model_input(crop, mean, std), ff_prepare(crop[:, :, ::-1], mean, std))
    five = np.array([[1, 2], [5, 2], [3, 4], [2, 6], [4, 6]], np.float64)
    np.testing.assert_allclose(scale_points(five, 0.875), (five - five[2]) * 0.875 + five[2])


def test_colour_matching_is_facefusion_s_to_the_bit(astronaut):
    pixels, _ = astronaut
    wide = cv2.resize(pixels, (384, 384), interpolation=cv2.INTER_AREA)
    made = np.ascontiguousarray(np.roll(cv2.resize(pixels, (1024, 1024)), 40, axis=1) // 2 + 60)
    np.testing.assert_array_equal(match_colour(wide, made), ff_match(wide, made))


@pytest.mark.parametrize("direction", [-100, -30, 0, 45, 100])
def test_each_model_gets_facefusion_s_direction(astronaut, direction):
    pixels, faces = astronaut

    class Recording:
        def __init__(self, inner):
            self.inner, self.inputs, self.outputs, self.fed = inner, inner.inputs, inner.outputs, []

        def run(self, feeds):
            self.fed.append(dict(feeds))
            return self.inner.run(feeds)

    classifier = FaceClassifier(face_classifier_model())
    age = classifier.classify(pixels, faces[0].kps5).age
    fran = Recording(age_modifier_model("fran"))
    AgeModifier(fran, name="fran", direction=direction, classifier=classifier).modify(pixels, faces)
    np.testing.assert_array_equal(fran.fed[0]["direction"], ff_fran_direction(age, direction))
    assert fran.fed[0]["target"].shape == (1, 3, 1024, 1024) and "target_with_background" not in fran.fed[0]
    style = Recording(age_modifier_model("styleganex"))
    AgeModifier(style, name="styleganex_age", direction=direction).modify(pixels, faces)
    np.testing.assert_array_equal(style.fed[0]["direction"], ff_styleganex_direction(direction))
    assert style.fed[0]["target_with_background"].shape == (1, 3, 384, 384)


def test_the_classifier_gives_facefusion_s_classes(astronaut):
    pixels, faces = astronaut
    found = FaceClassifier(face_classifier_model()).classify(pixels, faces[0].kps5)
    x = classifier_input(pixels, faces[0].kps5)
    expected_class = int(np.clip(np.floor(2 * x.mean() + 4), 0, 8))
    assert found.age == AGE_CLASSES[expected_class] and found.gender == "female" and found.race == "white"
    assert AGE_CLASSES[3] == range(20, 29) and AGE_CLASSES[-1] == range(70, 100)
    assert found.years == float(np.mean(found.age))


@pytest.mark.parametrize(("family", "name"), [("fran", "fran"), ("styleganex", "styleganex_age")])
def test_the_modifier_changes_the_face_and_the_direction_shows(astronaut, family, name):
    pixels, faces = astronaut
    classifier = FaceClassifier(face_classifier_model()) if family == "fran" else None
    model = age_modifier_model(family)
    older = AgeModifier(model, name=name, direction=80, classifier=classifier).modify(pixels, faces)
    younger = AgeModifier(model, name=name, direction=-80, classifier=classifier).modify(pixels, faces)
    changed = np.any(older != pixels, axis=2)
    five = np.asarray(faces[0].kps5, np.float64)
    where = ("ffhq_512", five) if family == "fran" else ("styleganex_384", scale_points(five, 0.875))
    x1, y1, x2, y2 = paste_area(pixels.shape, 1, estimate_alignment(where[1], where[0], 1))
    inside = np.zeros_like(changed)
    inside[y1:y2, x1:x2] = True
    assert changed.sum() > 5000 and not (changed & ~inside).any()  # only under the model's crop
    assert not np.array_equal(older, younger)
    assert AgeModifier(model, name=name, classifier=classifier).modify(pixels, []) is pixels


def test_an_age_modifier_refuses_what_it_cannot_run():
    with pytest.raises(InvalidOptionError, match="fran takes the face's age from the face classifier"):
        AgeModifier(age_modifier_model("fran"), name="fran")
    with pytest.raises(InvalidOptionError, match="unknown age modifier 'styleganex'"):
        AgeModifier(age_modifier_model("styleganex"), name="styleganex")
    with pytest.raises(InvalidOptionError, match="direction must be from -100 to 100"):
        AgeModifier(age_modifier_model("styleganex"), name="styleganex_age", direction=150)
    with pytest.raises(ModelSignatureError, match="styleganex_age: the model has no input 'target'"):
        AgeModifier(face_classifier_model(), name="styleganex_age")
    with pytest.raises(ValueError, match="unknown age modifier 'old'; one of fran, styleganex_age"):
        SwapOptions.model_validate({"enhance": {"age_modifier": "old"}})
    with pytest.raises(ValueError, match="less than or equal to 100"):
        SwapOptions.model_validate({"enhance": {"age_modifier_direction": 101}})


# --- through the pipeline and the command line --------------------------------------


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    """A model folder with the stand-ins, imported as users import them."""
    folder, files = tmp_path_factory.mktemp("models"), tmp_path_factory.mktemp("files")
    models = {
        "fran": age_modifier_model("fran"),
        "styleganex_age": age_modifier_model("styleganex"),
        "fairface": face_classifier_model(),
    }
    return stand_in_folder(folder, files, models)


def test_the_pipeline_ages_the_swapped_photo(models_dir, faces_dir):
    from faceweave.pipeline import FaceSwapper
    from faceweave.provenance.stamp import Provenance

    unmarked = Provenance.new(watermark=False)
    source, target = faces_dir / "single/biden2.jpg", faces_dir / "single/astronaut_eileen_collins.png"
    plain = FaceSwapper(SwapOptions(), provenance=unmarked).swap([source], target)
    options = SwapOptions.model_validate(
        {
            "enhance": {"age_modifier": "fran", "age_modifier_direction": 30},
            "runtime": {"models_dir": str(models_dir)},
        }
    )
    with FaceSwapper(options, provenance=unmarked) as swapper:
        aged = swapper.swap([source], target)
        chosen = [plain.faces[s.target_index] for s in plain.swapped]
        expected = swapper.enhancers.age.modify(plain.image, chosen)
    assert "age" in aged.timings_ms
    np.testing.assert_array_equal(aged.image, expected)


@pytest.mark.slow
def test_the_command_line_ages_photos_videos_and_live_sessions(models_dir, faces_dir, tmp_path):
    from faceweave.video.io import VideoReader

    source, target = faces_dir / "single/biden2.jpg", faces_dir / "single/astronaut_eileen_collins.png"
    clip = faces_dir / "video/lp_d18_talking_face.mp4"
    common = ["-s", source, "--no-watermark", "--audit-log", tmp_path / "a.jsonl", "--models-dir", models_dir]
    age = ["--age-modifier", "styleganex_age", "--age-modifier-direction", "40"]
    done = _faceweave("swap", "-t", target, "-o", tmp_path / "aged.png", *common, *age)
    assert done.returncode == 0, done.stderr
    done = _faceweave(
        "swap", "-t", clip, "-o", tmp_path / "aged.mp4", "--trim", "0-0.5", "--scale", "0.5", *common, *age
    )
    assert done.returncode == 0, done.stderr
    done = _faceweave("live", clip, "-o", tmp_path / "live.mkv", "--duration", "2", "--scale", "0.5", *common, *age)
    assert done.returncode == 0, done.stderr
    # the file swap writes all 15 frames; the live session, in real time, drops what a busy machine cannot swap
    for path, least in ((tmp_path / "aged.mp4", 15), (tmp_path / "live.mkv", 4)):
        with VideoReader(path) as reader:
            assert sum(1 for _ in reader) >= least, path
    bad = _faceweave("swap", "-t", target, "-o", tmp_path / "x.png", *common, "--age-modifier-direction", "120")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--age-modifier-direction" in bad.stderr, bad.stderr
    assert not (tmp_path / "x.png").exists()
