"""The host fallback: the CPU's load and the worker's resident memory.

One reading, vendor ``host``, device ``cpu``:

* ``utilization``: the 1-minute load average over the CPU count (not clipped
  above: a value over 1 means runnable tasks wait for a CPU);
* ``memory_used_bytes``: resident memory (``VmRSS``) of the process ``pid``
  and of its direct children (Celery's prefork pool processes are direct
  children of the worker), read from ``/proc``;
* ``memory_total_bytes``: ``MemTotal`` of ``/proc/meminfo``.

Without ``/proc`` (not Linux) the memory fields are ``None``.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

from faceweave.monitoring.devices import DeviceReadError, DeviceReading

VENDOR = "host"
KIB = 1024


class HostMonitor:
    """Reads the host each time :meth:`read` is called.

    ``pid``: the process whose memory (with its children's) is reported;
    default: this process.  ``proc``: the procfs root (tests).
    """

    vendor = VENDOR

    def __init__(self, pid: int | None = None, *, proc: Path = Path("/proc")) -> None:
        self.pid = os.getpid() if pid is None else pid
        self._proc = proc
        self.name = _cpu_name(proc)

    def read(self) -> list[DeviceReading]:
        """The host's one reading.

        Raises:
            DeviceReadError: the process ``pid`` is gone, or ``/proc`` does not parse.
        """
        used = total = None
        if self._proc.is_dir():
            used = float(self._resident_bytes())
            total = float(_meminfo_total(self._proc))
        return [
            DeviceReading(
                vendor=VENDOR,
                device="cpu",
                name=self.name,
                utilization=_load_ratio(),
                memory_used_bytes=used,
                memory_total_bytes=total,
            )
        ]

    def close(self) -> None:
        """Nothing to free."""

    def _resident_bytes(self) -> int:
        own = _vm_rss(self._proc / str(self.pid) / "status")
        if own is None:
            raise DeviceReadError(VENDOR, f"process {self.pid} not found in {self._proc}")
        children = (_vm_rss(self._proc / str(child) / "status") for child in _children(self._proc, self.pid))
        return own + sum(rss for rss in children if rss is not None)


def _load_ratio() -> float | None:
    """1-minute load average over the CPU count; ``None`` where the system has no load average."""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):
        return None
    return max(0.0, load / (os.cpu_count() or 1))


def _cpu_name(proc: Path) -> str:
    try:
        with open(proc / "cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _vm_rss(status: Path) -> int | None:
    """``VmRSS`` in bytes; ``None`` when the process is gone (or, a kernel
    thread, has no resident set)."""
    try:
        text = status.read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            fields = line.split()
            if len(fields) < 2 or not fields[1].isdigit():
                raise DeviceReadError(VENDOR, f"{status}: VmRSS does not parse: {line!r}")
            return int(fields[1]) * KIB
    return None


def _children(proc: Path, pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (``/proc/<n>/stat``'s 4th field)."""
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue  # gone between listing and reading, or not ours to read
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        after = stat.rpartition(")")[2].split()
        if len(after) >= 2 and after[1] == str(pid):
            found.append(int(entry.name))
    return found


def _meminfo_total(proc: Path) -> int:
    try:
        text = (proc / "meminfo").read_text(encoding="utf-8")
    except OSError as exc:
        raise DeviceReadError(VENDOR, f"cannot read {proc / 'meminfo'}: {exc}") from exc
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                return int(fields[1]) * KIB
    raise DeviceReadError(VENDOR, f"no MemTotal in {proc / 'meminfo'}")
