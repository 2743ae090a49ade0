"""One option schema: every option a user may set is declared once, on the
options models, and reaches them from exactly one flag of each command that
offers it and (where a job may set it) one field of the HTTP job."""

from __future__ import annotations

from functools import reduce

import pytest
import typer
from tests.cli_args import parse_args

from faceweave.cli import build_app
from faceweave.cli.swap import SwapArgs
from faceweave.option_schema import api_leaves, command_leaves, leaves, shown_default, swap_options
from faceweave.options import CLI_WORDS, FORM_WORDS, SwapOptions
from faceweave.service.jobspec import JobFields, JobOptions, options_from_form

#: a value other than the default for every option, as the command line and
#: a form field give it, and the value the options then hold (a switch: None
#: on the command line, "true"/"false" in a form)
SAMPLES = {
    "swapper": ("simswap_256", "simswap_256"),
    "pixel_boost": ("256", 256),
    "face_swapper_weight": ("0.3", 0.3),
    "working_size": ("320", 320),
    "skin_tone": ("0.2", 0.2),
    "expression_check": (None, False),
    "source_blend": ("pose", "pose"),
    "compositing": ("facefusion", "facefusion"),
    "faces": ("many", "many"),
    "order": ("left-right", "left-right"),
    "face_index": ("1,2", (1, 2)),
    "reference_distance": ("0.4", 0.4),
    "min_face_size": ("12", 12),
    "mouth_mask": (None, False),
    "occlusion": (None, False),
    "occlusion_hands": (None, True),
    "face_occluder": ("xseg_1", "xseg_1"),
    "face_parser": ("bisenet_resnet_18", "bisenet_resnet_18"),
    "face_parser_regions": ("skin,nose", ("skin", "nose")),
    "face_mask_areas": ("mouth", ("mouth",)),
    "face_mask_blur": ("0.5", 0.5),
    "face_mask_padding": ("1 2 3 4", (1, 2, 3, 4)),
    "target_lips": ("never", "never"),
    "face_detector_score": ("0.6", 0.6),
    "face_detector": ("retinaface", "retinaface"),
    "face_detector_angles": ("0,90", (0, 90)),
    "face_detector_margin": ("1 2 3 4", (1, 2, 3, 4)),
    "face_detector_size": ("320", 320),
    "face_landmarker": ("fan_68_5", "fan_68_5"),
    "face_landmarker_score": ("0.7", 0.7),
    "max_pixels": ("1000", 1000),
    "execution_provider": ("cuda", "cuda"),
    "device_id": ("1", 1),
    "provider_fallback": (None, True),
    "models_dir": ("/m", "/m"),
    "tensorrt_cache": ("/t", "/t"),
    "tensorrt_fp16": (None, True),
    "face_enhancer": ("gfpgan_1.4", "gfpgan_1.4"),
    "face_enhancer_blend": ("0.5", 0.5),
    "face_enhancer_weight": ("0.7", 0.7),
    "frame_enhancer": ("real_esrgan_x2", "real_esrgan_x2"),
    "frame_enhancer_blend": ("0.5", 0.5),
    "background_remover": ("modnet", "modnet"),
    "background_remover_fill_color": ("0 255 0 255", (0, 255, 0, 255)),
    "background_remover_despill_color": ("0 255 0 128", (0, 255, 0, 128)),
    "frame_colorizer": ("deoldify", "deoldify"),
    "frame_colorizer_size": ("384", 384),
    "frame_colorizer_blend": ("0.5", 0.5),
    "deep_swapper": ("iperov/elon_musk_224", "iperov/elon_musk_224"),
    "deep_swapper_morph": ("40", 40),
    "expression_restorer": ("live_portrait", "live_portrait"),
    "expression_restorer_factor": ("60", 60),
    "expression_restorer_areas": ("lower-face", ("lower-face",)),
    "face_editor": ("live_portrait", "live_portrait"),
    "face_editor_eyebrow_direction": ("0.25", 0.25),
    "face_editor_eye_gaze_horizontal": ("0.25", 0.25),
    "face_editor_eye_gaze_vertical": ("0.25", 0.25),
    "face_editor_eye_open_ratio": ("0.25", 0.25),
    "face_editor_lip_open_ratio": ("0.25", 0.25),
    "face_editor_mouth_grim": ("0.25", 0.25),
    "face_editor_mouth_pout": ("0.25", 0.25),
    "face_editor_mouth_purse": ("0.25", 0.25),
    "face_editor_mouth_smile": ("0.25", 0.25),
    "face_editor_mouth_position_horizontal": ("0.25", 0.25),
    "face_editor_mouth_position_vertical": ("0.25", 0.25),
    "face_editor_head_pitch": ("0.25", 0.25),
    "face_editor_head_yaw": ("0.25", 0.25),
    "face_editor_head_roll": ("0.25", 0.25),
    "age_modifier": ("fran", "fran"),
    "age_modifier_direction": ("-20", -20),
    "lip_syncer": ("edtalk_256", "edtalk_256"),
    "lip_syncer_weight": ("0.8", 0.8),
    "lip_syncer_audio": ("/dub.wav", "/dub.wav"),
    "voice_extractor": ("none", "none"),
}
#: choices under which every sample above is valid (a neural swapper, an ONNX
#: detector, a 68-point landmarker), left out where the sample is the choice
CONTEXT = {
    "swapper": "inswapper_128",
    "face_detector": "scrfd",
    "face_landmarker": "2dfan4",
    "lip_syncer": "wav2lip_gan_96",
}


def _at(options: SwapOptions, path: tuple[str, ...]):
    return reduce(getattr, path, options)


def test_every_option_has_a_sample_and_the_samples_are_not_defaults():
    assert set(SAMPLES) == {leaf.name for leaf in leaves()}
    for leaf in leaves():
        assert SAMPLES[leaf.name][1] != leaf.default, leaf.name


def _swap_params() -> list:
    command = typer.main.get_command(build_app()).commands["swap"]  # type: ignore[attr-defined]
    return [p for p in command.params if p.param_type_name == "option"]


def test_swap_has_exactly_one_flag_per_option():
    flags = [name for p in _swap_params() for name in (*p.opts, *p.secondary_opts)]
    assert len(flags) == len(set(flags)), "a flag is declared twice"
    for leaf in leaves():
        own = [f for f in flags if f in (leaf.option, f"--no-{leaf.option[2:]}")]
        assert len(own) == 1, (leaf.name, own)


def test_the_job_has_exactly_one_field_per_option_it_may_set():
    fields = set(JobOptions.model_fields)
    assert fields == set(JobFields.model_fields) | {leaf.name for leaf in api_leaves()}
    for leaf in leaves():
        assert (leaf.name in fields) == leaf.flag.api, leaf.name
        if leaf.flag.api:
            assert JobOptions.model_fields[leaf.name].description == leaf.info.description
    assert "occlusion" in fields and "max_pixels" not in fields and "execution_provider" not in fields
    JobOptions.model_json_schema()  # the API's schema of the options builds


def _context(name: str) -> dict[str, str]:
    return {k: v for k, v in CONTEXT.items() if k != name}


@pytest.mark.parametrize("leaf", leaves(), ids=lambda leaf: leaf.name)
def test_each_flag_reaches_its_option(leaf):
    text, expected = SAMPLES[leaf.name]
    argv = ["-t", "t.png", "-o", "o.png"]
    for name, value in _context(leaf.name).items():
        argv += ["--" + name.replace("_", "-"), value]
    if text is None:
        argv.append(leaf.option if not leaf.default else f"--no-{leaf.option[2:]}")
    else:
        argv += [leaf.option, *text.split(" ")]
    args = parse_args(SwapArgs, argv, kinds=("photo", "video"))
    made = args.options.swap_options(kind="photo", has_reference=False, words=CLI_WORDS)
    assert _at(made, leaf.path) == expected
    if leaf.name == "face_index":
        assert made.selection.mode == "index"


@pytest.mark.parametrize("leaf", api_leaves(), ids=lambda leaf: leaf.name)
def test_each_job_field_reaches_its_option(leaf):
    text, expected = SAMPLES[leaf.name]
    if text is None:
        text = "true" if expected else "false"
    fields = {name: [value] for name, value in _context(leaf.name).items()}
    fields[leaf.name] = [text.replace(" ", ",")]
    job = options_from_form(fields)
    made = job.swap_options(kind="image", has_reference=False, max_pixels=40_000_000, video_working_size=192)
    assert _at(made, leaf.path) == expected


def test_nothing_given_is_the_defaults_of_each_kind():
    assert swap_options({}, kind="photo", has_reference=False, words=CLI_WORDS) == SwapOptions()
    video = swap_options({}, kind="video", has_reference=False, words=CLI_WORDS)
    assert video == SwapOptions(working_size=192)
    live = swap_options({}, kind="live", has_reference=False, words=CLI_WORDS)
    assert live == SwapOptions(working_size=192, expression_check=False)
    # a service's own video working size; a size given wins over both
    assert swap_options({}, kind="video", has_reference=False, words=FORM_WORDS, defaults={"working_size": 160}) == (
        SwapOptions(working_size=160)
    )
    given = {"working_size": 288}
    assert swap_options(given, kind="video", has_reference=False, words=CLI_WORDS).working_size == 288


def test_the_commands_offer_the_options_of_their_kinds():
    def flags(name: str) -> set[str]:
        command = typer.main.get_command(build_app()).commands[name]  # type: ignore[attr-defined]
        return {o for p in command.params for o in p.opts}

    live, swap, faces = flags("live"), flags("swap"), flags("faces")
    assert "--no-expression-check" in swap and "--no-expression-check" not in live  # a photo's check
    assert {leaf.option for leaf in command_leaves(("live",)) if leaf.value_type is not bool} <= live
    assert "--face-detector" in faces and "--swapper" not in faces and "--faces" not in faces
    assert "--faces" not in flags("evaluate") and "--face-enhancer" in flags("evaluate")


def test_the_help_shows_each_kind_s_default():
    (working,) = [leaf for leaf in leaves() if leaf.name == "working_size"]
    assert shown_default(working, ("photo", "video")) == "256 for photo targets, 192 for video targets"
    assert shown_default(working, ("live",)) == "192" and shown_default(working, ("photo",)) == "256"
