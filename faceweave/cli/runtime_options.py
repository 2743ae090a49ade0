"""Options that choose where models run, shared by the commands that run them.

Use the ``Annotated`` aliases as parameter types of a command, then build the
:class:`ProviderConfig` with :func:`provider_config`::

    def swap_command(..., execution_provider: ExecutionProviderOption = "cpu",
                     device_id: DeviceIdOption = 0, provider_fallback: ProviderFallbackOption = False):
        config = provider_config(execution_provider, device_id)
        with SessionPool(fallback=provider_fallback) as pool: ...
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from faceweave.runtime.providers import PROVIDERS, ProviderConfig

#: the help panel these options are listed under
PANEL = "Neural models (optional)"

ExecutionProviderOption = Annotated[
    str,
    typer.Option(
        "--execution-provider",
        metavar="NAME",
        help=f"Where neural models run: {'|'.join(PROVIDERS)}.",
        rich_help_panel=PANEL,
    ),
]
DeviceIdOption = Annotated[
    int,
    typer.Option(
        "--device-id", metavar="N", min=0, help="Accelerator index for the execution provider.", rich_help_panel=PANEL
    ),
]
ProviderFallbackOption = Annotated[
    bool,
    typer.Option(
        "--provider-fallback",
        help="Use the CPU (with a warning) when the execution provider is not available.",
        rich_help_panel=PANEL,
    ),
]
TensorrtCacheOption = Annotated[
    Path | None,
    typer.Option(
        "--tensorrt-cache",
        metavar="DIR",
        help="TensorRT: keep built engines in DIR (much faster next start).",
        rich_help_panel=PANEL,
    ),
]
TensorrtFp16Option = Annotated[
    bool, typer.Option("--tensorrt-fp16", help="TensorRT: build fp16 engines.", rich_help_panel=PANEL)
]
SwapperOption = Annotated[
    str,
    typer.Option(
        "--swapper",
        metavar="NAME",
        help="'mesh' (classical, works offline) or a neural model such as inswapper_128, hyperswap_1a_256, "
        "simswap_256 (see 'faceweave models list'; the file must be downloaded or imported first).",
        rich_help_panel=PANEL,
    ),
]
PixelBoostOption = Annotated[
    int | None,
    typer.Option(
        "--pixel-boost",
        "--face-swapper-pixel-boost",
        metavar="PX",
        help="Neural swappers: run the model on tiles of a crop this large (e.g. 256 or 512 for a 128 px model).",
        rich_help_panel=PANEL,
    ),
]
CompositingOption = Annotated[
    str | None,
    typer.Option(
        "--compositing",
        metavar="MODE",
        help="Neural swappers: how the new face is put into the picture: facefusion (FaceFusion's box mask and "
        "paste-back, no colour transfer), faceweave (colour, shading, multi-band blend, grain) or auto "
        "(default: the one that measured best, see docs/MODELS.md).",
        rich_help_panel=PANEL,
    ),
]
SourceBlendOption = Annotated[
    str | None,
    typer.Option(
        "--source-blend",
        metavar="MODE",
        help="Neural swappers with several --source photos: average (default, as FaceFusion: their identity "
        "embeddings averaged) or pose (the photo closest in head pose to each face).",
        rich_help_panel=PANEL,
    ),
]
ModelsDirOption = Annotated[
    Path | None,
    typer.Option(
        "--models-dir",
        metavar="DIR",
        help="Model folder (default $FACEWEAVE_MODELS or ~/.cache/faceweave/models).",
        rich_help_panel=PANEL,
    ),
]


def runtime_fields(
    execution_provider: str = "cpu",
    device_id: int = 0,
    provider_fallback: bool = False,
    tensorrt_cache: Path | None = None,
    tensorrt_fp16: bool = False,
    models_dir: Path | None = None,
) -> dict:
    """The ``runtime`` part of :class:`~faceweave.options.SwapOptions` from the flags above."""
    return {
        "execution_provider": execution_provider,
        "device_id": device_id,
        "provider_fallback": provider_fallback,
        "tensorrt_cache": str(tensorrt_cache) if tensorrt_cache is not None else None,
        "tensorrt_fp16": tensorrt_fp16,
        "models_dir": str(models_dir) if models_dir is not None else None,
    }


def provider_config(
    execution_provider: str = "cpu",
    device_id: int = 0,
    *,
    tensorrt_cache: Path | None = None,
    tensorrt_fp16: bool = False,
    **options,
) -> ProviderConfig:
    """The :class:`ProviderConfig` for the flags; ``options`` are further
    :class:`ProviderConfig` fields (CANN, OpenVINO).

    Raises:
        ProviderError: unknown provider name.
        InvalidOptionError: a value out of range.
    """
    return ProviderConfig(
        name=execution_provider.strip().lower(),
        device_id=device_id,
        trt_engine_cache=str(tensorrt_cache) if tensorrt_cache is not None else None,
        trt_fp16=tensorrt_fp16,
        **options,
    )
