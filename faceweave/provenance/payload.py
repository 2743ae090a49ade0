"""The 64-bit message carried by faceweave's invisible watermark.

Layout (most significant bit first, 64 bits in all)::

    bits  0..15  tool id   (16 bits; faceweave is 0xFACE)
    bits 16..23  version   ( 8 bits; the watermark/payload format version)
    bits 24..47  run id    (24 bits; names the job or run in the audit log)
    bits 48..63  CRC-16    (CRC-16/CCITT-FALSE over the first 48 bits)

The CRC is what turns "some bits were read" into "a mark was found": random
bits pass it with probability 2**-16, and the detector also demands a
significant synchronisation peak before it reads bits at all.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import numpy as np

from faceweave.errors import InvalidOptionError

#: tool id written by faceweave
FACEWEAVE_TOOL_ID = 0xFACE
#: payload format version written by this code
PAYLOAD_VERSION = 1
PAYLOAD_BITS = 64
_DATA_BITS = 48
_RUN_ID_BITS = 24


def crc16(data: bytes) -> int:
    """CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF) of ``data``; pure function."""
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


@dataclass(frozen=True)
class Payload:
    """What a mark says: which tool, which format version, which run.

    ``tool_id`` in ``[0, 65535]``, ``version`` in ``[0, 255]``, ``run_id`` in
    ``[0, 2**24 - 1]`` (use :meth:`new_run_id` for a random one).
    """

    run_id: int
    tool_id: int = FACEWEAVE_TOOL_ID
    version: int = PAYLOAD_VERSION

    def __post_init__(self) -> None:
        for name, value, bits in (
            ("tool_id", self.tool_id, 16),
            ("version", self.version, 8),
            ("run_id", self.run_id, _RUN_ID_BITS),
        ):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not 0 <= int(value) < (1 << bits):
                raise InvalidOptionError(f"payload {name} must be an integer in [0, {(1 << bits) - 1}], got {value!r}")

    @staticmethod
    def new_run_id() -> int:
        """A random 24-bit run id."""
        return secrets.randbelow(1 << _RUN_ID_BITS)

    def _data(self) -> int:
        return (int(self.tool_id) << 32) | (int(self.version) << 24) | int(self.run_id)

    def to_bits(self) -> np.ndarray:
        """``(64,)`` uint8 array of 0/1, most significant bit first, CRC last."""
        data = self._data()
        word = (data << 16) | crc16(data.to_bytes(6, "big"))
        return np.array([(word >> (PAYLOAD_BITS - 1 - i)) & 1 for i in range(PAYLOAD_BITS)], dtype=np.uint8)

    @classmethod
    def from_bits(cls, bits: np.ndarray) -> Payload | None:
        """The payload whose :meth:`to_bits` is ``bits`` (64 values, 0/1 or bool), or ``None`` when the CRC fails."""
        arr = np.asarray(bits).reshape(-1)
        if arr.size != PAYLOAD_BITS:
            raise InvalidOptionError(f"payload needs {PAYLOAD_BITS} bits, got {arr.size}")
        word = 0
        for bit in arr:
            word = (word << 1) | (1 if bit else 0)
        data, crc = word >> 16, word & 0xFFFF
        if crc16(data.to_bytes(6, "big")) != crc:
            return None
        return cls(run_id=data & 0xFFFFFF, tool_id=data >> 32, version=(data >> 24) & 0xFF)

    def __str__(self) -> str:
        return f"tool=0x{int(self.tool_id):04X} version={int(self.version)} run={int(self.run_id):06x}"
