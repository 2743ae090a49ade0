"""The skin-tone control (``SwapOptions.skin_tone``,
:mod:`faceweave.compositing.skintone`): the shares it gives, the colour
share of the match, every entry point that sets it, and on real faces a
light source on a darker target moving from its own skin to the target's."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from pydantic import ValidationError

from faceweave.compositing.colour import ColourMatch, SkinColour, apply_statistics
from faceweave.compositing.composite import MAX_CONTRAST_GAIN, TINT_CHROMA, TINT_LIGHTNESS, matched_colour
from faceweave.compositing.skintone import (
    ANCHOR,
    DEFAULT_SKIN_TONE,
    FULL_LIGHTNESS,
    SkinTone,
    skin_tone_steps,
)
from faceweave.errors import InvalidOptionError
from faceweave.options import SwapOptions

SHARES = ("colour", "chroma", "lightness", "lids", "cheeks", "shading")


def test_the_default_level_is_the_compositing_before_the_control():
    assert SwapOptions().skin_tone == ANCHOR
    assert skin_tone_steps(ANCHOR) == DEFAULT_SKIN_TONE
    assert DEFAULT_SKIN_TONE.chroma == TINT_CHROMA and DEFAULT_SKIN_TONE.lightness == TINT_LIGHTNESS
    assert (DEFAULT_SKIN_TONE.colour, DEFAULT_SKIN_TONE.cheeks, DEFAULT_SKIN_TONE.lids) == (1.0, 1.0, 1.0)
    assert DEFAULT_SKIN_TONE.shading_amount(0.5) == 0.5  # the option's shading as asked


def test_the_ends_are_the_source_s_own_skin_and_the_target_s():
    own, theirs = skin_tone_steps(0.0), skin_tone_steps(1.0)
    assert all(getattr(own, name) == 0.0 for name in SHARES)
    assert (theirs.colour, theirs.chroma, theirs.cheeks, theirs.lids, theirs.shading) == (1.0,) * 5
    assert theirs.lightness == FULL_LIGHTNESS
    assert theirs.shading_amount(0.2) == 1.0 and own.shading_amount(0.2) == 0.2


def test_every_share_grows_with_the_level():
    levels = np.linspace(0.0, 1.0, 21)
    for name in SHARES:
        values = [getattr(skin_tone_steps(float(v)), name) for v in levels]
        assert all(b >= a for a, b in zip(values, values[1:], strict=False)), name
    assert skin_tone_steps(0.25).colour == pytest.approx(0.5)
    assert skin_tone_steps(0.75).chroma == pytest.approx(TINT_CHROMA + (1 - TINT_CHROMA) / 2)


@pytest.mark.parametrize("level", [-0.01, 1.01, math.nan])
def test_a_level_outside_zero_to_one_is_refused(level):
    with pytest.raises(ValueError, match="skin tone"):
        skin_tone_steps(level)
    with pytest.raises(ValidationError, match="skin_tone"):
        SwapOptions(skin_tone=level)
    with pytest.raises(ValueError, match="colour"):
        SkinTone(colour=level)


def test_the_colour_share_moves_from_the_face_s_own_colour_to_the_matched_one():
    rng = np.random.default_rng(0)
    lab = np.dstack([rng.uniform(30, 80, (8, 8)), rng.uniform(5, 20, (8, 8)), rng.uniform(5, 25, (8, 8))])
    lab = lab.astype(np.float32)
    match = ColourMatch(
        source=SkinColour(np.array([55.0, 12.0, 15.0], np.float32), np.array([8.0, 3.0, 4.0], np.float32)),
        target=SkinColour(np.array([40.0, 16.0, 22.0], np.float32), np.array([9.0, 4.0, 5.0], np.float32)),
    )
    full = apply_statistics(lab, match.source.stats, match.target.stats, max_gain=MAX_CONTRAST_GAIN)
    assert np.array_equal(matched_colour(lab, match, 1.0), full)
    assert np.array_equal(matched_colour(lab, match, 0.0), lab)
    assert np.allclose(matched_colour(lab, match, 0.25), lab + 0.25 * (full - lab), atol=1e-4)


# ---------------------------------------------------------------- entry points
def test_http_job_options_carry_the_level_and_refuse_a_bad_one():
    from faceweave.service.jobspec import JobOptions

    def options(**fields) -> SwapOptions:
        return JobOptions(**fields).swap_options(
            kind="image", has_reference=False, max_pixels=10_000_000, video_working_size=192
        )

    assert options().skin_tone == SwapOptions().skin_tone
    assert options(skin_tone=0.3).skin_tone == 0.3
    with pytest.raises(ValidationError, match="skin_tone"):
        JobOptions(skin_tone=1.5)


@pytest.mark.parametrize("text, want", [("0.3", 0.3), (" 1 ", 1.0), ("", None)])
def test_a_live_offer_carries_the_level(text, want):
    from faceweave.service.webrtc.offer import parse_offer

    sdp = _video_offer()
    offer = parse_offer({"sdp": [sdp], "skin_tone": [text]})
    assert offer.skin_tone == want


@pytest.mark.parametrize("text", ["abc", "1.5", "-0.2", "nan"])
def test_a_live_offer_with_a_bad_level_is_refused_in_one_line(text):
    from faceweave.service.webrtc.offer import parse_offer

    with pytest.raises(InvalidOptionError, match=r"field 'skin_tone' must be a number from 0 .* to 1"):
        parse_offer({"sdp": [_video_offer()], "skin_tone": [text]})


def test_the_live_hub_runs_a_session_at_its_offer_s_level():
    from faceweave.service.webrtc.hub import LiveHub

    hub = LiveHub.__new__(LiveHub)  # only its configuration is read
    hub.config = _HubConfig()
    hub.settings = SimpleNamespace(live=SimpleNamespace(swapper=None))  # type: ignore[assignment]
    assert hub.swap_options(0.2).skin_tone == 0.2
    assert hub.swap_options().skin_tone == SwapOptions().skin_tone


class _HubConfig:
    max_pixels = 10_000_000
    video_working_size = 192
    runtime = None


def _video_offer() -> str:
    """An aiortc offer with a camera (as a browser's)."""
    pytest.importorskip("aiortc", reason="the webrtc extra (aiortc) is not installed")
    import asyncio

    from tests.live_peer import offer_sdp

    async def make() -> str:
        pc, sdp = await offer_sdp(audio=False)
        await pc.close()
        return sdp

    return asyncio.run(make())


def test_the_cli_flags_reach_the_options():
    from tests.cli_args import parse_args

    from faceweave.cli.live import LiveArgs
    from faceweave.cli.swap import SwapArgs
    from faceweave.options import CLI_WORDS

    for kind, needed, kinds in (
        (SwapArgs, ["-t", "t.png", "-o", "o.png"], ("photo", "video")),
        (LiveArgs, ["0"], ("live",)),
    ):
        for given, expected in ((["--skin-tone", "0.8"], 0.8), ([], ANCHOR)):
            args = parse_args(kind, [*needed, *given], kinds=kinds)
            made = args.options.swap_options(kind=kinds[0], has_reference=False, words=CLI_WORDS)
            assert made.skin_tone == expected


def test_evaluate_s_summaries_name_the_level():
    from faceweave.evaluate.report import settings_line

    line = settings_line(SwapOptions(skin_tone=0.35).model_dump(mode="json"))
    assert "skin tone 0.35" in line and "working size 256" in line
    assert settings_line({}) == "not recorded"


# ---------------------------------------------------------------- on real faces
@pytest.mark.slow
def test_a_light_source_on_a_darker_target_moves_from_its_own_skin_to_the_target_s(faces_dir):
    """A light-skinned source on a darker-skinned target: at 0 the new face
    keeps the source's lighter skin, at 1 it takes the target's; the judge's
    tone error (face against neck and temples) falls as the level rises."""
    from faceweave.evaluate.tone import tone_error
    from faceweave.io.images import read_image
    from faceweave.pipeline import FaceSwapper
    from faceweave.provenance.stamp import Provenance

    source = faces_dir / "single" / "astronaut_eileen_collins.png"
    target = read_image(faces_dir / "single" / "attr_1423_black_woman.jpg").pixels
    errors, lightness = [], []
    for level in (0.0, 0.5, 1.0):
        with FaceSwapper(SwapOptions(skin_tone=level), provenance=Provenance.new(watermark=False)) as swapper:
            out = swapper.swap(source, target).image
            face = max(swapper.analyser.analyse(out), key=lambda f: f.bbox.area)
            target_face = max(swapper.analyser.analyse(target), key=lambda f: f.bbox.area)
        error = tone_error(out, target, target_face.mesh, face.mesh)
        assert error is not None
        errors.append(error)
        lightness.append(_cheek_lightness(out, face.mesh))
    assert errors[0] > errors[1] + 2.0 and errors[0] > errors[2] + 2.0, errors
    assert lightness[0] > lightness[1] + 3.0, lightness  # the source's own, lighter skin


def _cheek_lightness(pixels: np.ndarray, mesh: np.ndarray) -> float:
    from faceweave.compositing.colour import to_lab
    from faceweave.evaluate.tone import cheek_mask

    return float(np.median(to_lab(pixels)[cheek_mask(mesh[:, :2], pixels.shape)][:, 0]))
