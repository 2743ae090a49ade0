"""The occluder models component (analysis/occluders.py): only the models
the mask options ask for run, each result has the crop's shape, and the
component can be closed and used again."""

from __future__ import annotations

import numpy as np
import pytest

from faceweave.analysis.occluders import OccluderMasks, Occluders
from faceweave.options import MaskOptions
from faceweave.timing import cpu_times, wall_times


@pytest.mark.parametrize(
    ("segmentation", "hands", "timed"),
    [
        (False, False, set()),
        (True, False, {"segment"}),
        (False, True, {"hands"}),
        (True, True, {"segment", "hands"}),
    ],
)
def test_only_the_models_asked_for_run(astronaut, segmentation, hands, timed):
    crop = np.ascontiguousarray(astronaut[:256, 128:384])
    timings: dict[str, float] = {}
    with Occluders.from_options(MaskOptions(segmentation=segmentation, hands=hands)) as occluders:
        found = occluders.find(crop, timings)
    assert isinstance(found, OccluderMasks)
    assert set(wall_times(timings)) == timed
    assert set(cpu_times(timings)) == timed
    assert (found.person is not None) == segmentation
    if found.person is not None:
        assert found.person.shape == crop.shape[:2] and found.person.dtype == np.float32
        assert found.person.min() >= 0.0 and found.person.max() <= 1.0
        assert found.person.max() > 0.5  # the astronaut is a person
    if not hands:
        assert found.hands is None
    elif found.hands is not None:
        assert found.hands.shape == crop.shape[:2] and found.hands.dtype == np.float32


def test_closed_occluders_can_be_used_again(astronaut):
    crop = np.ascontiguousarray(astronaut[:256, 128:384])
    occluders = Occluders(segmentation=True)
    occluders.prepare()
    first = occluders.find(crop, {}).person
    occluders.close()
    occluders.close()  # closing twice is harmless
    again = occluders.find(crop, {}).person
    occluders.close()
    assert first is not None and again is not None
    np.testing.assert_array_equal(first, again)
