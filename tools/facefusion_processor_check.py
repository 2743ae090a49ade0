"""faceweave's frame colorizer, background remover and lip syncer beside
FaceFusion's own ``frame_colorizer``, ``background_remover`` and
``lip_syncer`` functions, on the same frame with the same stand-in models
(``tests/enhancer_fixtures.py``: the real input and output names and
shapes): every colorizer at every size and two blends, every background
remover with four fill and despill colours, the voice extractor and the mel
windows of one audio track, and every lip syncer at three weights on those
windows.

FaceFusion is not a dependency: give a checkout of it (kept outside this
repository; ``git archive`` of facefusion/facefusion is enough) and a
folder with the two packages it imports that faceweave does not
(``pip install --target DIR tqdm psutil``)::

    .venv/bin/python tools/facefusion_processor_check.py --facefusion /tmp/ff --deps /tmp/ffdeps

Prints, per case, the share of identical pixels (or values) and the largest
difference; the lip syncer also the PSNR (FaceFusion fits the face's
alignment by RANSAC, faceweave in closed form, so the crops differ a little).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
#: (fill, despill) RGBA colours the removers are run with
COLOURS = (
    ((0, 0, 0, 0), (0, 0, 0, 0)),
    ((0, 255, 0, 255), (0, 0, 0, 0)),
    ((10, 20, 200, 128), (0, 255, 0, 200)),
    ((255, 255, 255, 255), (30, 200, 60, 255)),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facefusion", type=Path, required=True, help="a FaceFusion checkout (its source folder)")
    parser.add_argument("--deps", type=Path, help="a folder with tqdm and psutil")
    args = parser.parse_args()
    sys.path[:0] = [str(args.facefusion), str(ROOT)]
    if args.deps is not None:
        sys.path.append(str(args.deps))
    from facefusion import state_manager
    from skimage.data import astronaut

    state_manager.init_item("download_providers", ["github"])
    photo = np.ascontiguousarray(astronaut())
    colorizers(state_manager, photo)
    removers(state_manager, photo)
    windows = speech(state_manager)
    lips(state_manager, photo, windows)
    ages(state_manager, photo)
    expressions(state_manager, photo)
    edits(state_manager, photo)
    deep_swaps(state_manager, photo)
    return 0


def colorizers(state_manager, photo: np.ndarray) -> None:
    from facefusion.processors.modules.frame_colorizer import core
    from tests.enhancer_fixtures import colorizer_model

    from faceweave import names
    from faceweave.enhancers.colorizer import FrameColorizer

    for name, family in names.FRAME_COLORIZERS.items():
        model = colorizer_model(family)
        core.get_inference_pool = lambda model=model: _Pool(model)
        for size in names.FRAME_COLORIZER_SIZES:
            for blend in (100, 60):
                state_manager.init_item("frame_colorizer_model", name)
                state_manager.init_item("frame_colorizer_size", f"{size}x{size}")
                state_manager.init_item("frame_colorizer_blend", blend)
                theirs = core.colorize_frame(np.ascontiguousarray(photo[..., ::-1]))[..., ::-1]
                ours = FrameColorizer(model, name=name, size=size).colorize(photo, blend=blend / 100)
                _report(f"{name} {size} blend {blend}", ours, theirs)


def removers(state_manager, photo: np.ndarray) -> None:
    from facefusion.processors.modules.background_remover import core
    from tests.enhancer_fixtures import remover_model

    from faceweave import names
    from faceweave.enhancers.background import BackgroundRemover

    for name, family in names.BACKGROUND_REMOVERS.items():
        model = remover_model(family)
        core.get_inference_pool = lambda model=model: _Pool(model)
        for fill, despill in COLOURS:
            state_manager.init_item("background_remover_model", name)
            state_manager.init_item("background_remover_fill_color", fill)
            state_manager.init_item("background_remover_despill_color", despill)
            pixels, mask = core.remove_background(np.ascontiguousarray(photo[..., ::-1]))
            removed = BackgroundRemover(model, name=name, fill=fill, despill=despill).remove(photo)
            _report(f"{name} fill {fill} despill {despill}", removed.pixels, pixels[..., ::-1], removed.mask, mask)


def speech(state_manager) -> list[np.ndarray]:
    """The voice and mel windows of a 6 s stereo track (two chunks of the
    voice extractor) by FaceFusion's ``batch_extract_voice``,
    ``prepare_voice``, ``create_spectrogram`` and ``extract_audio_frames``
    and by faceweave's; returns FaceFusion's windows at 25 fps."""
    from facefusion import audio, voice_extractor
    from tests.enhancer_fixtures import voice_extractor_model

    from faceweave.audio import features
    from faceweave.audio.speech import Speech
    from faceweave.audio.voice import VoiceExtractor

    rng = np.random.default_rng(0)
    t = np.arange(6 * 48000) / 48000
    tone = np.sin(2 * np.pi * 180 * t) * (1 + np.sin(2 * np.pi * 3 * t)) + 0.2 * rng.normal(size=t.shape)
    samples = (np.stack((tone, np.roll(tone, 500)), axis=1) * 8000).astype(np.int16)
    model = voice_extractor_model(scale=0.7)
    voice_extractor.get_inference_pool = lambda: _Pool(model)
    state_manager.init_item("voice_extractor_model", "kim_vocal_2")
    theirs = voice_extractor.batch_extract_voice(samples, 240 * 1024, 180 * 1024)
    ours = VoiceExtractor(model, name="kim_vocal_2").extract(samples)
    _report("voice extractor kim_vocal_2 (voice)", ours, theirs)
    mel = audio.create_spectrogram(audio.prepare_voice(theirs))
    ours_mel = features.spectrogram(features.prepare_voice(ours))
    _report("mel spectrogram", ours_mel, mel)
    windows = audio.extract_audio_frames(mel, 25)
    speech = Speech(ours_mel, fps=25.0)
    worst = max(float(np.abs(speech.window(k) - w).max()) for k, w in enumerate(windows))
    print(f"{'mel windows at 25 fps':60s} {speech.frames} of {len(windows)}, max {worst:.3g}")
    return windows


def lips(state_manager, photo: np.ndarray, windows: list[np.ndarray]) -> None:
    from facefusion.processors.modules.lip_syncer import core
    from facefusion.types import Face as FaceFusionFace
    from tests.enhancer_fixtures import lip_syncer_model

    from faceweave import names
    from faceweave.analysis import FaceAnalyser
    from faceweave.enhancers.lips import LipSyncer, face_points68

    face = FaceAnalyser().analyse(photo)[0]
    five, points = np.asarray(face.kps5, np.float32), face_points68(face)
    marks = {"5": five, "5/68": five, "68": points, "68/5": points}
    theirs_face = FaceFusionFace(None, None, None, marks, 0, None, None, None, None, None)
    state_manager.init_item("face_mask_types", ["box"])
    state_manager.init_item("face_mask_blur", 0.3)
    state_manager.init_item("face_mask_padding", (0, 0, 0, 0))
    for name, family in names.LIP_SYNCERS.items():
        model = lip_syncer_model(family)
        core.get_inference_pool = lambda model=model: _Pool(model)
        for weight in (0.0, 0.5, 1.0):
            state_manager.init_item("lip_syncer_model", name)
            state_manager.init_item("lip_syncer_weight", weight)
            for k in (0, 40, 90):
                bgr = np.ascontiguousarray(photo[..., ::-1])
                theirs = core.sync_lip(theirs_face, windows[k], bgr)[..., ::-1]
                ours = LipSyncer(model, name=name, weight=weight).sync(photo, [face], windows[k])
                _report(f"{name} weight {weight} frame {k}", ours, theirs, psnr=True)


def ages(state_manager, photo: np.ndarray) -> None:
    """Every age modifier at five directions, and FairFace's class of the face."""
    from facefusion import face_classifier
    from facefusion.processors.modules.age_modifier import core
    from facefusion.types import Face as FaceFusionFace
    from tests.enhancer_fixtures import age_modifier_model, face_classifier_model

    from faceweave import names
    from faceweave.analysis import FaceAnalyser
    from faceweave.analysis.face_classifier import FaceClassifier
    from faceweave.enhancers.age import AgeModifier

    face = FaceAnalyser().analyse(photo)[0]
    five = np.asarray(face.kps5, np.float32)
    bgr = np.ascontiguousarray(photo[..., ::-1])
    classifier = face_classifier_model()
    face_classifier.get_inference_pool = lambda: _Pool(classifier)
    gender, age, race = face_classifier.classify_face(bgr, five)
    ours = FaceClassifier(classifier).classify(photo, five)
    same = (ours.gender, ours.age, ours.race) == (gender, age, race)
    print(f"{'fairface class':60s} {'identical' if same else 'DIFFERENT'}: {gender}, {age}, {race}")
    marks = {"5": five, "5/68": five, "68": None, "68/5": None}
    theirs_face = FaceFusionFace(None, None, None, marks, 0, None, None, age, gender, race)
    state_manager.init_item("face_mask_types", ["box"])
    state_manager.init_item("face_mask_blur", 0.3)
    for name, family in names.AGE_MODIFIERS.items():
        model = age_modifier_model(family)
        core.get_inference_pool = lambda model=model: _Pool(model)
        state_manager.init_item("age_modifier_model", name)
        for direction in (-100, -40, 0, 35, 100):
            state_manager.init_item("age_modifier_direction", direction)
            theirs = core.modify_age(theirs_face, bgr)[..., ::-1]
            modifier = AgeModifier(model, name=name, direction=direction, classifier=FaceClassifier(classifier))
            _report(f"{name} direction {direction}", modifier.modify(photo, [face]), theirs, psnr=True)


def expressions(state_manager, photo: np.ndarray) -> None:
    """The expression restorer at three factors and both areas alone and together, on a swap stand-in
    (the target with its mouth region brightened)."""
    from facefusion.processors.modules.expression_restorer import core
    from facefusion.types import Face as FaceFusionFace
    from tests.enhancer_fixtures import live_portrait_models

    from faceweave.analysis import FaceAnalyser
    from faceweave.enhancers.restorer import ExpressionRestorer, LivePortrait

    face = FaceAnalyser().analyse(photo)[0]
    five = np.asarray(face.kps5, np.float32)
    swapped = photo.copy()
    swapped[150:220, 200:300] = swapped[150:220, 200:300] // 2 + 90
    models = live_portrait_models()
    core.get_inference_pool = lambda: _Parts(models)
    marks = {"5": five, "5/68": five, "68": None, "68/5": None}
    theirs_face = FaceFusionFace(None, None, None, marks, 0, None, None, None, None, None)
    state_manager.init_item("expression_restorer_model", "live_portrait")
    portrait = LivePortrait(models["feature_extractor"], models["motion_extractor"], models["generator"])
    for factor in (0, 80, 100):
        for areas in (["upper-face", "lower-face"], ["upper-face"], ["lower-face"]):
            state_manager.init_item("expression_restorer_factor", factor)
            state_manager.init_item("expression_restorer_areas", areas)
            original, now = np.ascontiguousarray(photo[..., ::-1]), np.ascontiguousarray(swapped[..., ::-1])
            theirs = core.restore_expression(theirs_face, original, now)[..., ::-1]
            ours = ExpressionRestorer(portrait, factor=factor, areas=areas).restore(swapped, photo, [face])
            _report(f"live_portrait factor {factor} areas {' '.join(areas)}", ours, theirs, psnr=True)


#: the face editor's knobs, one setting per case (FaceFusion's state names without ``face_editor_``)
EDITS = (
    {},
    {"eyebrow_direction": 0.8, "eye_gaze_horizontal": -0.6, "eye_gaze_vertical": 0.5},
    {"eyebrow_direction": -0.7, "eye_gaze_horizontal": 0.9},
    {"eye_open_ratio": 0.7, "lip_open_ratio": -0.5},
    {"eye_open_ratio": -1.0, "lip_open_ratio": 1.0},
    {"mouth_grim": 0.6, "mouth_pout": -0.4, "mouth_purse": 0.5, "mouth_smile": 0.8},
    {"mouth_grim": -0.6, "mouth_pout": 0.4, "mouth_purse": -0.5, "mouth_smile": -0.8},
    {"mouth_position_horizontal": 0.5, "mouth_position_vertical": -0.7},
    {"mouth_position_horizontal": -0.3, "mouth_position_vertical": 0.6},
    {"head_pitch": 0.5, "head_yaw": -0.8, "head_roll": 0.3},
    {"head_pitch": -1.0, "head_yaw": 1.0, "head_roll": -1.0},
)


def edits(state_manager, photo: np.ndarray) -> None:
    """The face editor at eleven knob settings (each knob on both sides of 0, and the head at its limits)."""
    from facefusion.processors.modules.face_editor import core
    from facefusion.types import Face as FaceFusionFace
    from tests.enhancer_fixtures import live_portrait_editor_models

    from faceweave.analysis import FaceAnalyser
    from faceweave.enhancers.editor import FaceEditor
    from faceweave.enhancers.lips import face_points68
    from faceweave.enhancers.restorer import LivePortrait
    from faceweave.options import FaceEditOptions

    face = FaceAnalyser().analyse(photo)[0]
    five, points = np.asarray(face.kps5, np.float32), face_points68(face)
    marks = {"5": five, "5/68": five, "68": points, "68/5": points}
    theirs_face = FaceFusionFace(None, None, None, marks, 0, None, None, None, None, None)
    models = live_portrait_editor_models()
    core.get_inference_pool = lambda: _Parts(models)
    portrait = LivePortrait(
        models["feature_extractor"],
        models["motion_extractor"],
        models["generator"],
        eye=models["eye_retargeter"],
        lip=models["lip_retargeter"],
        stitcher=models["stitcher"],
    )
    state_manager.init_item("face_editor_model", "live_portrait")
    state_manager.init_item("face_mask_blur", 0.3)
    for knobs in EDITS:
        for knob in FaceEditOptions.model_fields:
            if knob != "model":
                state_manager.init_item(f"face_editor_{knob}", float(knobs.get(knob, 0.0)))
        theirs = core.edit_face(theirs_face, np.ascontiguousarray(photo[..., ::-1]))[..., ::-1]
        edit = FaceEditOptions(model="live_portrait", **knobs)
        ours = FaceEditor(portrait, edit).apply(photo, [face])
        said = " ".join(f"{k} {v}" for k, v in knobs.items()) or "no knob"
        _report(f"face editor {said}"[:60], ours, theirs, psnr=True)


def deep_swaps(state_manager, photo: np.ndarray) -> None:
    """The deep swapper at three morphs, a model without the morph input, and with the area mask."""
    from facefusion.processors.modules.deep_swapper import core
    from facefusion.types import Face as FaceFusionFace
    from tests.enhancer_fixtures import deep_swapper_model

    from faceweave.analysis import FaceAnalyser
    from faceweave.enhancers.deep import DeepSwapper
    from faceweave.enhancers.lips import face_points68

    face = FaceAnalyser().analyse(photo)[0]
    five, points = np.asarray(face.kps5, np.float32), face_points68(face)
    marks = {"5": five, "5/68": five, "68": points, "68/5": points}
    theirs_face = FaceFusionFace(None, None, None, marks, 0, None, None, None, None, None)
    state_manager.init_item("deep_swapper_model", "iperov/elon_musk_224")
    state_manager.init_item("face_mask_blur", 0.3)
    state_manager.init_item("face_mask_padding", (0, 0, 0, 0))
    cases = [(True, 100, ()), (True, 40, ()), (True, 0, ()), (False, 100, ()), (True, 70, ("lower-face", "mouth"))]
    for morph_input, morph, areas in cases:
        model = deep_swapper_model(morph=morph_input)
        core.get_inference_pool = lambda model=model: _Pool(model)
        state_manager.init_item("deep_swapper_morph", morph)
        state_manager.init_item("face_mask_types", ["box", "area"] if areas else ["box"])
        state_manager.init_item("face_mask_areas", list(areas))
        theirs = core.swap_face(theirs_face, np.ascontiguousarray(photo[..., ::-1]))[..., ::-1]
        ours = DeepSwapper(model, name="iperov/elon_musk_224", morph=morph, areas=areas).swap(photo, [face])
        what = (
            f"morph {morph}"
            + ("" if morph_input else " (no morph input)")
            + (f" areas {' '.join(areas)}" if areas else "")
        )
        _report(f"deep swapper {what}", ours, theirs, psnr=True)


class _Parts:
    """FaceFusion's inference pool of a model set: each part's stand-in by its name."""

    def __init__(self, models) -> None:
        self.models = models

    def get(self, key: str) -> _Pool:
        return _Pool(self.models[key])


def _report(case: str, ours: np.ndarray, theirs: np.ndarray, *more: np.ndarray, psnr: bool = False) -> None:
    pairs = [(np.asarray(ours), np.asarray(theirs)), *zip(more[::2], more[1::2], strict=True)]
    same = min(float(np.mean(a == b)) for a, b in pairs)
    worst = max(float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max()) for a, b in pairs)
    line = f"{case:60s} identical {same:.4%}, max {worst:.4g}"
    if psnr:
        error = float(np.mean((pairs[0][0].astype(np.float64) - pairs[0][1]) ** 2))
        line += ", PSNR " + ("inf" if error == 0 else f"{10 * np.log10(255**2 / error):.1f} dB")
    print(line)


class _Pool:
    """FaceFusion's inference pool, over a stand-in: every output, as its sessions give them."""

    def __init__(self, model) -> None:
        self.model = model

    def get(self, _key: str) -> _Pool:
        return self

    def run(self, _names, feeds):
        return self.model.session.run(None, feeds)

    def get_inputs(self):
        return self.model.session.get_inputs()


if __name__ == "__main__":
    raise SystemExit(main())
