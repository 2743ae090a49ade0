"""Execution providers: which one to run on, and ONNX Runtime's provider list for it.

Two different "fallbacks" must not be confused:

* ORT's own per-node placement: nodes that an accelerator cannot run are put
  on the CPU provider listed after it.  This is ORT's normal behaviour
  (it adds CPU itself if it is not listed), so :func:`ort_providers` always
  ends the list with CPU, and TensorRT's list has CUDA before CPU.
* "Provider not available" (not installed, or failed to start): that is a
  decision for :class:`faceweave.runtime.pool.SessionPool`, which raises
  :class:`ProviderError` or, when asked to, falls back to CPU with a logged
  warning.  It is never silent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from faceweave import names

#: faceweave's provider names -> ONNX Runtime's
ORT_PROVIDER_NAMES: Mapping[str, str] = names.registered(
    "execution provider",
    names.EXECUTION_PROVIDERS,
    {
        "cpu": "CPUExecutionProvider",
        "cuda": "CUDAExecutionProvider",
        "tensorrt": "TensorrtExecutionProvider",
        "cann": "CANNExecutionProvider",
        "openvino": "OpenVINOExecutionProvider",
        "coreml": "CoreMLExecutionProvider",
        "directml": "DmlExecutionProvider",
        "rocm": "ROCMExecutionProvider",
        "migraphx": "MIGraphXExecutionProvider",
    },
)
PROVIDERS = tuple(ORT_PROVIDER_NAMES)
CPU = "CPUExecutionProvider"

#: values ORT's CANN provider accepts
CANN_PRECISION_MODES = (
    "force_fp32",
    "force_fp16",
    "allow_fp32_to_fp16",
    "must_keep_origin_dtype",
    "allow_mix_precision",
)
CANN_OP_SELECT_IMPL_MODES = ("high_performance", "high_precision")

#: ORT provider names -> faceweave's
_OUR_NAMES = {ort: ours for ours, ort in ORT_PROVIDER_NAMES.items()}


@dataclass(frozen=True)
class ProviderConfig:
    """Where a session runs, with the provider's options.

    ``name``: one of :data:`PROVIDERS`; ``device_id``: the accelerator's index.
    TensorRT: ``trt_engine_cache`` (folder for built engines; ``None``: no
    cache) and ``trt_fp16``.  CANN (Ascend): ``cann_precision_mode``,
    ``cann_op_select_impl_mode``, ``cann_graph`` (``enable_cann_graph``).
    OpenVINO: ``openvino_device`` (``"CPU"``, ``"GPU"``, ``"GPU.1"``, ...).

    Raises:
        ProviderError: unknown provider name.
        InvalidOptionError: an option value out of range.
    """

    name: str = "cpu"
    device_id: int = 0
    trt_engine_cache: str | None = None
    trt_fp16: bool = False
    cann_precision_mode: str | None = None
    cann_op_select_impl_mode: str | None = None
    cann_graph: bool = False
    openvino_device: str | None = None

    def __post_init__(self) -> None:
        from faceweave.errors import InvalidOptionError, UnknownProviderError

        if self.name not in ORT_PROVIDER_NAMES:
            raise UnknownProviderError(f"unknown execution provider {self.name!r}; one of {', '.join(PROVIDERS)}")
        if isinstance(self.device_id, bool) or not isinstance(self.device_id, int) or self.device_id < 0:
            raise InvalidOptionError(f"--device-id must be a whole number >= 0, got {self.device_id!r}")
        if self.cann_precision_mode is not None and self.cann_precision_mode not in CANN_PRECISION_MODES:
            raise InvalidOptionError(
                f"CANN precision_mode {self.cann_precision_mode!r}; one of {', '.join(CANN_PRECISION_MODES)}"
            )
        if self.cann_op_select_impl_mode is not None and self.cann_op_select_impl_mode not in CANN_OP_SELECT_IMPL_MODES:
            raise InvalidOptionError(
                f"CANN op_select_impl_mode {self.cann_op_select_impl_mode!r}; one of "
                f"{', '.join(CANN_OP_SELECT_IMPL_MODES)}"
            )

    @property
    def ort_name(self) -> str:
        """ONNX Runtime's name for this provider (``"CUDAExecutionProvider"``)."""
        return ORT_PROVIDER_NAMES[self.name]

    def label(self) -> str:
        """``cuda:0`` style, for messages and reports."""
        return self.name if self.name in ("cpu", "coreml") else f"{self.name}:{self.device_id}"


def provider_name_for(ort_name: str) -> str | None:
    """faceweave's name for an ORT provider name, or ``None`` when not one of ours."""
    return _OUR_NAMES.get(ort_name)


def ort_providers(config: ProviderConfig, available: Sequence[str] = ()) -> list[tuple[str, dict[str, str]]]:
    """ONNX Runtime's ``providers`` list (name and options, in priority order).

    Pure: ``available`` (``onnxruntime.get_available_providers()``) only
    decides whether TensorRT's list includes CUDA for the nodes TensorRT
    cannot take.  CPU always ends the list (see the module doc).
    """
    device = str(config.device_id)
    chain: list[tuple[str, dict[str, str]]]
    if config.name == "cpu":
        return [(CPU, {})]
    if config.name == "tensorrt":
        options = {"device_id": device, "trt_fp16_enable": _flag(config.trt_fp16)}
        if config.trt_engine_cache is not None:
            options.update(
                trt_engine_cache_enable="True",
                trt_engine_cache_path=str(Path(config.trt_engine_cache)),
                trt_timing_cache_enable="True",
                trt_timing_cache_path=str(Path(config.trt_engine_cache)),
            )
        chain = [("TensorrtExecutionProvider", options)]
        if not available or "CUDAExecutionProvider" in available:
            chain.append(("CUDAExecutionProvider", {"device_id": device}))
    elif config.name == "cann":
        options = {"device_id": device, "enable_cann_graph": _flag(config.cann_graph)}
        if config.cann_precision_mode is not None:
            options["precision_mode"] = config.cann_precision_mode
        if config.cann_op_select_impl_mode is not None:
            options["op_select_impl_mode"] = config.cann_op_select_impl_mode
        chain = [("CANNExecutionProvider", options)]
    elif config.name == "openvino":
        options = {"device_type": config.openvino_device} if config.openvino_device else {}
        chain = [("OpenVINOExecutionProvider", options)]
    elif config.name == "coreml":
        chain = [("CoreMLExecutionProvider", {})]
    else:  # cuda, directml, rocm, migraphx take a device id
        chain = [(config.ort_name, {"device_id": device})]
    return chain + [(CPU, {})]


def _flag(value: bool) -> str:
    return "True" if value else "False"
