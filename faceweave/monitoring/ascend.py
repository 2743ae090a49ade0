"""Huawei Ascend NPUs, read from the table ``npu-smi info`` prints.

Each chip takes two rows of that table::

    | NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
    | Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
    +===========================+===============+====================================================+
    | 0     910B3               | OK            | 101.8       43                0    / 0             |
    | 0                         | 0000:C1:00.0  | 0           0    / 0          3318 / 65536         |

The chips differ in what the second header row names: Atlas 300I / 310 and
310P print ``Chip Device`` and only ``Memory-Usage(MB)``; 910 and 910B print
``Chip`` and both ``Memory-Usage(MB)`` (the control CPU's DDR) and
``HBM-Usage(MB)``; 910_93 (A3) prints ``Chip Phy-ID`` and two chips per NPU, the
second with power ``-``.  The process table npu-smi prints below is not read.

Conventions:

* ``device``: the chip's logical id (the ``Device`` or ``Phy-ID`` column) when
  the table has one, else the NPU id (``"npu:chip"`` for a chip other than 0);
* memory: ``HBM-Usage`` when the table has it with a total above 0, else
  ``Memory-Usage``; npu-smi's MB are MiB (2**20 bytes);
* ``healthy``: ``OK`` and ``Warning`` (a minor alarm; the chip still computes)
  are healthy; ``Alarm``, ``Critical`` and any state this parser does not know
  are not, so a new error state is not missed.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

from faceweave.monitoring.devices import (
    MIB,
    DeviceReadError,
    DeviceReading,
    first_line,
    number,
    run_tool,
    table_cells,
)

VENDOR = "ascend"
HEALTHY_STATES = frozenset({"OK", "Warning"})

_USED_TOTAL = re.compile(r"(\d+)\s*/\s*(\d+)")


class AscendMonitor:
    """Reads ``npu-smi info`` at each :meth:`read`.

    ``run``: a callable returning the tool's stdout (tests); by default
    ``npu-smi info`` is run from ``PATH`` with a 10 s timeout.

    Raises:
        DeviceReadError: ``npu-smi`` is not on ``PATH`` (only when ``run`` is not given).
    """

    vendor = VENDOR

    def __init__(self, run: Callable[[], str] | None = None) -> None:
        if run is None:
            tool = shutil.which("npu-smi")
            if tool is None:
                raise DeviceReadError(VENDOR, "npu-smi not found on PATH")
            run = partial(run_tool, VENDOR, [tool, "info"])
        self._run = run

    def read(self) -> list[DeviceReading]:
        """One reading per chip; raises :class:`DeviceReadError` as :func:`parse_npu_smi_info` does."""
        return parse_npu_smi_info(self._run())

    def close(self) -> None:
        """Nothing to free: each read runs the tool anew."""


@dataclass(frozen=True)
class _Layout:
    """What the header rows say the device rows hold."""

    id_column: bool  # "Chip Device" / "Chip Phy-ID": the second row names the chip's own id
    memory_column: bool
    hbm_column: bool


def parse_npu_smi_info(text: str) -> list[DeviceReading]:
    """The chips in the output of ``npu-smi info``, in the order printed.

    A table with its header and no device rows gives ``[]`` (none visible).

    Raises:
        DeviceReadError: no npu-smi table in ``text`` (empty output, an error
            message), a device row without its second row, or a value that
            is not a number where one belongs.
    """
    rows = [cells for cells in map(table_cells, text.splitlines()) if cells is not None]
    found = _find_header(rows)
    if found is None:
        raise DeviceReadError(VENDOR, f"no npu-smi device table in the output ({first_line(text)})")
    layout, start = found
    return [_reading(first, second, layout) for first, second in _row_pairs(rows[start:])]


def _find_header(rows: list[list[str]]) -> tuple[_Layout, int] | None:
    for index, cells in enumerate(rows[:-1]):
        if len(cells) == 3 and cells[0].split() == ["NPU", "Name"] and cells[1] == "Health":
            second = rows[index + 1]
            if len(second) != 3 or not second[0].startswith("Chip"):
                break
            layout = _Layout(
                id_column=len(second[0].split()) > 1,
                memory_column="Memory-Usage(MB)" in second[2],
                hbm_column="HBM-Usage(MB)" in second[2],
            )
            return layout, index + 2
    return None


def _row_pairs(rows: list[list[str]]) -> Iterator[tuple[list[str], list[str]]]:
    """The (name row, chip row) pairs up to the process table."""
    index = 0
    while index < len(rows):
        first = rows[index]
        if first and first[0].split()[:2] == ["NPU", "Chip"]:
            return  # the process table ("NPU Chip | Process id | ...")
        if index + 1 >= len(rows):
            raise DeviceReadError(VENDOR, f"device row without its second row (truncated output?): {first}")
        second = rows[index + 1]
        if len(first) != 3 or len(second) != 3:
            raise DeviceReadError(VENDOR, f"device rows do not have three cells: {first}, {second}")
        yield first, second
        index += 2


def _reading(first: list[str], second: list[str], layout: _Layout) -> DeviceReading:
    npu, _, name = first[0].partition(" ")
    chip_ids = second[0].split()
    power_temp = first[2].split()
    usage = second[2].split(maxsplit=1)
    if not npu.isdigit() or not chip_ids or not chip_ids[0].isdigit() or len(power_temp) < 2 or not usage:
        raise DeviceReadError(VENDOR, f"device rows do not parse: {first}, {second}")
    used, total = _memory(second[2], layout, usage[1] if len(usage) > 1 else "")
    aicore = number(VENDOR, usage[0], what="AICore(%)")
    return DeviceReading(
        vendor=VENDOR,
        device=_device_id(npu, chip_ids, layout),
        name=name.strip(),
        utilization=None if aicore is None else aicore / 100.0,
        memory_used_bytes=used,
        memory_total_bytes=total,
        temperature_c=number(VENDOR, power_temp[1], what="Temp(C)"),
        power_w=number(VENDOR, power_temp[0], what="Power(W)"),
        healthy=first[1] in HEALTHY_STATES,
    )


def _device_id(npu: str, chip_ids: list[str], layout: _Layout) -> str:
    if layout.id_column and len(chip_ids) > 1:
        return chip_ids[1]
    return npu if chip_ids[0] == "0" else f"{npu}:{chip_ids[0]}"


def _memory(cell: str, layout: _Layout, usages: str) -> tuple[float | None, float | None]:
    """(used, total) bytes from the chip row's usage columns."""
    pairs = [(float(used) * MIB, float(total) * MIB) for used, total in _USED_TOTAL.findall(usages)]
    expected = int(layout.memory_column) + int(layout.hbm_column)
    if len(pairs) != expected:
        raise DeviceReadError(VENDOR, f"expected {expected} 'used / total' memory values, found {len(pairs)}: {cell!r}")
    if not pairs:
        return None, None
    if layout.hbm_column and (pairs[-1][1] > 0 or not layout.memory_column):
        return pairs[-1]
    return pairs[0]
