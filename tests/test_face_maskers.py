"""FaceFusion's occluders and face parsers as components: the
pre/post-processing on known inputs, the components on stand-in models
whose outputs are known, the registry, the catalog entries and the
options' refusals (the swaps with them are in test_face_masker_swaps.py)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from tests.masker_fixtures import occluder_model, parser_model
from tests.neural_fixtures import OrtModel

from faceweave.compositing.facefusion import move_mask, occlusion_mask, smooth_occlusion
from faceweave.errors import InvalidOptionError, ModelSignatureError
from faceweave.maskers import (
    REGIONS,
    FaceMaskModels,
    FaceOccluder,
    FaceParser,
    available_face_occluders,
    available_face_parsers,
    check_regions,
    create_face_occluder,
    create_face_parser,
)
from faceweave.maskers.processing import (
    occluder_input,
    occluder_output,
    parser_input,
    parser_output,
    select_regions,
)
from faceweave.models import builtin_specs
from faceweave.options import MaskOptions, SwapOptions
from faceweave.timing import wall_times

CATALOG = builtin_specs()


def solid(side: int, rgb: tuple[int, int, int]) -> np.ndarray:
    return np.broadcast_to(np.array(rgb, np.uint8), (side, side, 3)).copy()


# -- pre/post-processing -----------------------------------------------------------


def test_the_occluder_sees_the_crop_bgr_in_unit_range_nhwc_at_its_size():
    x = occluder_input(solid(128, (200, 100, 50)), 256)
    assert x.shape == (1, 256, 256, 3) and x.dtype == np.float32
    assert np.allclose(x[0, 5, 7], [50 / 255, 100 / 255, 200 / 255])


def test_the_occluder_input_is_resized_bilinear():
    crop = np.zeros((2, 2, 3), np.uint8)
    crop[:, 1] = 255  # right column white
    x = occluder_input(crop, 4)[0, 0, :, 0] * 255
    assert np.allclose(x, [0, 64, 191, 255], atol=1)  # half-pixel centres, rounded on uint8


def test_the_occluder_output_is_clipped_and_resized_to_the_crop():
    raw = np.array([[-1.0, 2.0], [0.5, 0.25]], np.float32).reshape(1, 2, 2, 1)
    assert np.allclose(occluder_output(raw, 2), [[0, 1], [0.5, 0.25]])
    big = occluder_output(raw, 4)
    assert big.shape == (4, 4) and (big[0, 0], big[0, 3], big[3, 0], big[3, 3]) == (0.0, 1.0, 0.5, 0.25)
    with pytest.raises(ModelSignatureError, match=r"\[1, H, W, 1\]"):
        occluder_output(np.zeros((1, 2, 2, 3)), 4)


def test_the_parser_sees_the_face_rgb_normalised_nchw_at_its_size():
    x = parser_input(solid(100, (255, 0, 0)), 512, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    assert x.shape == (1, 3, 512, 512) and x.dtype == np.float32
    assert np.allclose(x[0, :, 9, 9], [(1 - 0.485) / 0.229, -0.456 / 0.224, -0.406 / 0.225], atol=1e-5)
    floats = parser_input(solid(100, (255, 0, 0)).astype(np.float32), 512, (0.485, 0.456, 0.406), (0.229,) * 3)
    assert np.allclose(floats[0, 0], (1 - 0.485) / 0.229, atol=1e-5)


def test_regions_are_chosen_by_the_best_class():
    best = np.array([[1, 6, 17], [12, 0, 4]])
    logits = np.zeros((19, 2, 3), np.float32)
    for (r, c), k in np.ndenumerate(best):
        logits[k, r, c] = 3.0
    chosen = select_regions(logits, ("skin", "glasses", "upper-lip"))
    assert chosen.tolist() == [[1, 1, 0], [1, 0, 0]]
    assert select_regions(logits, ("left-eye",)).tolist() == [[0, 0, 0], [0, 0, 1]]
    up = parser_output(logits[None], ("skin",), 6)
    assert up.shape == (6, 6) and up[0, 0] == 1.0 and up[5, 5] == 0.0


def test_facefusion_region_names_and_classes():
    assert dict(REGIONS) == {
        "skin": 1,
        "left-eyebrow": 2,
        "right-eyebrow": 3,
        "left-eye": 4,
        "right-eye": 5,
        "glasses": 6,
        "nose": 10,
        "mouth": 11,
        "upper-lip": 12,
        "lower-lip": 13,
    }
    assert MaskOptions().face_parser_regions == tuple(REGIONS)


def test_smoothing_keeps_only_what_stays_above_one_half():
    mask = np.zeros((64, 64), np.float32)
    mask[:, 32:] = 1.0
    smooth = smooth_occlusion(mask)
    assert smooth[:, :32].max() == 0.0 and smooth[:, 50:].min() > 0.99  # 2 * Phi(3.5) - 1
    assert np.allclose(smooth[:, 35], 2 * 0.7580 - 1, atol=0.01)  # Phi(3.5 / 5): the blur at 3.5 px in


def test_the_occluder_joins_the_other_occlusion_masks_before_smoothing():
    occ = np.ones((40, 40), np.float32)
    occ[:, :20] = 0.0
    hands = np.zeros((40, 40), np.float32)
    hands[:, 30:] = 1.0
    assert np.array_equal(occlusion_mask(None, None, occ), smooth_occlusion(occ))
    assert np.array_equal(occlusion_mask(None, hands, occ), smooth_occlusion(np.minimum(occ, 1.0 - hands)))
    assert occlusion_mask(None, None, None) is None


def test_a_mask_moves_between_crops_of_one_frame():
    mask = np.zeros((10, 10), np.float32)
    mask[2:5, 3:7] = 1.0
    template = np.array([[1.0, 0, 0], [0, 1, 0]])
    assert move_mask(mask, template, template, 10) is not None
    assert np.array_equal(move_mask(mask, template, template, 10), mask)
    shifted = move_mask(mask, template, np.array([[1.0, 0, 2], [0, 1, 1]]), 14)  # 2 px right, 1 down
    assert np.array_equal(shifted[3:6, 5:9], np.ones((3, 4))) and shifted[:3, :].min() == 0.0
    assert shifted[13, 13] == 1.0  # outside the template crop: nothing known in front


# -- the components on stand-ins ---------------------------------------------------


def test_an_xseg_occluder_reads_bgr_and_gives_its_mask_at_the_crop_size():
    blue_is_face = create_face_occluder("xseg_2", OrtModel(occluder_model(weights=(1.0, 0.0, 0.0))))
    assert isinstance(blue_is_face, FaceOccluder) and blue_is_face.name == "xseg_2"
    assert np.allclose(blue_is_face.mask(solid(96, (0, 0, 255))), 1.0)
    assert np.allclose(blue_is_face.mask(solid(96, (255, 0, 0))), 0.0)
    known = np.zeros((256, 256), np.float32)
    known[:, :128] = 1.0
    left = create_face_occluder("xseg_1", OrtModel(occluder_model(known))).mask(solid(128, (9, 9, 9)))
    assert left.shape == (128, 128) and left[:, :63].min() == 1.0 and left[:, 65:].max() == 0.0


def test_a_bisenet_parser_gives_the_chosen_regions_at_the_face_size():
    labels = np.zeros((64, 64), np.int64)
    labels[8:24, 8:24] = 6  # glasses
    labels[40:56, 16:48] = 12  # upper lip
    parser = create_face_parser("bisenet_resnet_34", OrtModel(parser_model(labels)))
    assert isinstance(parser, FaceParser)
    face = solid(256, (120, 90, 80))
    lips = parser.mask(face, ("upper-lip",))
    assert lips.shape == (256, 256)
    assert lips[162:222, 66:190].min() == 1.0 and lips[:150].max() == 0.0
    both = parser.mask(face, ("glasses", "upper-lip"))
    assert both[34:94, 34:94].min() == 1.0 and both.sum() > lips.sum()
    with pytest.raises(InvalidOptionError, match="unknown face parser region 'hair'"):
        parser.mask(face, ("hair",))


def test_a_parser_file_with_extra_outputs_loads_and_its_first_output_is_read(caplog):
    """BiSeNet exported by its authors' script has three outputs: the file
    loads against the catalog's one-output spec, one warning names the two
    others, and the parser reads the first (as FaceFusion does)."""
    from faceweave.runtime.backend import OnnxBackend
    from faceweave.runtime.providers import ProviderConfig

    labels = np.zeros((64, 64), np.int64)
    labels[40:56, 16:48] = 12  # upper lip
    spec = builtin_specs()["bisenet_resnet_34"]
    with caplog.at_level(logging.WARNING, logger="faceweave.models"):
        model = OnnxBackend(threads=1).load(
            parser_model(labels, extra=True).SerializeToString(), ProviderConfig(), spec=spec
        )
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "feat16, feat32" in warnings[0] and "the first 1 are used" in warnings[0]
    face = solid(256, (120, 90, 80))
    three = create_face_parser("bisenet_resnet_34", model).mask(face, ("upper-lip",))
    one = create_face_parser("bisenet_resnet_34", OrtModel(parser_model(labels))).mask(face, ("upper-lip",))
    np.testing.assert_array_equal(three, one)
    assert three.max() == 1.0
    model.close()


def test_the_parser_reads_rgb():
    weights = np.zeros((19, 3), np.float32)
    weights[1, 0] = 100.0  # red is skin
    parser = create_face_parser("bisenet_resnet_18", OrtModel(parser_model(weights=weights)))
    assert parser.mask(solid(64, (255, 0, 0)), ("skin",)).min() == 1.0
    assert parser.mask(solid(64, (0, 0, 255)), ("skin",)).max() == 0.0


def test_the_mask_models_smooth_the_region_and_leave_the_occluder_raw():
    known = np.zeros((256, 256), np.float32)
    known[:, 128:] = 1.0
    labels = np.zeros((64, 64), np.int64)
    labels[:, 32:] = 1
    models = FaceMaskModels(
        [create_face_occluder("xseg_3", OrtModel(occluder_model(known)))],
        create_face_parser("bisenet_resnet_18", OrtModel(parser_model(labels))),
        ("skin",),
    )
    timings: dict[str, float] = {}
    crop = solid(128, (50, 60, 70))
    raw = models.occluded(crop, timings)
    region = models.region(crop.astype(np.float32), timings)
    assert raw is not None and region is not None and set(wall_times(timings)) == {"occluder", "parser"}
    assert np.array_equal(raw, occluder_output(known.reshape(1, 256, 256, 1), 128))
    assert np.array_equal(
        region,
        smooth_occlusion(
            parser_output(
                np.eye(19, dtype=np.float32)[labels.repeat(8, 0).repeat(8, 1)].transpose(2, 0, 1)[None], ("skin",), 128
            )
        ),
    )
    assert not FaceMaskModels().active and FaceMaskModels().occluded(crop, timings) is None


def test_a_model_without_its_input_is_refused_naming_it():
    class Info:
        def __init__(self, name):
            self.name, self.shape = name, (1, 256, 256, 3)

    class Bare:
        inputs = [Info("images")]
        outputs = [Info("out")]

    with pytest.raises(ModelSignatureError, match="xseg_1: the model has no input 'input' \\(it has: images\\)"):
        create_face_occluder("xseg_1", Bare())  # type: ignore[arg-type]


# -- registry, catalog, options --------------------------------------------------


def test_the_registry_refuses_unknown_names_listing_the_accepted():
    with pytest.raises(InvalidOptionError, match="unknown face occluder 'xseg_9'; available: xseg_1, xseg_2, xseg_3"):
        create_face_occluder("xseg_9", OrtModel(occluder_model()))
    with pytest.raises(InvalidOptionError, match="bisenet_resnet_18, bisenet_resnet_34"):
        create_face_parser("bisenet", OrtModel(parser_model()))


@pytest.mark.parametrize("name", available_face_occluders() + available_face_parsers())
def test_every_mask_model_has_its_catalog_entry(name):
    spec = CATALOG[name]
    parser = name.startswith("bisenet")
    assert spec.kind == ("face_parser" if parser else "face_occluder")
    assert spec.inputs[0].name == "input" and spec.file_name == f"{name}.onnx"
    assert spec.inputs[0].shape == ((None, 3, 512, 512) if parser else (None, 256, 256, 3))
    assert spec.outputs[0].shape == ((None, 19, 512, 512) if parser else (None, 256, 256, 1))
    assert (spec.licence, spec.vendor) == (("MIT", "yakhyo") if parser else ("GPL-3.0", "DeepFaceLab"))


def test_catalog_download_tags_of_the_mask_models():
    """Checked by hand against FaceFusion 3.x's face_masker.py."""
    tags = {
        name: CATALOG[name].urls[0].rsplit("/", 2)[1] for name in available_face_occluders() + available_face_parsers()
    }
    assert tags == {
        "xseg_1": "models-3.1.0",
        "xseg_2": "models-3.1.0",
        "xseg_3": "models-3.2.0",
        "bisenet_resnet_18": "models-3.1.0",
        "bisenet_resnet_34": "models-3.0.0",
    }
    assert CATALOG["bisenet_resnet_34"].urls[1].startswith("https://huggingface.co/facefusion/models-3.0.0/")


def _refusal(**fields) -> str:
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as info:
        SwapOptions.model_validate({"swapper": "inswapper_128", **fields})
    return str(info.value)


def test_the_options_refuse_unknown_models_regions_and_out_of_range_knobs():
    assert "unknown face occluder 'xseg'; one of many, xseg_1, xseg_2, xseg_3" in _refusal(
        masks={"face_occluder": "xseg"}
    )
    assert "one of bisenet_resnet_18, bisenet_resnet_34" in _refusal(masks={"face_parser": "resnet"})
    assert "unknown face parser region 'hair'; one of skin, left-eyebrow" in _refusal(
        masks={"face_parser_regions": ["skin", "hair"]}
    )
    assert "choose at least one" in _refusal(masks={"face_parser_regions": []})
    assert "percentages in [0, 100]" in _refusal(masks={"face_mask_padding": [0, 101, 0, 0]})
    assert "face_mask_blur" in _refusal(masks={"face_mask_blur": 1.5})
    assert "swapper_weight" in _refusal(swapper_weight=-0.1)
    with pytest.raises(Exception, match="for the neural swappers"):
        SwapOptions.model_validate({"swapper": "mesh", "masks": {"face_occluder": "xseg_1"}})
    ok = SwapOptions.model_validate(
        {"swapper": "inswapper_128", "masks": {"face_occluder": "xseg_1", "face_parser": "bisenet_resnet_34"}}
    )
    assert ok.masks.face_parser_regions == tuple(REGIONS)


def test_check_regions():
    assert check_regions(["nose", "mouth"]) == ("nose", "mouth")
    with pytest.raises(InvalidOptionError, match="one of skin, left-eyebrow, right-eyebrow"):
        check_regions(["ears"])


def test_many_occluders_combine_by_minimum():
    """FaceFusion's ``many``: the three XSeg models, their minimum before smoothing."""
    from faceweave.maskers import OCCLUDER_CHOICES, occluder_models

    assert OCCLUDER_CHOICES == ("many", "xseg_1", "xseg_2", "xseg_3")
    assert occluder_models("many") == ("xseg_1", "xseg_2", "xseg_3") and occluder_models("xseg_2") == ("xseg_2",)
    with pytest.raises(InvalidOptionError, match="xseg_1, xseg_2, xseg_3"):
        occluder_models("xseg_4")
    masks = [np.ones((256, 256), np.float32) for _ in range(3)]
    masks[0][:40] = 0.0
    masks[1][:, :30] = 0.25
    masks[2][200:, 100:] = 0.5
    models = FaceMaskModels(
        [create_face_occluder(f"xseg_{k + 1}", OrtModel(occluder_model(m))) for k, m in enumerate(masks)]
    )
    got = models.occluded(solid(256, (1, 2, 3)), {})
    assert got is not None and np.allclose(got, np.minimum.reduce(masks))
    assert (
        SwapOptions.model_validate({"swapper": "inswapper_128", "masks": {"face_occluder": "many"}}).masks.face_occluder
        == "many"
    )
