"""File answers with HTTP ranges: Starlette's :class:`FileResponse` (one range
or several, ``If-Range``, ``HEAD``, ``ETag`` and ``Last-Modified``)
with faceweave's refusals.  A ``Range`` it cannot use (malformed, not ASCII,
over :data:`MAX_RANGE_CHARS`, another unit, or an invalid range such as
``bytes=9-3``) is ignored and the whole file answered, as RFC 9110 allows; a
range that starts past the end is a JSON 416 with ``Content-Range: bytes */<size>``.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.responses import FileResponse, MalformedRangeHeader, RangeNotSatisfiable, Response

from faceweave.errors import RangeNotSatisfiableError

#: a longer ``Range`` header is ignored (Starlette serves at most 100 ranges anyway)
MAX_RANGE_CHARS = 1000


def byte_ranges(header: str | None, size: int) -> list[tuple[int, int]] | None:
    """The inclusive byte ranges ``[(first, last), ...]`` (sorted, overlaps
    merged) that ``header`` asks of a file of ``size`` bytes, or ``None`` for
    the whole file.

    >>> byte_ranges("bytes=0-99", 1000), byte_ranges("bytes=-100", 1000), byte_ranges("bytes=0-1,5-9", 1000)
    ([(0, 99)], [(900, 999)], [(0, 1), (5, 9)])

    Raises:
        RangeNotSatisfiableError: a range starts at or past the end of the file.
    """
    if not header:
        return None
    try:
        ranges = RangedFile._parse_range_header(header, size)
    except RangeNotSatisfiable:
        raise RangeNotSatisfiableError(f"range {header.strip()[:100]!r} is outside the file of {size} bytes") from None
    return [(first, end - 1) for first, end in ranges] or None


class RangedFile(FileResponse):
    """A file answer (give ``stat_result``) whose range refusals are faceweave's."""

    @classmethod
    def _parse_range_header(cls, http_range: str, file_size: int) -> list[tuple[int, int]]:
        """Starlette's parser (half-open ranges), with what it refuses as malformed ignored."""
        if len(http_range) > MAX_RANGE_CHARS or not http_range.isascii():
            return []
        try:
            return super()._parse_range_header(http_range, file_size)
        except MalformedRangeHeader:
            return []

    async def __call__(self, scope, receive, send) -> None:
        refusal = self._refusal(Headers(scope=scope))
        if refusal is not None:
            await refusal(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)

    def _refusal(self, headers: Headers) -> Response | None:
        """A JSON 416 for a range outside the file, where the range applies
        (a stale ``If-Range`` asks for the whole file instead)."""
        from faceweave.service.errors import error_response

        wanted, if_range = headers.get("range"), headers.get("if-range")
        if wanted is None or self.stat_result is None:
            return None
        if if_range is not None and if_range not in (self.headers.get("etag"), self.headers.get("last-modified")):
            return None
        size = self.stat_result.st_size
        try:
            byte_ranges(wanted, size)
        except RangeNotSatisfiableError as exc:
            return error_response(416, exc.code, str(exc), headers={"Content-Range": f"bytes */{size}"})
        return None
