"""Inference runtime: provider lists, the ONNX Runtime backend, the session pool.

Models are tiny graphs from :mod:`onnx_fixtures` with the real models' input
and output names and shapes; what they compute is in that module's doc.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from faceweave.errors import (
    InvalidOptionError,
    ModelError,
    ModelFormatError,
    ModelNotFoundError,
    ModelSignatureError,
    ProviderError,
)
from faceweave.models import ModelStore, TensorSpec
from faceweave.models.catalog import builtin_specs
from faceweave.runtime import OnnxBackend, ProviderConfig, SessionPool, create_backend, dummy_feeds, ort_providers
from onnx_fixtures import INSWAPPER_128, NUDENET_320N, model_bytes, save_model

CPU = ("CPUExecutionProvider", {})
ALL = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]


# (case id, config, available, expected list)
PROVIDER_LISTS = [
    ("cpu", ProviderConfig(), ALL, [CPU]),
    ("cuda-1", ProviderConfig("cuda", device_id=1), ALL, [("CUDAExecutionProvider", {"device_id": "1"}), CPU]),
    (
        "tensorrt-plain",
        ProviderConfig("tensorrt"),
        ALL,
        [
            ("TensorrtExecutionProvider", {"device_id": "0", "trt_fp16_enable": "False"}),
            ("CUDAExecutionProvider", {"device_id": "0"}),
            CPU,
        ],
    ),
    (
        "tensorrt-cache-fp16",
        ProviderConfig("tensorrt", device_id=2, trt_engine_cache="/tmp/engines", trt_fp16=True),
        ALL,
        [
            (
                "TensorrtExecutionProvider",
                {
                    "device_id": "2",
                    "trt_fp16_enable": "True",
                    "trt_engine_cache_enable": "True",
                    "trt_engine_cache_path": "/tmp/engines",
                    "trt_timing_cache_enable": "True",
                    "trt_timing_cache_path": "/tmp/engines",
                },
            ),
            ("CUDAExecutionProvider", {"device_id": "2"}),
            CPU,
        ],
    ),
    (
        "tensorrt-without-cuda",
        ProviderConfig("tensorrt"),
        ["TensorrtExecutionProvider", "CPUExecutionProvider"],
        [("TensorrtExecutionProvider", {"device_id": "0", "trt_fp16_enable": "False"}), CPU],
    ),
    (
        "cann",
        ProviderConfig(
            "cann",
            device_id=3,
            cann_precision_mode="allow_fp32_to_fp16",
            cann_op_select_impl_mode="high_performance",
            cann_graph=True,
        ),
        ALL,
        [
            (
                "CANNExecutionProvider",
                {
                    "device_id": "3",
                    "enable_cann_graph": "True",
                    "precision_mode": "allow_fp32_to_fp16",
                    "op_select_impl_mode": "high_performance",
                },
            ),
            CPU,
        ],
    ),
    (
        "cann-defaults",
        ProviderConfig("cann"),
        ALL,
        [("CANNExecutionProvider", {"device_id": "0", "enable_cann_graph": "False"}), CPU],
    ),
    (
        "openvino",
        ProviderConfig("openvino", openvino_device="GPU.1"),
        ALL,
        [("OpenVINOExecutionProvider", {"device_type": "GPU.1"}), CPU],
    ),
    ("coreml", ProviderConfig("coreml"), ALL, [("CoreMLExecutionProvider", {}), CPU]),
    ("directml", ProviderConfig("directml", device_id=1), ALL, [("DmlExecutionProvider", {"device_id": "1"}), CPU]),
    ("rocm", ProviderConfig("rocm"), ALL, [("ROCMExecutionProvider", {"device_id": "0"}), CPU]),
    ("migraphx", ProviderConfig("migraphx"), ALL, [("MIGraphXExecutionProvider", {"device_id": "0"}), CPU]),
]


@pytest.mark.parametrize(
    "config, available, expected", [c[1:] for c in PROVIDER_LISTS], ids=[c[0] for c in PROVIDER_LISTS]
)
def test_ort_provider_lists(config, available, expected):
    assert ort_providers(config, available) == expected


# (case id, kwargs, exception, fragment of the message)
BAD_CONFIGS = [
    ("unknown-name", {"name": "tpu"}, ProviderError, "unknown execution provider 'tpu'"),
    ("negative-device", {"name": "cuda", "device_id": -1}, InvalidOptionError, "--device-id"),
    ("bad-precision", {"name": "cann", "cann_precision_mode": "fp8"}, InvalidOptionError, "precision_mode"),
    ("bad-impl-mode", {"name": "cann", "cann_op_select_impl_mode": "fast"}, InvalidOptionError, "op_select_impl_mode"),
]


@pytest.mark.parametrize("kwargs, error, fragment", [c[1:] for c in BAD_CONFIGS], ids=[c[0] for c in BAD_CONFIGS])
def test_bad_provider_config(kwargs, error, fragment):
    with pytest.raises(error, match=fragment):
        ProviderConfig(**kwargs)


def test_backend_runs_inswapper_shaped_model_from_bytes():
    model = OnnxBackend().load(model_bytes(*INSWAPPER_128), ProviderConfig())
    assert [(t.name, t.shape, t.dtype) for t in model.inputs] == [
        ("target", (1, 3, 128, 128), "float32"),
        ("source", (1, 512), "float32"),
    ]
    assert [(t.name, t.shape) for t in model.outputs] == [("output", (1, 3, 128, 128))]
    assert model.providers == ("CPUExecutionProvider",)
    target = np.zeros((1, 3, 128, 128), np.float32)
    target[0, 1, 5, 7] = 128 * 128 * 3  # mean(target) = 1
    source = np.full((1, 512), 2.0, np.float32)  # mean(source) = 2
    out = model.run({"target": target, "source": source})
    assert list(out) == ["output"]
    expected = target + 3.0
    np.testing.assert_allclose(out["output"], expected, rtol=1e-5)


def test_backend_runs_from_path_with_dynamic_dims(tmp_path):
    path = save_model(tmp_path / "nudenet.onnx", *NUDENET_320N)
    model = OnnxBackend().load(path, ProviderConfig())
    assert model.inputs[0].shape == ("batch", 3, "height", "width")
    out = model.run({"images": np.full((2, 3, 8, 4), 0.5, np.float32)})["output0"]
    assert out.shape == (1, 22, 1) and np.allclose(out, 0.5)


# (case id, feeds, fragment)
BAD_FEEDS = [
    (
        "wrong-size",
        {"target": np.zeros((1, 3, 64, 64), np.float32), "source": np.zeros((1, 512), np.float32)},
        r"input target has shape \(1, 3, 64, 64\), expected \[1, 3, 128, 128\]",
    ),
    (
        "wrong-rank",
        {"target": np.zeros((3, 128, 128), np.float32), "source": np.zeros((1, 512), np.float32)},
        r"input target has shape \(3, 128, 128\)",
    ),
    (
        "wrong-dtype",
        {"target": np.zeros((1, 3, 128, 128), np.float64), "source": np.zeros((1, 512), np.float32)},
        "input target is float64, expected float32",
    ),
    (
        "missing-input",
        {"target": np.zeros((1, 3, 128, 128), np.float32)},
        r"do not match the inputs \['source', 'target'\]",
    ),
]


@pytest.mark.parametrize("feeds, fragment", [c[1:] for c in BAD_FEEDS], ids=[c[0] for c in BAD_FEEDS])
def test_run_checks_feeds(feeds, fragment):
    model = OnnxBackend().load(model_bytes(*INSWAPPER_128), ProviderConfig())
    with pytest.raises(ModelSignatureError, match=fragment):
        model.run(feeds)


def test_load_errors(tmp_path):
    backend = OnnxBackend()
    text = tmp_path / "notes.onnx"
    text.write_text("this is not a model\n")
    with pytest.raises(ModelFormatError, match="not a valid ONNX model"):
        backend.load(text, ProviderConfig())
    whole = model_bytes(*INSWAPPER_128)
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ModelFormatError):
        backend.load(cut, ProviderConfig())
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        backend.load(tmp_path / "absent.onnx", ProviderConfig())


def test_load_checks_the_spec():
    spec = builtin_specs()["inswapper_128"]
    backend = OnnxBackend()
    backend.load(model_bytes(*INSWAPPER_128), ProviderConfig(), spec=spec).close()
    wrong = model_bytes(
        [("target", [1, 3, 256, 256], "float32"), ("source", [1, 512], "float32")],
        [("output", [1, 3, 256, 256], "float32")],
    )
    with pytest.raises(ModelSignatureError, match="size 256 on axis 2, expected 128"):
        backend.load(wrong, ProviderConfig(), spec=spec)


def test_unknown_backend():
    with pytest.raises(ProviderError, match="unknown inference backend 'tensorflow'; available: onnxruntime"):
        create_backend("tensorflow")


def test_unavailable_provider_is_an_error_naming_the_available_ones(tmp_path):
    import onnxruntime

    path = save_model(tmp_path / "m.onnx", *INSWAPPER_128)
    with SessionPool() as pool, pytest.raises(ProviderError) as caught:
        pool.get(path, ProviderConfig("cann"))
    message = str(caught.value)
    assert "'cann' (CANNExecutionProvider) is not available" in message
    for name in onnxruntime.get_available_providers():
        assert name in message
    assert "--provider-fallback" in message


def test_unavailable_provider_falls_back_to_cpu_with_a_warning(tmp_path, caplog):
    path = save_model(tmp_path / "m.onnx", *INSWAPPER_128)
    with caplog.at_level(logging.WARNING, logger="faceweave"), SessionPool(fallback=True) as pool:
        model = pool.get(path, ProviderConfig("cann", device_id=1))
        assert model.providers == ("CPUExecutionProvider",)
        (record,) = pool.records
    assert (record.requested, record.provider, record.fell_back) == ("cann:1", "cpu", True)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and r.name == "faceweave"]
    assert len(warnings) == 1 and "cann:1" in warnings[0].getMessage() and "CPU" in warnings[0].getMessage()


class _StartFailsBackend(OnnxBackend):
    """Says CUDA is installed, but CUDA never starts (like missing CUDA libraries)."""

    def available_providers(self):
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]

    def load(self, model, provider, *, spec=None, label=None):
        if provider.name != "cpu":
            raise ProviderError(f"{provider.label()} failed to start: libcudnn not found")
        return super().load(model, provider, spec=spec, label=label)


def test_provider_that_fails_to_start(tmp_path, caplog):
    path = save_model(tmp_path / "m.onnx", *INSWAPPER_128)
    with SessionPool(backend=_StartFailsBackend()) as pool, pytest.raises(ProviderError, match="libcudnn"):
        pool.get(path, ProviderConfig("cuda"))
    with (
        caplog.at_level(logging.WARNING, logger="faceweave"),
        SessionPool(backend=_StartFailsBackend(), fallback=True) as pool,
    ):
        assert pool.get(path, ProviderConfig("cuda")).providers == ("CPUExecutionProvider",)
    assert any("libcudnn" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


class _CountingBackend(OnnxBackend):
    def __init__(self):
        super().__init__()
        self.loads = 0
        self.runs: list[dict] = []

    def load(self, model, provider, *, spec=None, label=None):
        self.loads += 1
        loaded = super().load(model, provider, spec=spec, label=label)
        original = loaded.run

        def run(feeds):
            self.runs.append({k: v.shape for k, v in feeds.items()})
            return original(feeds)

        loaded.run = run
        return loaded


def test_pool_caches_warms_up_and_closes(tmp_path):
    path = save_model(tmp_path / "m.onnx", *INSWAPPER_128)
    backend = _CountingBackend()
    pool = SessionPool(backend=backend)
    first = pool.get(path)
    assert pool.get(path, ProviderConfig("cpu")) is first
    assert pool.get(tmp_path / "." / "m.onnx") is first
    assert backend.loads == 1 and len(pool) == 1
    assert backend.runs == [{"target": (1, 3, 128, 128), "source": (1, 512)}]  # the warm-up
    assert pool.warmup_ms(path) >= 0.0
    assert pool.records[0].warmup_ms == pool.warmup_ms(path)
    pool.close()
    with pytest.raises(ModelError, match="closed"):
        first.run({"target": np.zeros((1, 3, 128, 128), np.float32), "source": np.zeros((1, 512), np.float32)})
    with pytest.raises(ModelError, match="pool is closed"):
        pool.get(path)


def test_pool_finds_named_models_in_the_store(tmp_path):
    store = ModelStore(tmp_path / "models")
    spec = store.spec("inswapper_128")
    with SessionPool(store=store) as pool:
        with pytest.raises(ModelNotFoundError, match="faceweave models download inswapper_128"):
            pool.get("inswapper_128")
        save_model(store.path_for(spec), *INSWAPPER_128)
        model = pool.get("inswapper_128")
        assert pool.get(spec) is model
        with pytest.raises(ModelError, match="was not loaded"):
            pool.warmup_ms("inswapper_128", ProviderConfig("cuda"))


def test_dummy_feeds_use_spec_sizes_for_dynamic_dims():
    model = OnnxBackend().load(model_bytes(*NUDENET_320N), ProviderConfig())
    nudenet = builtin_specs()["nudenet_320n"]
    assert dummy_feeds(model.inputs, nudenet)["images"].shape == (1, 3, 320, 320)
    assert dummy_feeds(model.inputs)["images"].shape == (1, 3, 1, 1)
    inswapper = builtin_specs()["inswapper_128"]
    free_batch = OnnxBackend().load(
        model_bytes(
            [("target", ["n", 3, 128, 128], "float32"), ("source", ["n", 512], "float32")],
            [("output", ["n", 3, 128, 128], "float32")],
        ),
        ProviderConfig(),
    )
    feeds = dummy_feeds(free_batch.inputs, inswapper)
    assert {k: v.shape for k, v in feeds.items()} == {"target": (1, 3, 128, 128), "source": (1, 512)}
    assert all(v.dtype == np.float32 and not v.any() for v in feeds.values())
    # a spec's fixed size fills an axis that the file leaves open
    spec_fixed = TensorSpec("images", (None, 3, 64, 48))
    from dataclasses import replace

    assert dummy_feeds(model.inputs, replace(nudenet, inputs=(spec_fixed,)))["images"].shape == (1, 3, 64, 48)


def _nvidia_providers() -> list[str]:
    import onnxruntime

    return [
        p for p in onnxruntime.get_available_providers() if p in ("CUDAExecutionProvider", "TensorrtExecutionProvider")
    ]


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["cuda", "tensorrt"])
def test_gpu_provider_runs_and_reports_warmup(tmp_path, name):
    if ProviderConfig(name).ort_name not in _nvidia_providers():
        pytest.skip(
            f"{ProviderConfig(name).ort_name} is not available in this onnxruntime (needs onnxruntime-gpu and "
            "an NVIDIA GPU)"
        )
    path = save_model(tmp_path / "m.onnx", *INSWAPPER_128)
    config = ProviderConfig(name, trt_engine_cache=str(tmp_path / "engines") if name == "tensorrt" else None)
    with SessionPool() as pool:
        model = pool.get(path, config)
        assert model.providers[0] == config.ort_name
        out = model.run({"target": np.zeros((1, 3, 128, 128), np.float32), "source": np.ones((1, 512), np.float32)})
        np.testing.assert_allclose(out["output"], 1.0, rtol=1e-3)
        assert pool.records[0].provider == f"{name}:0" and not pool.records[0].fell_back
    if name == "tensorrt":
        assert any((tmp_path / "engines").iterdir()), "TensorRT wrote no engine into the cache folder"
