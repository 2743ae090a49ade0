"""Register a model file the user already has: ``faceweave models import NAME PATH``."""

from __future__ import annotations

import shutil
from pathlib import Path

from faceweave.errors import ChecksumError, ModelNotFoundError
from faceweave.models.cache import ModelStore, Pin, sha256_file
from faceweave.models.signature import check_signature, read_signature


def import_model(store: ModelStore, name: str, path: Path | str, *, copy: bool = True, trust: bool = False) -> Path:
    """Check ``path`` against the spec called ``name`` and register it in ``store``.

    The graph's inputs/outputs must match the spec.  When the spec pins a
    sha256, the file must have it unless ``trust`` (a re-exported or
    converted file the user vouches for).  The file's sha256 and size are
    pinned; with ``copy`` it is copied into the store (atomically), otherwise
    the pin records where it is.  Returns the path that will be used.

    Raises:
        ModelNotFoundError: unknown name or missing file.
        ModelFormatError: the file is not ONNX.
        ModelSignatureError: its inputs/outputs do not match the spec.
        ChecksumError: its sha256 differs from the spec's (and not ``trust``).
    """
    spec = store.spec(name)
    source = Path(path).expanduser()
    if not source.is_file():
        raise ModelNotFoundError(f"cannot import {name}: {source} is not a file")
    check_signature(spec.inputs, spec.outputs, read_signature(source), model=f"{name} ({source})")
    digest = sha256_file(source)
    if spec.sha256 is not None and digest != spec.sha256 and not trust:
        raise ChecksumError(
            f"cannot import {name}: {source} has sha256 {digest}, the spec pins {spec.sha256}; "
            f"pass --trust to use it anyway"
        )
    size = source.stat().st_size
    if not copy:
        store.pin(name, Pin(sha256=digest, size=size, source="import", path=str(source.resolve())))
        return source.resolve()
    from faceweave.io.atomic import atomic_output

    store.folder.mkdir(parents=True, exist_ok=True)
    target = store.path_for(spec)
    if source.resolve() != target.resolve():
        with atomic_output(target) as temp:
            shutil.copyfile(source, temp)
    store.pin(name, Pin(sha256=digest, size=size, source="import"))
    return target
