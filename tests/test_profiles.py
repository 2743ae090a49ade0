"""Which steps each kind of output runs (faceweave.profiles)."""

from __future__ import annotations

import pytest

from faceweave.options import MaskOptions
from faceweave.pipeline import FaceSwapper
from faceweave.profiles import RenderProfile, resolve_profiles


@pytest.mark.parametrize(
    ("kind", "target_lips", "expected"),
    [
        # kind, MaskOptions.target_lips -> (expression_check, warp_frame, photo_detail, target_lips, folds)
        ("photo", "video", (True, True, True, False, False)),
        ("video", "video", (False, False, False, True, True)),
        ("live", "video", (False, False, False, True, True)),
        ("photo", "always", (True, True, True, True, True)),
        ("video", "never", (False, False, False, False, False)),
    ],
)
def test_each_kind_runs_its_own_steps(kind, target_lips, expected):
    profile = RenderProfile.resolve(kind, MaskOptions(target_lips=target_lips))
    got = (profile.expression_check, profile.warp_frame, profile.photo_detail, profile.target_lips, profile.folds)
    assert profile.kind == kind and got == expected


def test_a_renderer_resolves_its_profiles_once_from_its_options():
    with FaceSwapper() as swapper:
        assert swapper.renderer.profiles == resolve_profiles(swapper.options.masks)
        assert swapper.renderer.profile("photo") is swapper.renderer.profiles["photo"]
