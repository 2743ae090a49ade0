"""Cambricon MLUs, read from the table plain ``cnmon`` prints.

Each card takes two rows::

    | Card  VF  Name       Firmware |               Bus-Id | Util        Ecc-Error |
    | Fan   Temp      Pwr:Usage/Cap |         Memory-Usage | SR-IOV   Compute-Mode |
    |===============================+======================+=======================|
    | 0     /   MLU370-X8    v1.1.6 |         0000:39:00.0 | 0%                N/A |
    |  0%   32C        106 W/ 250 W |     0 MiB/ 23374 MiB | N/A           Default |

CNMON v4 prints ``Inited Driver`` where v5 prints ``Bus-Id``, and
``vMemory-Usage`` where v5 prints ``SR-IOV Compute-Mode``; neither is read.
The process table below is not read either.

Conventions: ``device`` is the card number (``"card:vf"`` for a virtual
function); memory is ``Memory-Usage`` in MiB (2**20 bytes).  ``cnmon`` has no
health column and its ``Ecc-Error`` count does not say corrected or
uncorrected, so ``healthy`` and the ECC fields stay ``None``.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator
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

VENDOR = "cambricon"

_POWER = re.compile(r"(\S+?)\s*W\s*/")
_MEMORY = re.compile(r"(\S+?)\s*MiB\s*/\s*(\S+?)\s*MiB")


class CambriconMonitor:
    """Reads plain ``cnmon`` at each :meth:`read`.

    ``run``: a callable returning the tool's stdout (tests); by default
    ``cnmon`` is run from ``PATH`` with a 10 s timeout.

    Raises:
        DeviceReadError: ``cnmon`` is not on ``PATH`` (only when ``run`` is not given).
    """

    vendor = VENDOR

    def __init__(self, run: Callable[[], str] | None = None) -> None:
        if run is None:
            tool = shutil.which("cnmon")
            if tool is None:
                raise DeviceReadError(VENDOR, "cnmon not found on PATH")
            run = partial(run_tool, VENDOR, [tool])
        self._run = run

    def read(self) -> list[DeviceReading]:
        """One reading per card; raises :class:`DeviceReadError` as :func:`parse_cnmon` does."""
        return parse_cnmon(self._run())

    def close(self) -> None:
        """Nothing to free: each read runs the tool anew."""


def parse_cnmon(text: str) -> list[DeviceReading]:
    """The cards in the output of plain ``cnmon``, in the order printed.

    A table with its header and no card rows gives ``[]`` (none visible).

    Raises:
        DeviceReadError: no cnmon table in ``text``, a card row without its
            second row, or a value that is not a number where one belongs.
    """
    rows = [cells for cells in map(table_cells, text.splitlines()) if cells is not None]
    start = next(
        (i + 2 for i, cells in enumerate(rows[:-1]) if cells[0].split()[:2] == ["Card", "VF"]),
        None,
    )
    if start is None or not rows[start - 1][0].startswith("Fan"):
        raise DeviceReadError(VENDOR, f"no cnmon device table in the output ({first_line(text)})")
    return [_reading(first, second) for first, second in _row_pairs(rows[start:])]


def _row_pairs(rows: list[list[str]]) -> Iterator[tuple[list[str], list[str]]]:
    """The (card row, usage row) pairs up to the process table."""
    index = 0
    while index < len(rows) and not rows[index][0].startswith("Processes"):
        first = rows[index]
        if index + 1 >= len(rows) or rows[index + 1][0].startswith("Processes"):
            raise DeviceReadError(VENDOR, f"card row without its second row (truncated output?): {first}")
        second = rows[index + 1]
        if len(first) != 3 or len(second) != 3:
            raise DeviceReadError(VENDOR, f"card rows do not have three cells: {first}, {second}")
        yield first, second
        index += 2


def _reading(first: list[str], second: list[str]) -> DeviceReading:
    card = first[0].split()
    fan_temp = second[0].split()
    power = _POWER.search(second[0])
    memory = _MEMORY.fullmatch(second[1])
    util = first[2].split()
    if len(card) < 3 or not card[0].isdigit() or len(fan_temp) < 2 or power is None or memory is None or not util:
        raise DeviceReadError(VENDOR, f"card rows do not parse: {first}, {second}")
    used = number(VENDOR, memory.group(1), what="Memory-Usage used")
    total = number(VENDOR, memory.group(2), what="Memory-Usage total")
    utilization = number(VENDOR, util[0], what="Util", suffix="%")
    return DeviceReading(
        vendor=VENDOR,
        device=card[0] if card[1] == "/" else f"{card[0]}:{card[1]}",
        name=card[2],
        utilization=None if utilization is None else utilization / 100.0,
        memory_used_bytes=None if used is None else used * MIB,
        memory_total_bytes=None if total is None else total * MIB,
        temperature_c=number(VENDOR, fan_temp[1], what="Temp", suffix="C"),
        power_w=number(VENDOR, power.group(1), what="Pwr:Usage"),
    )
