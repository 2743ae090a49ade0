"""Device monitors: one per accelerator vendor behind one protocol, and their
Prometheus collector.

``open_monitor("auto")`` picks NVIDIA (NVML), Huawei Ascend (``npu-smi``),
Cambricon (``cnmon``) or the host; :class:`DeviceCollector` exports what the
monitor reads at each scrape under the names of ``docs/METRICS.md``.
"""

from faceweave.monitoring.ascend import AscendMonitor, parse_npu_smi_info
from faceweave.monitoring.cambricon import CambriconMonitor, parse_cnmon
from faceweave.monitoring.collector import DeviceCollector
from faceweave.monitoring.devices import (
    KINDS,
    DeviceMonitor,
    DeviceReadError,
    DeviceReading,
    MonitorFactory,
    monitor_factories,
    open_monitor,
)
from faceweave.monitoring.host import HostMonitor
from faceweave.monitoring.nvml import NvmlMonitor

__all__ = [
    "KINDS",
    "AscendMonitor",
    "CambriconMonitor",
    "DeviceCollector",
    "DeviceMonitor",
    "DeviceReadError",
    "DeviceReading",
    "HostMonitor",
    "MonitorFactory",
    "NvmlMonitor",
    "monitor_factories",
    "open_monitor",
    "parse_cnmon",
    "parse_npu_smi_info",
]
