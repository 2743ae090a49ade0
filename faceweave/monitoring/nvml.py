"""NVIDIA GPUs, read through NVML (``pynvml``, from the ``nvidia-ml-py`` package).

Per device, at each read: name, utilisation (``.gpu`` percent), memory used /
total, GPU temperature, power (NVML gives milliwatts), volatile ECC counts
(corrected, uncorrected: since the driver loaded) and Xid critical-error
events.  For the Xids the monitor registers one NVML event set per device and
drains it without blocking at each read; it keeps the running total itself,
so :attr:`DeviceReading.xid_errors` is a counter value.

A call that NVML answers "not supported" (also "no permission", "function not
found": an old driver) leaves that field ``None``; any other NVML error on a
device (GPU lost, unknown error, ...) marks the reading ``healthy=False``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from faceweave.monitoring.devices import DeviceReadError, DeviceReading

VENDOR = "nvidia"

#: events drained from one device's queue at most per read (the queue is bounded anyway)
MAX_EVENTS_PER_READ = 1024

T = TypeVar("T")


class NvmlMonitor:
    """Reads NVIDIA GPUs through NVML; NVML is initialised here and shut down by :meth:`close`.

    ``nvml``: the ``pynvml`` module (imported here when ``None``) or an object
    with the same names (tests).

    Raises:
        DeviceReadError: ``pynvml`` is missing, or NVML does not initialise
            (no driver, no GPU).
    """

    vendor = VENDOR

    def __init__(self, nvml: Any = None) -> None:
        if nvml is None:
            try:
                import pynvml  # type: ignore[import-untyped]
            except ImportError as exc:
                raise DeviceReadError(VENDOR, f"pynvml is not installed ({exc})") from exc
            nvml = pynvml
        try:
            nvml.nvmlInit()
        except (nvml.NVMLError, OSError) as exc:
            raise DeviceReadError(VENDOR, f"NVML did not initialise: {exc}") from exc
        self._nvml = nvml
        self._unavailable = frozenset(
            {nvml.NVML_ERROR_NOT_SUPPORTED, nvml.NVML_ERROR_NO_PERMISSION, nvml.NVML_ERROR_FUNCTION_NOT_FOUND}
        )
        self._lock = threading.Lock()
        self._closed = False
        #: device index -> its Xid event set; None: Xid events not supported there
        self._event_sets: dict[int, Any] = {}
        self._xids: dict[int, int] = {}

    def read(self) -> list[DeviceReading]:
        """One reading per GPU NVML counts.

        Raises:
            DeviceReadError: the monitor is closed, or NVML cannot count the GPUs.
        """
        with self._lock:
            if self._closed:
                raise DeviceReadError(VENDOR, "the monitor is closed")
            try:
                count = self._nvml.nvmlDeviceGetCount()
            except self._nvml.NVMLError as exc:
                raise DeviceReadError(VENDOR, f"cannot count the GPUs: {exc}") from exc
            return [self._read_device(index) for index in range(count)]

    def close(self) -> None:
        """Free the event sets and shut NVML down (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for event_set in self._event_sets.values():
                if event_set is not None:
                    self._quietly(self._nvml.nvmlEventSetFree, event_set)
            self._event_sets.clear()
            self._quietly(self._nvml.nvmlShutdown)

    def _read_device(self, index: int) -> DeviceReading:
        nvml = self._nvml
        faults: list[Exception] = []
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
        except nvml.NVMLError:
            return DeviceReading(vendor=VENDOR, device=str(index), healthy=False)

        def ask(call: Callable[..., T], *args: Any) -> T | None:
            return self._ask(faults, call, handle, *args)

        name = ask(nvml.nvmlDeviceGetName)
        rates = ask(nvml.nvmlDeviceGetUtilizationRates)
        memory = ask(nvml.nvmlDeviceGetMemoryInfo)
        milliwatts = ask(nvml.nvmlDeviceGetPowerUsage)
        errors = nvml.NVML_VOLATILE_ECC
        corrected = ask(nvml.nvmlDeviceGetTotalEccErrors, nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, errors)
        uncorrected = ask(nvml.nvmlDeviceGetTotalEccErrors, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, errors)
        return DeviceReading(
            vendor=VENDOR,
            device=str(index),
            name=name.decode(errors="replace") if isinstance(name, bytes) else str(name or ""),
            utilization=None if rates is None else rates.gpu / 100.0,
            memory_used_bytes=None if memory is None else float(memory.used),
            memory_total_bytes=None if memory is None else float(memory.total),
            temperature_c=_float(ask(nvml.nvmlDeviceGetTemperature, nvml.NVML_TEMPERATURE_GPU)),
            power_w=None if milliwatts is None else milliwatts / 1000.0,
            ecc_corrected=_float(corrected),
            ecc_uncorrected=_float(uncorrected),
            xid_errors=self._drain_xids(index, handle, faults),
            healthy=not faults,
        )

    def _ask(self, faults: list[Exception], call: Callable[..., T], *args: Any) -> T | None:
        """``call(*args)``; ``None`` when NVML cannot answer it, and the error
        kept in ``faults`` when that says the device is in an error state."""
        try:
            return call(*args)
        except self._nvml.NVMLError as exc:
            if exc.value not in self._unavailable:
                faults.append(exc)
            return None

    def _drain_xids(self, index: int, handle: Any, faults: list[Exception]) -> float | None:
        """The running count of Xid events of device ``index``, after taking
        what is pending (without waiting); ``None`` where events are not supported."""
        nvml = self._nvml
        if index not in self._event_sets:
            event_set = self._ask(faults, nvml.nvmlEventSetCreate)
            if event_set is None:
                return None
            try:
                nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, event_set)
            except nvml.NVMLError as exc:
                self._quietly(nvml.nvmlEventSetFree, event_set)
                if exc.value not in self._unavailable:
                    faults.append(exc)
                    return None  # try again at the next read
                event_set = None
            self._event_sets[index] = event_set
            self._xids[index] = 0
        event_set = self._event_sets[index]
        if event_set is None:
            return None
        for _ in range(MAX_EVENTS_PER_READ):
            try:
                event = nvml.nvmlEventSetWait_v2(event_set, 0)
            except nvml.NVMLError as exc:
                if exc.value != nvml.NVML_ERROR_TIMEOUT:  # timeout: nothing (more) pending
                    faults.append(exc)
                break
            if getattr(event, "eventType", nvml.nvmlEventTypeXidCriticalError) & nvml.nvmlEventTypeXidCriticalError:
                self._xids[index] += 1
        return float(self._xids[index])

    def _quietly(self, call: Callable[..., object], *args: Any) -> None:
        with contextlib.suppress(self._nvml.NVMLError):
            call(*args)


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)
