"""Contact sheet: one row per swap pair (source | target | result), each tile
cropped around the face, with the pair's figures on a label strip."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from faceweave.types import BBox

BACKGROUND = (24, 24, 24)
TEXT = (235, 235, 235)
_FONT = cv2.FONT_HERSHEY_SIMPLEX


@dataclass(frozen=True, eq=False)
class SheetRow:
    """Tiles ``(S, S, 3)`` uint8 RGB, all the same size, and text lines."""

    tiles: tuple[np.ndarray, ...]
    lines: tuple[str, ...]


def face_thumbnail(pixels: np.ndarray, bbox: BBox | None, *, scale: float = 2.2, size: int = 256) -> np.ndarray:
    """``(size, size, 3)`` uint8 square crop of the ``(H, W, 3)`` uint8 image
    centred on ``bbox``, side ``scale * max(box width, box height)``, resized;
    parts outside the image are :data:`BACKGROUND`.  Without a box the whole
    image is fitted into the square."""
    h, w = pixels.shape[:2]
    if bbox is None or bbox.width <= 0 or bbox.height <= 0:
        cx, cy, side = w / 2.0, h / 2.0, float(max(w, h))
    else:
        (cx, cy), side = bbox.center, scale * max(bbox.width, bbox.height)
    s = size / side
    matrix = np.array([[s, 0.0, size / 2.0 - s * cx], [0.0, s, size / 2.0 - s * cy]], np.float32)
    interp = cv2.INTER_AREA if s < 1.0 else cv2.INTER_LINEAR
    return cv2.warpAffine(
        np.ascontiguousarray(pixels),
        matrix,
        (size, size),
        flags=interp,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=BACKGROUND,
    )


def blank_tile(size: int, text: str = "") -> np.ndarray:
    """``(size, size, 3)`` uint8 tile of :data:`BACKGROUND` with ``text`` centred."""
    tile = np.full((size, size, 3), BACKGROUND, np.uint8)
    if text:
        (tw, th), _ = cv2.getTextSize(_ascii(text), _FONT, 0.7, 2)
        cv2.putText(tile, _ascii(text), ((size - tw) // 2, (size + th) // 2), _FONT, 0.7, TEXT, 2, cv2.LINE_AA)
    return tile


def _ascii(text: str) -> str:
    return text.encode("ascii", "replace").decode("ascii")


def label_strip(lines: Sequence[str], width: int, *, line_height: int = 20, font_scale: float = 0.48) -> np.ndarray:
    """``(line_height * (len(lines) + 0.5), width, 3)`` uint8 strip with one
    line of (ASCII) text per entry; non-ASCII characters become ``?``."""
    height = int(line_height * (len(lines) + 0.5))
    strip = np.full((height, width, 3), BACKGROUND, np.uint8)
    for i, line in enumerate(lines):
        y = int(line_height * (i + 1))
        cv2.putText(strip, _ascii(line), (6, y), _FONT, font_scale, TEXT, 1, cv2.LINE_AA)
    return strip


def contact_sheet(rows: Sequence[SheetRow], *, header: Sequence[str] = (), gap: int = 4) -> np.ndarray:
    """``(H, W, 3)`` uint8 RGB sheet: an optional header strip, then for each
    row its tiles side by side above its label strip, rows ``gap`` pixels apart.

    Raises ``ValueError`` when there is no row or tiles differ in size."""
    if not rows:
        raise ValueError("contact sheet needs at least one row")
    shape = rows[0].tiles[0].shape
    n_tiles = max(len(r.tiles) for r in rows)
    for r in rows:
        for t in r.tiles:
            if t.shape != shape or t.dtype != np.uint8:
                raise ValueError(f"tiles must all be uint8 {shape}; got {t.dtype} {t.shape}")
    width = n_tiles * shape[1] + (n_tiles - 1) * gap
    blocks: list[np.ndarray] = []
    if header:
        blocks.append(label_strip(header, width))
    spacer = np.full((gap, width, 3), BACKGROUND, np.uint8)
    vgap = np.full((shape[0], gap, 3), BACKGROUND, np.uint8)
    for r in rows:
        tiles = list(r.tiles) + [blank_tile(shape[0])] * (n_tiles - len(r.tiles))
        line = [tiles[0]]
        for t in tiles[1:]:
            line += [vgap, t]
        blocks += [np.hstack(line), label_strip(r.lines, width), spacer]
    return np.vstack(blocks)


def encode_png(pixels: np.ndarray) -> bytes:
    """PNG bytes of a ``(H, W, 3)`` uint8 RGB image."""
    ok, buf = cv2.imencode(".png", cv2.cvtColor(pixels, cv2.COLOR_RGB2BGR))
    if not ok:
        raise ValueError("PNG encoding failed")
    return buf.tobytes()
