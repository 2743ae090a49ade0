"""Write files atomically: into a temporary file beside the target, then rename.

A reader (or a crash) never sees a half-written file under the final name:
either the old file is still there, or the complete new one.
"""

from __future__ import annotations

import errno
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: attempts at finding an unused temporary name before giving up
_NAME_ATTEMPTS = 100
#: longest part of the target's name kept in the temporary name (NAME_MAX is 255)
_NAME_KEEP = 200


@contextmanager
def atomic_output(path: Path, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path in ``path``'s folder; rename it onto ``path`` on success.

    The temporary file is created empty (so the name is reserved) and is named
    ``.<name>.<random><suffix>``.  A writer that picks the format from the
    extension, such as ffmpeg, can pass ``suffix=".tmp.mp4"`` (and must be told
    to overwrite the existing empty file, e.g. ``-y``).  When the ``with`` body
    raises, the temporary file is deleted and the exception propagates; ``path``
    is left as it was.  The parent folder must exist.

    Raises:
        OSError: the temporary file could not be created, synced or renamed.
    """
    target = Path(path)
    temp = _create_temp(target, suffix)
    try:
        yield temp
        _fsync(temp)
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def _create_temp(target: Path, suffix: str) -> Path:
    """Create an empty, unused file beside ``target``; permissions follow the umask."""
    for _ in range(_NAME_ATTEMPTS):
        candidate = target.with_name(f".{target.name[:_NAME_KEEP]}.{secrets.token_hex(4)}{suffix}")
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return candidate
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", str(target.parent))


def _fsync(path: Path) -> None:
    """Flush ``path``'s data to disk so that the rename never exposes an empty file."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
