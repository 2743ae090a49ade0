"""Device readings, the protocol every vendor's monitor follows, and choosing one by name.

A monitor returns one :class:`DeviceReading` per device it sees each time it is
read; :class:`faceweave.monitoring.collector.DeviceCollector` turns those into
the ``faceweave_device_*`` metrics of ``docs/METRICS.md`` at scrape time.

Monitors, by name (:func:`monitor_factories`):

* ``nvidia``: NVML through ``pynvml`` (:class:`~faceweave.monitoring.nvml.NvmlMonitor`);
* ``ascend``: Huawei's ``npu-smi info`` (:class:`~faceweave.monitoring.ascend.AscendMonitor`);
* ``cambricon``: Cambricon's ``cnmon`` (:class:`~faceweave.monitoring.cambricon.CambriconMonitor`);
* ``host``: the CPU and the worker's resident memory (:class:`~faceweave.monitoring.host.HostMonitor`).

:func:`open_monitor` picks one; a vendor's monitor whose tool or library is
missing falls back to the host monitor with one logged warning, never silently
and never with an exception.
"""

from __future__ import annotations

import logging
import math
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Protocol, runtime_checkable

LOGGER_NAME = "faceweave.monitoring"

#: ``npu-smi`` and ``cnmon`` print MB / MiB meaning 2**20 bytes
MIB = 1024 * 1024

#: what the vendor tools print for a value they do not have
NOT_AVAILABLE = frozenset({"-", "--", "NA", "N/A", "n/a"})

#: seconds a vendor tool may take before the reading fails
TOOL_TIMEOUT_S = 10.0

#: every name :func:`open_monitor` accepts
KINDS = ("auto", "nvidia", "ascend", "cambricon", "host")


class DeviceReadError(Exception):
    """A monitor could not read its devices: the tool or library is missing or
    failed, or its output does not parse.

    ``monitor`` is the monitor's name (``"ascend"``, ...), ``reason`` a short
    sentence; ``str()`` gives both.
    """

    def __init__(self, monitor: str, reason: str) -> None:
        super().__init__(f"{monitor} monitor: {reason}")
        self.monitor = monitor
        self.reason = reason


@dataclass(frozen=True)
class DeviceReading:
    """What one monitor read of one device at one moment.

    ``vendor``: the monitor's name; ``device``: the index as the vendor's tool
    gives it (``"cpu"`` for the host); ``name``: the product name.  Every other
    field is ``None`` when the tool does not report it (and is then not
    exported):

    * ``utilization``: compute utilisation, 0 to 1 (host: 1-minute load over
      CPUs, which can exceed 1);
    * ``memory_used_bytes`` / ``memory_total_bytes``: device memory (host: the
      worker's resident memory / the machine's memory);
    * ``temperature_c``, ``power_w``;
    * ``ecc_corrected`` / ``ecc_uncorrected``: ECC error counts since the
      driver loaded, as the driver keeps them;
    * ``xid_errors``: NVIDIA Xid critical-error events seen since the monitor
      was opened.  The *monitor* keeps this running total (it drains the
      driver's event queue at each read); consumers export it as it is;
    * ``healthy``: ``False`` when the tool reports the device in an error state.

    Raises:
        ValueError: an empty ``vendor`` or ``device``, or a negative or
            non-finite amount.
    """

    vendor: str
    device: str
    name: str = ""
    utilization: float | None = None
    memory_used_bytes: float | None = None
    memory_total_bytes: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    ecc_corrected: float | None = None
    ecc_uncorrected: float | None = None
    xid_errors: float | None = None
    healthy: bool | None = None

    def __post_init__(self) -> None:
        if not self.vendor or not self.device:
            raise ValueError(f"a device reading needs a vendor and a device, got {self.vendor!r}, {self.device!r}")
        for field in fields(self):
            value = getattr(self, field.name)
            if field.name in _AMOUNTS and value is not None and not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{field.name} must be a finite amount >= 0, got {value!r}")
        if self.temperature_c is not None and not math.isfinite(self.temperature_c):
            raise ValueError(f"temperature_c must be finite, got {self.temperature_c!r}")


_AMOUNTS = frozenset(
    {
        "utilization",
        "memory_used_bytes",
        "memory_total_bytes",
        "power_w",
        "ecc_corrected",
        "ecc_uncorrected",
        "xid_errors",
    }
)


@runtime_checkable
class DeviceMonitor(Protocol):
    """Reads the devices of one vendor.

    ``read()`` returns one reading per visible device (``[]``: none visible)
    and raises :class:`DeviceReadError` when the tool fails or prints what does
    not parse; ``close()`` frees what the monitor holds (idempotent).
    """

    vendor: str

    def read(self) -> list[DeviceReading]: ...

    def close(self) -> None: ...


MonitorFactory = Callable[[], DeviceMonitor]


def _nvidia() -> DeviceMonitor:
    from faceweave.monitoring.nvml import NvmlMonitor

    return NvmlMonitor()


def _ascend() -> DeviceMonitor:
    from faceweave.monitoring.ascend import AscendMonitor

    return AscendMonitor()


def _cambricon() -> DeviceMonitor:
    from faceweave.monitoring.cambricon import CambriconMonitor

    return CambriconMonitor()


def _host() -> DeviceMonitor:
    from faceweave.monitoring.host import HostMonitor

    return HostMonitor()


def monitor_factories() -> Mapping[str, MonitorFactory]:
    """Monitor name -> a factory that opens it, in ``"auto"``'s order of preference.

    A factory raises :class:`DeviceReadError` when its tool or library is not
    there (NVML does not initialise, ``npu-smi`` / ``cnmon`` not on ``PATH``);
    ``host`` always opens.
    """
    return MappingProxyType({"nvidia": _nvidia, "ascend": _ascend, "cambricon": _cambricon, "host": _host})


def open_monitor(
    kind: str = "auto",
    *,
    log: logging.Logger | None = None,
    factories: Mapping[str, MonitorFactory] | None = None,
) -> DeviceMonitor:
    """Open the monitor named ``kind`` (one of :data:`KINDS`).

    ``"auto"``: NVIDIA when NVML initialises, else Ascend when ``npu-smi`` is on
    ``PATH``, else Cambricon when ``cnmon`` is, else the host.  A vendor asked
    for by name whose tool or library is missing gives the host monitor and one
    warning on ``log`` (default: the ``faceweave.monitoring`` logger).
    ``factories`` replaces :func:`monitor_factories` (tests).

    Raises:
        ValueError: ``kind`` is not one of :data:`KINDS`.
    """
    log = log or logging.getLogger(LOGGER_NAME)
    factories = monitor_factories() if factories is None else factories
    if kind not in KINDS:
        raise ValueError(f"unknown device monitor {kind!r}; one of {', '.join(KINDS)}")
    if kind == "host":
        return factories["host"]()
    if kind != "auto":
        try:
            return factories[kind]()
        except DeviceReadError as exc:
            log.warning("device monitor %r unavailable (%s); using the host monitor instead", kind, exc.reason)
            return factories["host"]()
    for vendor in ("nvidia", "ascend", "cambricon"):
        try:
            return factories[vendor]()
        except DeviceReadError as exc:
            log.debug("device monitor %r not available: %s", vendor, exc.reason)
    return factories["host"]()


def run_tool(monitor: str, argv: Sequence[str], *, timeout_s: float = TOOL_TIMEOUT_S) -> str:
    """Run a vendor tool and return what it printed on stdout.

    Raises:
        DeviceReadError: the tool cannot start, runs past ``timeout_s`` or exits
            with a status other than 0.
    """
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise DeviceReadError(monitor, f"{argv[0]} did not run: {exc}") from exc
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise DeviceReadError(monitor, f"{' '.join(argv)} exited {done.returncode}: {said[0] if said else 'no output'}")
    return done.stdout


def table_cells(line: str) -> list[str] | None:
    """The cells of one ``| a | b |`` row of a tool's box-drawn table, stripped;
    ``None`` for a line that is not such a row (rules such as ``|===+===|``,
    titles outside the box, blank lines)."""
    text = line.strip()
    if len(text) < 2 or not (text.startswith("|") and text.endswith("|")) or not text.strip("|=+-"):
        return None
    return [cell.strip() for cell in text[1:-1].split("|")]


def number(monitor: str, text: str, *, what: str, suffix: str = "") -> float | None:
    """``text`` as a float, with ``suffix`` (``"%"``, ``"C"``) removed; ``None``
    for the tools' not-available marks (``-``, ``N/A``, ...).

    Raises:
        DeviceReadError: anything else that is not a number.
    """
    if text in NOT_AVAILABLE:
        return None
    if suffix and text.endswith(suffix):
        text = text[: -len(suffix)]
    try:
        value = float(text)
    except ValueError:
        raise DeviceReadError(monitor, f"{what} is not a number: {text!r}") from None
    if not math.isfinite(value):
        raise DeviceReadError(monitor, f"{what} is not a finite number: {text!r}")
    return value


def first_line(text: str) -> str:
    """The first non-blank line of a tool's output, shortened, for an error message."""
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not line:
        return "empty output"
    return f"first line: {line[:120]!r}"
