"""A node's live sessions share one loaded copy of a neural swapper's model,
their faces batched into one inference (``live.swapper``,
``live.batch_window_ms``; faceweave.runtime.batching), and the checks of
those settings."""

from __future__ import annotations

import threading

import numpy as np
import onnx
import pytest
from tests.neural_fixtures import arcface_model, swapper_model
from tests.service_fixtures import settings

from faceweave.errors import InvalidOptionError
from faceweave.options import RuntimeOptions, SwapOptions
from faceweave.runtime import BatchingModel
from faceweave.sessions import ModelSessions


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    """inswapper_128 (a dynamic batch: ``output = target + mean(source row)``) and its embedder."""
    from faceweave.models import ModelStore, import_model

    folder, files = tmp_path_factory.mktemp("models"), tmp_path_factory.mktemp("files")
    weights = np.random.default_rng(3).normal(size=(3, 512)).astype(np.float32)
    made = {
        "inswapper_128": swapper_model(128, [512], batch="N", source_gain=1.0, emap=np.eye(512)),
        "arcface_w600k_r50": arcface_model(weights, batch="N", input_name="input"),
    }
    store = ModelStore(folder)
    for name, model in made.items():
        onnx.save(model, files / f"{name}.onnx")
        import_model(store, name, files / f"{name}.onnx")
    return folder


def _hub(tmp_path, models_dir, **live):
    from faceweave.service.jobs import RunConfig
    from faceweave.service.metrics import Metrics
    from faceweave.service.webrtc.hub import LiveHub

    config = RunConfig(runtime=RuntimeOptions(models_dir=str(models_dir)))
    return LiveHub(settings(tmp_path, live=live), Metrics(), config)


def test_sessions_share_one_batching_copy_of_the_neural_model(tmp_path, models_dir):
    hub = _hub(tmp_path, models_dir, swapper="inswapper_128", batch_window_ms=50.0)
    first, second = hub._borrow_models(), hub._borrow_models()
    try:
        assert first is not second and first.sessions is second.sessions
        options = hub.swap_options()
        assert options.swapper == "inswapper_128"
        models = [m.swapper(options).swapper.model for m in (first, second)]  # type: ignore[attr-defined]
        assert models[0] is models[1] and isinstance(models[0], BatchingModel)
        assert models[0].window_s == pytest.approx(0.05)
        # a session's swapper closed (its options changed) leaves the shared model open
        first.swapper(hub.swap_options(skin_tone=0.8))
        out = models[0].run(
            {"target": np.zeros((1, 3, 128, 128), np.float32), "source": np.full((1, 512), 2.0, np.float32)}
        )
        np.testing.assert_allclose(out["output"], np.full((1, 3, 128, 128), 2.0, np.float32))
    finally:
        hub.close()
    assert hub._neural is None


def test_faces_of_two_sessions_go_through_one_inference(tmp_path, models_dir):
    hub = _hub(tmp_path, models_dir, swapper="inswapper_128", batch_window_ms=50.0)
    try:
        swappers = [hub._borrow_models().swapper(hub.swap_options()).swapper for _ in range(2)]
        model = swappers[0].model  # type: ignore[attr-defined]
        model.window_s, model.idle_s = 0.0, 60.0  # the first calls run as they come
        rows = [np.full((1, 512), float(k + 1), np.float32) for k in range(2)]
        outs: list[np.ndarray] = [np.empty(0)] * 2
        start, second = threading.Barrier(2), threading.Barrier(2)
        first_round: list[int] = []

        def session(k: int) -> None:
            target = np.full((1, 3, 128, 128), 0.25 * k, np.float32)
            model.run({"target": target, "source": rows[k]})  # each session has called once
            if start.wait() == 0:
                model.window_s = 60.0  # the second calls certainly meet
                first_round.append(model.runs)
            second.wait()
            outs[k] = model.run({"target": target, "source": rows[k]})["output"]

        threads = [threading.Thread(target=session, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
            assert not t.is_alive()
        assert model.calls == 4 and model.runs - first_round[0] == 1  # both sessions' second faces: one inference
        for k in range(2):
            np.testing.assert_allclose(outs[k], np.full((1, 3, 128, 128), 0.25 * k + (k + 1), np.float32))
    finally:
        hub.close()


def test_the_classical_default_and_no_window_load_no_batching(tmp_path, models_dir):
    hub = _hub(tmp_path, models_dir)
    try:
        assert hub.swap_options().swapper == "mesh"
    finally:
        hub.close()
    hub = _hub(tmp_path, models_dir, swapper="inswapper_128", batch_window_ms=0.0)
    try:
        model = hub._borrow_models().swapper(hub.swap_options()).swapper.model  # type: ignore[attr-defined]
        assert not isinstance(model, BatchingModel)
    finally:
        hub.close()


@pytest.mark.parametrize(
    ("live", "fragment"),
    [
        ({"swapper": "inswapper"}, "unknown live swapper 'inswapper'; available: "),
        ({"swapper": "none"}, "unknown live swapper 'none'"),
        ({"batch_window_ms": -1}, "batch_window_ms"),
        ({"batch_window_ms": 500}, "batch_window_ms"),
    ],
)
def test_bad_live_model_settings_are_refused(tmp_path, live, fragment):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=fragment):
        settings(tmp_path, live=live)


def test_a_swapper_given_sessions_leaves_them_open_and_needs_the_same_runtime(tmp_path, models_dir):
    from faceweave.pipeline import FaceSwapper

    runtime = RuntimeOptions(models_dir=str(models_dir))
    shared = ModelSessions(runtime, batch_window_ms=4.0)
    options = SwapOptions(swapper="inswapper_128", runtime=runtime)
    with FaceSwapper(options, sessions=shared) as swapper:
        assert swapper.sessions is shared and isinstance(swapper.swapper.model, BatchingModel)  # type: ignore[attr-defined]
    assert shared.pool is not None  # not closed by the swapper
    shared.close()
    with pytest.raises(InvalidOptionError, match="other runtime options"):
        FaceSwapper(SwapOptions(swapper="inswapper_128"), sessions=ModelSessions(runtime))


def test_a_live_model_missing_from_the_folder_is_said_when_a_session_opens(tmp_path):
    from faceweave.errors import ChosenModelMissingError

    hub = _hub(tmp_path, tmp_path / "empty", swapper="inswapper_128")
    try:
        with pytest.raises(ChosenModelMissingError, match="is not present in .*faceweave models download"):
            hub._borrow_models()
        assert not hub._all_models  # nothing half-made is kept
    finally:
        hub.close()
