"""A preview window of a live session's newest frame (OpenCV's HighGUI,
which the opencv-contrib build that mediapipe brings has), run on the
thread that owns the display (the main thread)."""

from __future__ import annotations

from collections.abc import Callable

from faceweave.errors import OutputUnavailableError
from faceweave.live.endpoints import LatestFrame

#: keys that close the window: q and Esc
CLOSE_KEYS = frozenset({ord("q"), 27})


def show_preview(latest: LatestFrame, done: Callable[[], bool], *, title: str = "faceweave live") -> bool:
    """Show each new frame of ``latest`` until ``done()`` or the frames end;
    ``True`` when the user closed the window (q, Esc or its close button).

    Raises:
        OutputUnavailableError: OpenCV cannot open a window here.
    """
    import cv2

    try:
        cv2.namedWindow(title, cv2.WINDOW_NORMAL)
    except cv2.error as exc:
        reason = getattr(exc, "err", None) or " ".join(str(exc).split())
        raise OutputUnavailableError(f"--output preview: OpenCV cannot open a window ({reason})") from None
    number = 0
    try:
        while not done() and not latest.closed:
            got = latest.get(number, timeout=0.05)
            if got is not None:
                number, frame = got
                cv2.imshow(title, frame.rgb[..., ::-1])
            if cv2.waitKey(1) & 0xFF in CLOSE_KEYS:
                return True
            if number and cv2.getWindowProperty(title, cv2.WND_PROP_VISIBLE) < 1:
                return True  # its close button
        return False
    finally:
        cv2.destroyWindow(title)
