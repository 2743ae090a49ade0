"""Register a model file the user already has: ``faceweave models import [NAME] PATH``."""

from __future__ import annotations

import shutil
from pathlib import Path

from faceweave.errors import (
    ModelFileChecksumError,
    ModelFileFormatError,
    ModelFileSignatureError,
    ModelFormatError,
    ModelNotFoundError,
    ModelSignatureError,
    UnknownModelError,
)
from faceweave.models.cache import ModelStore, Pin, sha256_file
from faceweave.models.signature import check_signature, read_signature
from faceweave.models.spec import ModelSpec


def name_for_file(store: ModelStore, path: Path | str) -> str:
    """The catalogued model whose file name ``path`` has (``hyperswap_1a_256.onnx``
    -> ``hyperswap_1a_256``), as FaceFusion names its files.

    Raises:
        UnknownModelError: no spec has that file name.
    """
    file_name = Path(path).name
    for spec in store.catalog.values():
        if spec.file_name == file_name:
            return spec.name
    raise UnknownModelError(
        f"cannot tell which model {file_name} is from its name; give the name: "
        f"`faceweave models import NAME {path}` (see `faceweave models list`)"
    )


def import_model(store: ModelStore, name: str, path: Path | str, *, copy: bool = True, trust: bool = False) -> Path:
    """Check ``path`` against the spec called ``name`` and register it in ``store``.

    The graph's inputs/outputs must match the spec.  When the spec pins a
    sha256, the file must have it unless ``trust`` (a re-exported or
    converted file the user vouches for); a FaceFusion ``.hash`` beside the
    file must match its CRC32.  The file's sha256 and size are pinned; with
    ``copy`` it is copied into the store (atomically), otherwise the pin
    records where it is.  Returns the path that will be used.

    Raises:
        UnknownModelError: unknown name.
        ModelNotFoundError: missing file.
        ModelFileFormatError: the file is not ONNX.
        ModelFileSignatureError: its inputs/outputs do not match the spec.
        ModelFileChecksumError: its sha256 differs from the spec's (and not
            ``trust``), or its CRC32 from the FaceFusion ``.hash`` beside it.
    """
    from faceweave.models.facefusion import check_hash_file

    spec = store.spec(name)
    source = Path(path).expanduser()
    if not source.is_file():
        raise ModelNotFoundError(f"cannot import {name}: {source} is not a file")
    check_hash_file(name, source, error=ModelFileChecksumError)
    check_model_file(spec, source)
    digest = sha256_file(source)
    if spec.sha256 is not None and digest != spec.sha256 and not trust:
        raise ModelFileChecksumError(
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


def check_model_file(spec: ModelSpec, source: Path) -> None:
    """Check that a file the user hands over is ONNX with ``spec``'s inputs/outputs.

    Raises:
        ModelFileFormatError, ModelFileSignatureError (both
        :class:`~faceweave.errors.BadModelFileError`: exit code 2).
    """
    try:
        check_signature(spec.inputs, spec.outputs, read_signature(source), model=f"{spec.name} ({source})")
    except ModelSignatureError as exc:
        raise ModelFileSignatureError(str(exc)) from exc
    except ModelFormatError as exc:
        raise ModelFileFormatError(f"cannot import {spec.name}: {exc}") from exc
