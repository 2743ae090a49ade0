"""HTTP ``Range`` requests on a file: parsing (pure) and a streaming body."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from faceweave.errors import RangeNotSatisfiableError

#: ASCII digits, at most 18 (int() refuses thousands of digits); a longer number is a malformed range
_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d{0,18})\s*-\s*(\d{0,18})\s*$", re.IGNORECASE | re.ASCII)
CHUNK = 256 * 1024


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The inclusive byte range ``(first, last)`` that ``header`` asks of a
    file of ``size`` bytes, or ``None`` for the whole file (no header, or a
    form this server does not serve partially, such as several ranges).

    >>> parse_range("bytes=0-99", 1000), parse_range("bytes=900-", 1000), parse_range("bytes=-100", 1000)
    ((0, 99), (900, 999), (900, 999))

    Raises:
        RangeNotSatisfiableError: the range starts at or past the end, or is empty.
    """
    if not header:
        return None
    match = _RANGE.match(header)
    if match is None:
        return None  # malformed or multi-range: RFC 9110 allows ignoring it
    first_text, last_text = match.groups()
    if not first_text and not last_text:
        return None
    if not first_text:  # suffix: the last N bytes
        length = int(last_text)
        if length == 0 or size == 0:
            raise RangeNotSatisfiableError(f"range {header.strip()!r} is empty for a file of {size} bytes")
        return max(0, size - length), size - 1
    first = int(first_text)
    last = int(last_text) if last_text else size - 1
    if first >= size or last < first:
        raise RangeNotSatisfiableError(f"range {header.strip()!r} is outside the file of {size} bytes")
    return first, min(last, size - 1)


def iter_file(path: Path, first: int, last: int, chunk: int = CHUNK) -> Iterator[bytes]:
    """The bytes ``first..last`` (inclusive) of ``path``, in chunks."""
    remaining = last - first + 1
    with open(path, "rb") as fh:
        fh.seek(first)
        while remaining > 0:
            data = fh.read(min(chunk, remaining))
            if not data:
                break
            remaining -= len(data)
            yield data
