"""Device monitors (faceweave.monitoring): the npu-smi and cnmon parsers on
real published outputs (tests/data/devices, see SOURCES.md there), NVML
through a fake of pynvml's functions, the host monitor, choosing a monitor,
and the Prometheus collector against docs/METRICS.md."""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
import sys
import threading
import time
from pathlib import Path

import pynvml
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from faceweave.monitoring import (
    AscendMonitor,
    CambriconMonitor,
    DeviceCollector,
    DeviceMonitor,
    DeviceReadError,
    DeviceReading,
    HostMonitor,
    NvmlMonitor,
    monitor_factories,
    open_monitor,
    parse_cnmon,
    parse_npu_smi_info,
)

DATA = Path(__file__).parent / "data" / "devices"
METRICS_DOC = Path(__file__).resolve().parents[1] / "docs" / "METRICS.md"
MIB = 1024 * 1024
#: absolute, since the tests that run fake tools put only the tools' folder on PATH
CAT = shutil.which("cat") or "/bin/cat"


def sample(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


# ---------------------------------------------------------------- npu-smi

# file, devices, (first device: id, name, utilization, used MiB, total MiB, temp, power, healthy)
NPU_SMI_SAMPLES = [
    ("npu-smi-310-atlas300i.txt", ["3", "4", "5", "6"], ("3", "310", 0.0, 2703, 8192, 73.0, 12.8, True)),
    ("npu-smi-310p3.txt", ["0"], ("0", "310P3", 0.0, 994, 21534, 42.0, 16.2, True)),
    ("npu-smi-310p3-busy.txt", ["0"], ("0", "310P3", 0.0, 4060, 21534, 53.0, 16.3, True)),
    ("npu-smi-910a.txt", [str(i) for i in range(8)], ("0", "910A", 0.0, 0, 32768, 43.0, 67.2, True)),
    (
        "npu-smi-910-24.1rc2-warning.txt",
        [str(i) for i in range(8)],
        ("0", "xxx", 0.0, 0, 32768, 42.0, 70.5, True),
    ),
    ("npu-smi-910b2c.txt", [str(i) for i in range(16)], ("0", "910B2C", 0.0, 59356, 65536, 35.0, 86.8, True)),
    ("npu-smi-910-a3.txt", [str(i) for i in range(16)], ("0", "Ascend910", 0.07, 61609, 65536, 43.0, 211.3, True)),
]


@pytest.mark.parametrize(("file", "devices", "first"), NPU_SMI_SAMPLES)
def test_npu_smi_samples(file: str, devices: list[str], first: tuple) -> None:
    readings = parse_npu_smi_info(sample(file))
    assert [r.device for r in readings] == devices
    assert {r.vendor for r in readings} == {"ascend"}
    device, name, utilization, used, total, temperature, power, healthy = first
    head = readings[0]
    assert (head.device, head.name, head.healthy) == (device, name, healthy)
    assert head.utilization == pytest.approx(utilization)
    assert head.memory_used_bytes == used * MIB
    assert head.memory_total_bytes == total * MIB
    assert (head.temperature_c, head.power_w) == (temperature, power)
    assert (head.ecc_corrected, head.ecc_uncorrected, head.xid_errors) == (None, None, None)


def test_npu_smi_910a_reads_hbm_not_the_control_cpus_ddr() -> None:
    """910 prints Memory-Usage (the control CPU's DDR, 1867 / 15077) and
    HBM-Usage (the compute memory, 0 / 32768): the HBM is the device memory."""
    readings = parse_npu_smi_info(sample("npu-smi-910a.txt"))
    assert {r.memory_total_bytes for r in readings} == {32768 * MIB}
    assert [r.power_w for r in readings][3] == 191.7


def test_npu_smi_warning_is_healthy_and_the_process_table_is_not_read() -> None:
    readings = parse_npu_smi_info(sample("npu-smi-910-24.1rc2-warning.txt"))
    assert len(readings) == 8  # the 32 process rows below the table are not devices
    assert [r.healthy for r in readings] == [True] * 8
    assert readings[3].power_w == 206.9


def test_npu_smi_a3_two_chips_per_npu_by_phy_id() -> None:
    """910_93: chip 1 of each NPU prints power '-', its Phy-ID is the device."""
    readings = parse_npu_smi_info(sample("npu-smi-910-a3.txt"))
    assert [r.power_w for r in readings[:4]] == [211.3, None, 210.6, None]
    assert readings[15].device == "15"
    assert readings[15].memory_used_bytes == 61631 * MIB
    assert readings[8].utilization == pytest.approx(0.08)


def test_npu_smi_five_digit_used_without_space() -> None:
    """'59356/ 65536': npu-smi pads used to 5 characters, so 5 digits touch the slash."""
    readings = parse_npu_smi_info(sample("npu-smi-910b2c.txt"))
    assert [r.memory_used_bytes for r in readings[:3]] == [59356 * MIB, 59351 * MIB, 59351 * MIB]
    assert readings[15].power_w == 104.2


@pytest.mark.parametrize(
    ("state", "healthy"),
    [("OK", True), ("Warning", True), ("Alarm", False), ("Critical", False), ("Unknown-State", False)],
)
def test_npu_smi_health_states(state: str, healthy: bool) -> None:
    text = sample("npu-smi-310p3.txt").replace("| OK              |", f"| {state:<15} |")
    assert parse_npu_smi_info(text)[0].healthy is healthy


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (sample("npu-smi-truncated.txt"), "without its second row"),
        (sample("garbage.txt"), "no npu-smi device table"),
        ("", "empty output"),
        (sample("npu-smi-310p3.txt").replace("16.2 ", "hot! "), "Power"),
        (sample("npu-smi-310p3.txt").replace("994  / 21534", "994  of 21534"), "memory values"),
        (sample("cnmon-mlu370-x8-v5.10.13.txt"), "no npu-smi device table"),
    ],
)
def test_npu_smi_malformed(text: str, error: str) -> None:
    with pytest.raises(DeviceReadError, match=error) as caught:
        parse_npu_smi_info(text)
    assert caught.value.monitor == "ascend"


def test_npu_smi_header_without_devices_is_none_visible() -> None:
    header = "\n".join(sample("npu-smi-910b2c.txt").splitlines()[:6])
    assert parse_npu_smi_info(header) == []


# ---------------------------------------------------------------- cnmon

# file, devices, name, total MiB, temperatures, powers
CNMON_SAMPLES = [
    ("cnmon-mlu370-x4-v4.20.11.txt", ["0", "1", "2"], "MLU370-X4", 23308, [32.0, 33.0, 30.0], [30.0, 25.0, 26.0]),
    ("cnmon-mlu370-x4-v5.10.10.txt", ["0", "1"], "MLU370-X4", 23308, [41.0, 41.0], [27.0, 27.0]),
    ("cnmon-mlu370-x8-v5.10.13.txt", ["0", "1"], "MLU370-X8", 23374, [32.0, 39.0], [106.0, 106.0]),
]


@pytest.mark.parametrize(("file", "devices", "name", "total", "temperatures", "powers"), CNMON_SAMPLES)
def test_cnmon_samples(
    file: str, devices: list[str], name: str, total: int, temperatures: list[float], powers: list[float]
) -> None:
    readings = parse_cnmon(sample(file))
    assert [r.device for r in readings] == devices
    assert {(r.vendor, r.name) for r in readings} == {("cambricon", name)}
    assert [r.temperature_c for r in readings] == temperatures
    assert [r.power_w for r in readings] == powers
    assert {(r.utilization, r.memory_used_bytes, r.memory_total_bytes) for r in readings} == {(0.0, 0.0, total * MIB)}
    assert {(r.healthy, r.ecc_corrected, r.ecc_uncorrected) for r in readings} == {(None, None, None)}


def test_cnmon_busy_card() -> None:
    """The published samples are idle cards: the same table with a card at work
    (values edited here) reads utilisation and memory in use."""
    text = sample("cnmon-mlu370-x8-v5.10.13.txt")
    text = text.replace("| 0%                N/A |", "| 57%               N/A |", 1)
    text = text.replace("|     0 MiB/ 23374 MiB |", "| 12345 MiB/ 23374 MiB |", 1)
    first, second = parse_cnmon(text)
    assert (first.utilization, first.memory_used_bytes) == (0.57, 12345 * MIB)
    assert (second.utilization, second.memory_used_bytes) == (0.0, 0.0)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (sample("cnmon-truncated.txt"), "without its second row"),
        (sample("garbage.txt"), "no cnmon device table"),
        ("", "empty output"),
        (sample("npu-smi-910b2c.txt"), "no cnmon device table"),
        (sample("cnmon-mlu370-x8-v5.10.13.txt").replace("32C", "warm"), "Temp"),
    ],
)
def test_cnmon_malformed(text: str, error: str) -> None:
    with pytest.raises(DeviceReadError, match=error) as caught:
        parse_cnmon(text)
    assert caught.value.monitor == "cambricon"


def test_cnmon_header_without_cards_is_none_visible() -> None:
    header = "\n".join(sample("cnmon-mlu370-x8-v5.10.13.txt").splitlines()[:6])
    assert parse_cnmon(header) == []


# ---------------------------------------------------------------- the tools run as programs


def _fake_tool(folder: Path, name: str, output: str, status: int = 0) -> None:
    (folder / f"{name}.out").write_text(output, encoding="utf-8")
    script = folder / name
    script.write_text(f'#!/bin/sh\n{CAT} "{folder / name}.out"\nexit {status}\n', encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


@pytest.mark.skipif(sys.platform == "win32", reason="shell scripts stand in for the tools")
def test_monitors_run_the_tools_from_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_tool(tmp_path, "npu-smi", sample("npu-smi-310p3.txt"))
    _fake_tool(tmp_path, "cnmon", sample("cnmon-mlu370-x8-v5.10.13.txt"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert [r.name for r in AscendMonitor().read()] == ["310P3"]
    assert [r.device for r in CambriconMonitor().read()] == ["0", "1"]


@pytest.mark.skipif(sys.platform == "win32", reason="shell scripts stand in for the tools")
def test_a_failing_tool_is_a_read_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_tool(tmp_path, "npu-smi", "dcmi module initialize failed. ret is -8005\n", status=1)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(DeviceReadError, match=r"exited 1: dcmi module initialize failed"):
        AscendMonitor().read()


def test_injected_runner() -> None:
    monitor = CambriconMonitor(run=lambda: sample("cnmon-mlu370-x4-v4.20.11.txt"))
    assert isinstance(monitor, DeviceMonitor)
    assert len(monitor.read()) == 3
    monitor.close()


# ---------------------------------------------------------------- NVML


class _Memory:
    def __init__(self, used: int, total: int) -> None:
        self.used, self.total, self.free = used, total, total - used


class _Rates:
    def __init__(self, gpu: int) -> None:
        self.gpu, self.memory = gpu, 0


class _Event:
    def __init__(self, device: int, xid: int) -> None:
        self.device, self.eventType, self.eventData = device, pynvml.nvmlEventTypeXidCriticalError, xid


class FakeNvml:
    """The part of pynvml NvmlMonitor uses: GPU 0 works but reports no power
    (not supported); GPU 1 is lost.  ``pending[i]`` holds GPU i's queued Xids."""

    NVMLError = pynvml.NVMLError
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    NVML_MEMORY_ERROR_TYPE_CORRECTED = pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    NVML_VOLATILE_ECC = pynvml.NVML_VOLATILE_ECC
    NVML_ERROR_NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
    NVML_ERROR_NO_PERMISSION = pynvml.NVML_ERROR_NO_PERMISSION
    NVML_ERROR_FUNCTION_NOT_FOUND = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
    NVML_ERROR_TIMEOUT = pynvml.NVML_ERROR_TIMEOUT
    nvmlEventTypeXidCriticalError = pynvml.nvmlEventTypeXidCriticalError

    def __init__(self, init_error: Exception | None = None) -> None:
        self.init_error = init_error
        self.pending: dict[int, list[_Event]] = {0: [_Event(0, 79), _Event(0, 48)], 1: []}
        self.registered: dict[object, int] = {}
        self.freed: list[object] = []
        self.shutdowns = 0

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise self.init_error

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def _working(self, handle: int) -> None:
        if handle == 1:
            raise pynvml.NVMLError_GpuIsLost()

    def nvmlDeviceGetName(self, handle: int) -> str:
        self._working(handle)
        return "NVIDIA H200"

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> _Rates:
        self._working(handle)
        return _Rates(42)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> _Memory:
        self._working(handle)
        return _Memory(used=3 * 2**30, total=141 * 2**30)

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        self._working(handle)
        return 38

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        self._working(handle)
        raise pynvml.NVMLError_NotSupported()

    def nvmlDeviceGetTotalEccErrors(self, handle: int, kind: int, counter: int) -> int:
        assert counter == pynvml.NVML_VOLATILE_ECC
        self._working(handle)
        return 5 if kind == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED else 0

    def nvmlEventSetCreate(self) -> object:
        return object()

    def nvmlDeviceRegisterEvents(self, handle: int, kinds: int, event_set: object) -> None:
        assert kinds == pynvml.nvmlEventTypeXidCriticalError
        self._working(handle)
        self.registered[event_set] = handle

    def nvmlEventSetWait_v2(self, event_set: object, timeout_ms: int) -> _Event:
        assert timeout_ms == 0, "a read must not wait for events"
        queue = self.pending[self.registered[event_set]]
        if not queue:
            raise pynvml.NVMLError_Timeout()
        return queue.pop(0)

    def nvmlEventSetFree(self, event_set: object) -> None:
        self.freed.append(event_set)


def test_nvml_two_gpus_one_lost() -> None:
    fake = FakeNvml()
    monitor = NvmlMonitor(nvml=fake)
    assert isinstance(monitor, DeviceMonitor)
    working, lost = monitor.read()
    assert working == DeviceReading(
        vendor="nvidia",
        device="0",
        name="NVIDIA H200",
        utilization=0.42,
        memory_used_bytes=3 * 2**30,
        memory_total_bytes=141 * 2**30,
        temperature_c=38.0,
        power_w=None,  # NotSupported: left out, the device is not faulty for it
        ecc_corrected=5.0,
        ecc_uncorrected=0.0,
        xid_errors=2.0,
        healthy=True,
    )
    assert lost == DeviceReading(vendor="nvidia", device="1", name="", healthy=False)


def test_nvml_xid_events_are_drained_and_counted_by_the_monitor() -> None:
    fake = FakeNvml()
    monitor = NvmlMonitor(nvml=fake)
    assert monitor.read()[0].xid_errors == 2.0
    assert fake.pending[0] == []
    assert monitor.read()[0].xid_errors == 2.0  # nothing new: the running total stays
    fake.pending[0].append(_Event(0, 31))
    assert monitor.read()[0].xid_errors == 3.0
    assert len(fake.registered) == 1  # one event set for GPU 0, made once; GPU 1's registration failed


def test_nvml_close_frees_and_shuts_down_once() -> None:
    fake = FakeNvml()
    monitor = NvmlMonitor(nvml=fake)
    monitor.read()
    monitor.close()
    monitor.close()
    assert fake.shutdowns == 1
    assert set(fake.registered) <= set(fake.freed)  # GPU 0's set; GPU 1's was freed when registering failed
    assert len(fake.freed) == 2
    with pytest.raises(DeviceReadError, match="closed"):
        monitor.read()


@pytest.mark.parametrize("error", [pynvml.NVMLError_DriverNotLoaded(), pynvml.NVMLError_LibraryNotFound()])
def test_nvml_init_failure(error: Exception) -> None:
    with pytest.raises(DeviceReadError, match="NVML did not initialise") as caught:
        NvmlMonitor(nvml=FakeNvml(init_error=error))
    assert caught.value.monitor == "nvidia"


def _nvidia_driver() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


@pytest.mark.gpu
@pytest.mark.skipif(not _nvidia_driver(), reason="no NVIDIA driver")
def test_nvml_real_gpus() -> None:
    monitor = NvmlMonitor()
    try:
        readings = monitor.read()
    finally:
        monitor.close()
    assert readings, "NVML initialised but counts no GPU"
    for reading in readings:
        assert reading.name and reading.healthy is True
        assert reading.utilization is not None and 0.0 <= reading.utilization <= 1.0
        assert reading.memory_total_bytes is not None and reading.memory_total_bytes > 2**30
        assert reading.memory_used_bytes is not None and 0 <= reading.memory_used_bytes <= reading.memory_total_bytes
        assert reading.temperature_c is None or 0.0 < reading.temperature_c < 120.0
        assert reading.power_w is None or 0.0 < reading.power_w < 2000.0


# ---------------------------------------------------------------- host


def test_host_monitor_reads_this_process() -> None:
    (reading,) = HostMonitor().read()
    assert (reading.vendor, reading.device) == ("host", "cpu")
    assert reading.name
    assert reading.utilization is not None and reading.utilization >= 0.0
    assert reading.memory_total_bytes is not None and reading.memory_used_bytes is not None
    assert reading.memory_total_bytes > reading.memory_used_bytes > 0
    assert reading.healthy is None


def _proc_entry(proc: Path, pid: int, ppid: int, comm: str, rss_kib: int | None) -> None:
    folder = proc / str(pid)
    folder.mkdir()
    (folder / "stat").write_text(f"{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194560\n")
    rss = "" if rss_kib is None else f"VmRSS:\t{rss_kib:>8} kB\n"
    (folder / "status").write_text(f"Name:\t{comm}\nPid:\t{pid}\nPPid:\t{ppid}\n{rss}Threads:\t1\n")


def test_host_monitor_adds_the_direct_children(tmp_path: Path) -> None:
    (tmp_path / "meminfo").write_text("MemTotal:       16318480 kB\nMemFree:         1010100 kB\n")
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nmodel name\t: AMD EPYC 9654 96-Core Processor\n")
    _proc_entry(tmp_path, 100, 1, "celery", 100_000)
    _proc_entry(tmp_path, 101, 100, "celery: (worker) 1", 40_000)  # comm with spaces and parentheses
    _proc_entry(tmp_path, 102, 100, "kworker/0:1", None)  # no resident set
    _proc_entry(tmp_path, 103, 101, "grandchild", 7_000)  # not a direct child
    _proc_entry(tmp_path, 104, 1, "other", 9_000)
    (tmp_path / "self").mkdir()
    (reading,) = HostMonitor(pid=100, proc=tmp_path).read()
    assert reading.name == "AMD EPYC 9654 96-Core Processor"
    assert reading.memory_used_bytes == 140_000 * 1024
    assert reading.memory_total_bytes == 16318480 * 1024


def test_host_monitor_process_gone(tmp_path: Path) -> None:
    (tmp_path / "meminfo").write_text("MemTotal: 1000 kB\n")
    with pytest.raises(DeviceReadError, match="process 4242 not found"):
        HostMonitor(pid=4242, proc=tmp_path).read()


# ---------------------------------------------------------------- open_monitor


def _unavailable(name: str):
    def factory() -> DeviceMonitor:
        raise DeviceReadError(name, "not on this test machine")

    return factory


@pytest.fixture
def no_vendor_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """No npu-smi / cnmon on PATH, and NVML that does not initialise."""
    monkeypatch.setenv("PATH", str(tmp_path))
    return {**monitor_factories(), "nvidia": _unavailable("nvidia")}


def test_auto_with_nothing_available_is_the_host(no_vendor_tools: dict, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="faceweave.monitoring"):
        monitor = open_monitor("auto", factories=no_vendor_tools)
    assert isinstance(monitor, HostMonitor)
    assert caplog.records == []  # "auto" falling through is not a warning


def test_auto_prefers_nvidia_then_ascend(
    no_vendor_tools: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_tool(tmp_path, "npu-smi", sample("npu-smi-310p3.txt"))
    _fake_tool(tmp_path, "cnmon", sample("cnmon-mlu370-x8-v5.10.13.txt"))
    assert isinstance(open_monitor(factories=no_vendor_tools), AscendMonitor)
    with_gpu = {**no_vendor_tools, "nvidia": lambda: NvmlMonitor(nvml=FakeNvml())}
    assert isinstance(open_monitor(factories=with_gpu), NvmlMonitor)
    (tmp_path / "npu-smi").unlink()
    assert isinstance(open_monitor(factories=no_vendor_tools), CambriconMonitor)


@pytest.mark.parametrize("kind", ["ascend", "cambricon", "nvidia"])
def test_asked_vendor_missing_falls_back_to_host_with_one_warning(
    kind: str, no_vendor_tools: dict, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="faceweave.monitoring"):
        monitor = open_monitor(kind, factories=no_vendor_tools)
    assert isinstance(monitor, HostMonitor)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert kind in warnings[0].getMessage() and "host" in warnings[0].getMessage()


def test_asked_ascend_missing_with_the_default_factories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="faceweave.monitoring"):
        assert isinstance(open_monitor("ascend"), HostMonitor)
    assert ["npu-smi not found on PATH" in r.getMessage() for r in caplog.records] == [True]


def test_unknown_kind() -> None:
    with pytest.raises(ValueError, match="'rocm'; one of auto, nvidia, ascend, cambricon, host"):
        open_monitor("rocm")


def test_factories_are_read_only() -> None:
    factories = monitor_factories()
    assert list(factories) == ["nvidia", "ascend", "cambricon", "host"]
    with pytest.raises(TypeError):
        factories["rocm"] = _unavailable("rocm")  # type: ignore[index]


# ---------------------------------------------------------------- the collector


class FakeMonitor:
    vendor = "ascend"

    def __init__(self, readings: list[DeviceReading] | None = None, error: Exception | None = None) -> None:
        self.readings = readings or []
        self.error = error
        self.reads = 0

    def read(self) -> list[DeviceReading]:
        self.reads += 1
        if self.error is not None:
            raise self.error
        return list(self.readings)

    def close(self) -> None:
        pass


FULL = DeviceReading(
    vendor="ascend",
    device="0",
    name="910B3",
    utilization=0.25,
    memory_used_bytes=3318 * MIB,
    memory_total_bytes=65536 * MIB,
    temperature_c=43.0,
    power_w=101.8,
    ecc_corrected=2.0,
    ecc_uncorrected=0.0,
    xid_errors=1.0,
    healthy=True,
)
SPARSE = DeviceReading(vendor="ascend", device="1", name="910B3", memory_total_bytes=65536 * MIB, healthy=False)


def _scrape(collector: DeviceCollector) -> dict[str, dict[tuple, float]]:
    """sample name -> {sorted label items: value}"""
    registry = CollectorRegistry()
    registry.register(collector)
    samples: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            samples.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return samples


def _labels(device: str, **extra: str) -> tuple:
    return tuple(sorted({"worker": "w1", "vendor": "ascend", "device": device, **extra}.items()))


def test_collector_exports_the_documented_series() -> None:
    samples = _scrape(DeviceCollector(FakeMonitor([FULL, SPARSE]), worker="w1"))
    assert samples["faceweave_device_info"] == {
        _labels("0", name="910B3"): 1.0,
        _labels("1", name="910B3"): 1.0,
    }
    assert samples["faceweave_device_utilization_ratio"] == {_labels("0"): 0.25}
    assert samples["faceweave_device_memory_used_bytes"] == {_labels("0"): 3318 * MIB}
    assert samples["faceweave_device_memory_total_bytes"] == {_labels("0"): 65536 * MIB, _labels("1"): 65536 * MIB}
    assert samples["faceweave_device_temperature_celsius"] == {_labels("0"): 43.0}
    assert samples["faceweave_device_power_watts"] == {_labels("0"): 101.8}
    assert samples["faceweave_device_ecc_errors_total"] == {
        _labels("0", type="corrected"): 2.0,
        _labels("0", type="uncorrected"): 0.0,
    }
    assert samples["faceweave_device_xid_errors_total"] == {_labels("0"): 1.0}
    assert samples["faceweave_device_healthy"] == {_labels("0"): 1.0, _labels("1"): 0.0}
    assert samples["faceweave_devices_visible"] == {(("vendor", "ascend"), ("worker", "w1")): 2.0}
    assert samples["faceweave_device_scrape_errors_total"] == {(("monitor", "ascend"), ("worker", "w1")): 0.0}


def test_collector_names_are_the_metrics_contract() -> None:
    """Every name of docs/METRICS.md's "Devices" section is exported, and no other."""
    section = METRICS_DOC.read_text(encoding="utf-8").split("## Devices", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`(faceweave_devices?_\w+)`", section))
    exported = set(_scrape(DeviceCollector(FakeMonitor([FULL]), worker="w1")))
    assert exported == documented


def test_registering_does_not_read() -> None:
    monitor = FakeMonitor([FULL])
    collector = DeviceCollector(monitor, worker="w1")
    CollectorRegistry().register(collector)
    assert collector.describe() == []
    assert monitor.reads == 0


def test_collector_survives_a_failing_monitor(caplog: pytest.LogCaptureFixture) -> None:
    monitor = FakeMonitor(error=DeviceReadError("ascend", "npu-smi exited 1: dcmi module initialize failed"))
    collector = DeviceCollector(monitor, worker="w1")
    registry = CollectorRegistry()
    registry.register(collector)
    errors = []
    with caplog.at_level(logging.WARNING, logger="faceweave.monitoring"):
        for _ in range(3):
            samples = {
                s.name: s.value
                for family in text_string_to_metric_families(generate_latest(registry).decode())
                for s in family.samples
            }
            errors.append(samples["faceweave_device_scrape_errors_total"])
            assert samples["faceweave_devices_visible"] == 0.0
            assert "faceweave_device_info" not in samples
    assert errors == [1.0, 2.0, 3.0]
    assert len(caplog.records) == 1
    assert "dcmi module initialize failed" in caplog.records[0].getMessage()


def test_collector_logs_each_distinct_failure_once_and_the_recovery(caplog: pytest.LogCaptureFixture) -> None:
    monitor = FakeMonitor([FULL], error=RuntimeError("first"))
    collector = DeviceCollector(monitor, worker="w1")
    with caplog.at_level(logging.INFO, logger="faceweave.monitoring"):
        list(collector.collect())
        list(collector.collect())
        monitor.error = OSError("second")
        list(collector.collect())
        monitor.error = None
        list(collector.collect())
        monitor.error = RuntimeError("first")
        list(collector.collect())
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 4
    assert "RuntimeError: first" in messages[0] and "OSError: second" in messages[1]
    assert "back" in messages[2] and "RuntimeError: first" in messages[3]


def test_collector_scrapes_one_at_a_time() -> None:
    inside = threading.Semaphore(1)

    class Slow(FakeMonitor):
        def read(self) -> list[DeviceReading]:
            assert inside.acquire(blocking=False), "two scrapes read the monitor at once"
            try:
                time.sleep(0.01)
                return super().read()
            finally:
                inside.release()

    monitor = Slow([FULL])
    collector = DeviceCollector(monitor, worker="w1")
    threads = [threading.Thread(target=lambda: list(collector.collect())) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert monitor.reads == 6
    assert _scrape(collector)["faceweave_device_scrape_errors_total"] == {
        (("monitor", "ascend"), ("worker", "w1")): 0.0
    }


def test_collector_with_the_host_monitor() -> None:
    samples = _scrape(DeviceCollector(HostMonitor(pid=os.getpid()), worker="w1"))
    host = tuple(sorted({"worker": "w1", "vendor": "host", "device": "cpu"}.items()))
    assert samples["faceweave_device_memory_used_bytes"][host] > 0
    assert "faceweave_device_temperature_celsius" not in samples
    assert samples["faceweave_devices_visible"] == {(("vendor", "host"), ("worker", "w1")): 1.0}
