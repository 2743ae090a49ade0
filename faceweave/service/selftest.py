"""A worker's self-test: one small swap through the models it runs jobs with.

Run when a worker process has loaded its models and again after a job failed
with an error that is not the input's fault (:func:`may_be_device_fault`).  A
self-test that fails means the device (or its runtime) is at fault, not the
job: the worker marks itself unhealthy and hands the job back
(:class:`~faceweave.errors.DeviceFaultError`).

The picture is a crop of NASA's portrait of Eileen Collins (public domain,
``skimage.data.astronaut``), swapped onto its own mirror image.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np

from faceweave.errors import DeviceFaultError, InputError, NoFaceError, NoMatchingFaceError, OutputError

if TYPE_CHECKING:
    from faceweave.options import RuntimeOptions, SwapOptions
    from faceweave.service.models import JobModels

log = logging.getLogger("faceweave.service.worker")

#: errors that say the job's input or options are wrong, never the device
INPUT_FAULTS: tuple[type[BaseException], ...] = (InputError, NoFaceError, NoMatchingFaceError, OutputError)


def may_be_device_fault(error: BaseException) -> bool:
    """Whether ``error`` might come from the device rather than the job (worth a self-test)."""
    return isinstance(error, Exception) and not isinstance(error, INPUT_FAULTS)


def self_test_picture() -> np.ndarray:
    """The bundled test face, ``(220, 180, 3)`` uint8 RGB."""
    from faceweave.io.images import read_image

    data = resources.files("faceweave.service").joinpath("data/selftest.jpg").read_bytes()
    return read_image(data, role="self-test picture").pixels


def self_test(models: JobModels, options: SwapOptions) -> float:
    """Swap the test face onto its mirror with ``options``' swapper and runtime;
    returns the seconds it took.

    Raises:
        DeviceFaultError: the swap raised, found no face, or gave a broken picture.
    """
    from faceweave.provenance.stamp import Provenance

    began = time.perf_counter()
    picture = self_test_picture()
    try:
        swapper = models.swapper(options)
        result = swapper.swap(
            picture, np.ascontiguousarray(picture[:, ::-1]), provenance=Provenance.new(watermark=False)
        )
    except Exception as exc:  # noqa: BLE001 - any failure here is the device's
        raise DeviceFaultError(f"self-test failed: {type(exc).__name__}: {exc}") from exc
    if not result.swapped or result.image.shape != picture.shape:
        raise DeviceFaultError("self-test failed: the test face was not swapped")
    if float(np.abs(result.image.astype(np.int16) - picture[:, ::-1]).mean()) == 0.0:
        raise DeviceFaultError("self-test failed: the swap left the picture unchanged")
    return time.perf_counter() - began


def fault_check(
    models: JobModels,
    runtime: RuntimeOptions,
    *,
    test: Callable[[JobModels, SwapOptions], float] = self_test,
) -> Callable[[BaseException], DeviceFaultError | None]:
    """For :func:`~faceweave.service.worker.run_job`: after a job's error that
    may be the device's, a self-test (``test``) with the job's options (the
    swapper ``models`` built last; else the worker's ``runtime`` defaults);
    the :class:`DeviceFaultError` it raises is the fault, ``None`` clears the device."""
    from faceweave.options import SwapOptions

    def check(error: BaseException) -> DeviceFaultError | None:
        if not may_be_device_fault(error):
            return None
        log.warning("worker process %s: a job failed with %s; self-testing", os.getpid(), type(error).__name__)
        try:
            test(models, models.options or SwapOptions(runtime=runtime))
        except DeviceFaultError as fault:
            return fault
        return None

    return check
