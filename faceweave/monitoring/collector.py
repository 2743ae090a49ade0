"""The device monitor's readings as Prometheus metrics, taken at scrape time.

:class:`DeviceCollector` is a ``prometheus_client`` custom collector: each
scrape calls the monitor's ``read()`` once and yields the families listed in
``docs/METRICS.md`` ("Devices").  Counters are exported as the readings give
them: ECC counts are the driver's, the Xid count is the monitor's running total
(see :class:`~faceweave.monitoring.devices.DeviceReading`); the collector adds
nothing up except its own count of failed readings.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from faceweave.monitoring.devices import LOGGER_NAME, DeviceMonitor, DeviceReading

#: distinct failure messages remembered (each logged once); past this, failures are only counted
MAX_LOGGED_ERRORS = 64

DEVICE_LABELS = ("worker", "vendor", "device")

#: gauge name (without the faceweave_device_ prefix), help, how to get its value from a reading
_GAUGES: tuple[tuple[str, str, Callable[[DeviceReading], float | None]], ...] = (
    (
        "utilization_ratio",
        "Compute utilisation, 0 to 1 (host: 1-minute load over CPUs).",
        lambda r: r.utilization,
    ),
    (
        "memory_used_bytes",
        "Device memory used (host: the worker's resident memory).",
        lambda r: r.memory_used_bytes,
    ),
    (
        "memory_total_bytes",
        "Device memory (host: the machine's memory).",
        lambda r: r.memory_total_bytes,
    ),
    ("temperature_celsius", "Chip temperature, where the tool reports one.", lambda r: r.temperature_c),
    ("power_watts", "Power draw, where the tool reports one.", lambda r: r.power_w),
    (
        "healthy",
        "1, or 0 when the tool reports the device in an error state.",
        lambda r: None if r.healthy is None else float(r.healthy),
    ),
)


class DeviceCollector:
    """Exports ``monitor``'s readings with the label ``worker`` on every series.

    Register it in a ``CollectorRegistry``; :meth:`describe` returns nothing,
    so registering does not read the devices.  A failed reading (any exception
    from ``monitor.read()``) never leaves :meth:`collect`: it counts in
    ``faceweave_device_scrape_errors_total``, gives ``faceweave_devices_visible``
    0, and is logged once per distinct message on ``log`` (default: the
    ``faceweave.monitoring`` logger); the first good reading after failures is
    logged too.  Scrapes are serialised by a lock.
    """

    def __init__(self, monitor: DeviceMonitor, *, worker: str, log: logging.Logger | None = None) -> None:
        self.monitor = monitor
        self.worker = worker
        self._log = log or logging.getLogger(LOGGER_NAME)
        self._lock = threading.Lock()
        self._scrape_errors = 0
        self._logged: set[str] = set()

    def describe(self) -> list[Metric]:
        """Nothing: the series depend on what the monitor sees at scrape time."""
        return []

    def collect(self) -> Iterator[Metric]:
        """The ``faceweave_device*`` families of one reading."""
        with self._lock:
            readings = self._read()
            try:
                devices = self._device_families(readings or [])
            except Exception as exc:  # noqa: BLE001 - a reading that does not export counts as failed
                self._failed(exc)
                readings, devices = None, self._device_families([])
            families = [*devices, *self._monitor_families(readings)]
        yield from families

    def readings(self) -> list[DeviceReading] | None:
        """One reading outside a scrape (the worker's device watch), serialised
        with the scrapes; ``None`` when reading failed (counted and logged as a scrape's)."""
        with self._lock:
            return self._read()

    def _read(self) -> list[DeviceReading] | None:
        """The monitor's readings, or ``None`` when reading failed."""
        try:
            readings = list(self.monitor.read())
        except Exception as exc:  # noqa: BLE001 - a scrape must answer whatever the monitor does
            self._failed(exc)
            return None
        if self._logged:
            self._log.info("device monitor %r: readings are back", self.monitor.vendor)
            self._logged.clear()
        return readings

    def _failed(self, exc: Exception) -> None:
        """Count a failed reading; log it unless its message was logged already."""
        self._scrape_errors += 1
        message = f"{type(exc).__name__}: {exc}"
        if message not in self._logged and len(self._logged) < MAX_LOGGED_ERRORS:
            self._logged.add(message)
            self._log.warning("device monitor %r: reading failed: %s", self.monitor.vendor, message)

    def _monitor_families(self, readings: list[DeviceReading] | None) -> list[Metric]:
        """``faceweave_devices_visible`` and ``faceweave_device_scrape_errors_total``."""
        vendor = self.monitor.vendor
        visible = GaugeMetricFamily(
            "faceweave_devices_visible", "Devices the monitor sees (0: none visible).", labels=("worker", "vendor")
        )
        visible.add_metric((self.worker, vendor), float(len(readings or ())))
        errors = CounterMetricFamily(
            "faceweave_device_scrape_errors",
            "Readings of the device monitor that failed.",
            labels=("worker", "monitor"),
        )
        errors.add_metric((self.worker, vendor), float(self._scrape_errors))
        return [visible, errors]

    def _device_families(self, readings: list[DeviceReading]) -> list[Metric]:
        info = GaugeMetricFamily(
            "faceweave_device_info", "1 per device, with its product name.", labels=(*DEVICE_LABELS, "name")
        )
        gauges = [
            (GaugeMetricFamily(f"faceweave_device_{name}", text, labels=DEVICE_LABELS), value)
            for name, text, value in _GAUGES
        ]
        ecc = CounterMetricFamily(
            "faceweave_device_ecc_errors", "ECC errors since the driver loaded.", labels=(*DEVICE_LABELS, "type")
        )
        xid = CounterMetricFamily(
            "faceweave_device_xid_errors", "NVIDIA Xid error events seen by the monitor.", labels=DEVICE_LABELS
        )
        for reading in readings:
            labels = (self.worker, reading.vendor, reading.device)
            info.add_metric((*labels, reading.name), 1.0)
            for family, value in gauges:
                _add(family, labels, value(reading))
            _add(ecc, (*labels, "corrected"), reading.ecc_corrected)
            _add(ecc, (*labels, "uncorrected"), reading.ecc_uncorrected)
            _add(xid, labels, reading.xid_errors)
        return [info, *(family for family, _ in gauges), ecc, xid]


def _add(family: GaugeMetricFamily | CounterMetricFamily, labels: tuple[str, ...], value: float | None) -> None:
    if value is not None:
        family.add_metric(labels, value)
