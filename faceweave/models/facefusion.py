"""FaceFusion's models folder (``~/facefusion/.assets/models``) as it is.

FaceFusion keeps ``NAME.onnx`` with ``NAME.hash`` beside it: the file's
CRC32 as 8 lowercase hex digits (``format(zlib.crc32(content), '08x')``,
no newline).  Its file names are the catalog's, so ``--models-dir`` can
point at the folder directly; :func:`check_hash_file` is what the store runs
on such a file, and :func:`import_facefusion_folder` registers the models of
a folder in a store (``faceweave models import --from-facefusion DIR``).

An import is all or nothing: every file is checked (its ``.hash`` and its
inputs/outputs against the spec) before any is copied or pinned; copies go
through temporary files renamed into place together, and the pins are
written once, last.  Models that are not in the folder are not an error:
FaceFusion downloads only what it used.  What the result reports as missing
is what the folder's own files call for: a ``.hash`` without its ``.onnx``
(an interrupted download), and the ArcFace or embedding converter a present
swapper needs.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from faceweave.errors import BadModelFileError, ChecksumError, InvalidOptionError, ModelFileChecksumError
from faceweave.models.cache import ModelStore, Pin, sha256_file
from faceweave.models.spec import ModelSpec

HASH_SUFFIX = ".hash"
_CHUNK = 1 << 20
_CRC32 = re.compile(r"^[0-9a-f]{8}$")


def crc32_file(path: Path) -> str:
    """FaceFusion's hash of a file: its CRC32 as 8 lowercase hex digits."""
    value = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            value = zlib.crc32(chunk, value)
    return format(value, "08x")


def hash_path(model_path: Path) -> Path:
    """Where FaceFusion keeps the hash of ``model_path`` (``NAME.onnx`` -> ``NAME.hash``)."""
    return model_path.with_suffix(HASH_SUFFIX)


def read_hash(path: Path, *, error: type[ChecksumError] = ChecksumError) -> str:
    """The CRC32 a ``.hash`` file records (surrounding blanks and case ignored).

    Raises:
        ``error``: the file cannot be read or does not hold 8 hex digits.
    """
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip().lower()
    except OSError as exc:
        raise error(f"cannot read FaceFusion's hash file {path}: {exc.strerror or exc}") from exc
    if not _CRC32.match(text):
        raise error(f"{path} is not a FaceFusion hash file (8 hex digits of CRC32 expected)")
    return text


def check_hash_file(name: str, path: Path, *, error: type[ChecksumError] = ChecksumError) -> str | None:
    """Check ``path`` against the FaceFusion ``.hash`` beside it, if there is one.

    Returns the CRC32 it matched, or ``None`` when there is no ``.hash``.

    Raises:
        ``error``: the file's CRC32 differs from the recorded one, or the
            ``.hash`` is unreadable; the message names the model.
    """
    recorded = hash_path(path)
    if not recorded.is_file():
        return None
    expected = read_hash(recorded, error=error)
    actual = crc32_file(path)
    if actual != expected:
        raise error(
            f"model {name} at {path}: CRC32 {actual}, but FaceFusion's {recorded.name} beside it expects "
            f"{expected}; the file is corrupt or not the one FaceFusion downloaded"
        )
    return expected


@dataclass(frozen=True)
class FolderModel:
    """A catalogued model found in a FaceFusion folder: its ``path``, and
    the CRC32 its ``.hash`` recorded (``None``: no ``.hash`` beside it)."""

    name: str
    path: Path
    crc32: str | None


@dataclass(frozen=True)
class MissingModel:
    """A model the folder's own files call for but that is not there; ``why`` says which file does."""

    name: str
    why: str


@dataclass(frozen=True)
class FolderImport:
    """The outcome of :func:`import_facefusion_folder`: the models registered
    (``path``: where the store will use each from), and those missing."""

    folder: Path
    imported: tuple[FolderModel, ...]
    missing: tuple[MissingModel, ...]


def scan_folder(folder: Path, catalog: Mapping[str, ModelSpec]) -> tuple[list[FolderModel], list[MissingModel]]:
    """The catalogued models present in ``folder`` (no file is read yet, so
    ``crc32`` is ``None``) and those its files call for but lack."""
    present = [
        FolderModel(spec.name, folder / spec.file_name, None)
        for spec in catalog.values()
        if (folder / spec.file_name).is_file()
    ]
    have = {model.name for model in present}
    missing = [
        MissingModel(spec.name, f"{hash_path(folder / spec.file_name).name} is there without the model file")
        for spec in catalog.values()
        if spec.name not in have and hash_path(folder / spec.file_name).is_file()
    ]
    for model in present:
        for needed in catalog[model.name].requires:
            if needed not in have and needed in catalog and all(m.name != needed for m in missing):
                missing.append(MissingModel(needed, f"{model.name} needs it"))
    return present, missing


def check_folder_model(spec: ModelSpec, path: Path) -> FolderModel:
    """Check one file of a FaceFusion folder: its ``.hash`` (when there is
    one), then its inputs/outputs against ``spec``, then the spec's sha256
    (when it pins one).

    Raises:
        ModelFileChecksumError, ModelFileFormatError, ModelFileSignatureError.
    """
    from faceweave.models.importer import check_model_file

    crc = check_hash_file(spec.name, path, error=ModelFileChecksumError)
    check_model_file(spec, path)
    if spec.sha256 is not None and (digest := sha256_file(path)) != spec.sha256:
        raise ModelFileChecksumError(f"model {spec.name} at {path}: sha256 {digest}, the spec pins {spec.sha256}")
    return FolderModel(spec.name, path, crc)


def import_facefusion_folder(store: ModelStore, folder: Path | str, *, copy: bool = True) -> FolderImport:
    """Register every catalogued model of a FaceFusion models folder in ``store``.

    Every file is checked first (:func:`check_folder_model`); then all are
    copied (``copy``) or their paths pinned, and the pins written once.

    Raises:
        InvalidOptionError: ``folder`` is not a folder.
        BadModelFileError: it holds no catalogued model file; or (its
            subclasses) a file fails its check: nothing is imported then.
    """
    source = Path(folder).expanduser()
    if not source.is_dir():
        raise InvalidOptionError(f"--from-facefusion {source}: not a folder (give FaceFusion's .assets/models)")
    present, missing = scan_folder(source, store.catalog)
    if not present:
        example = "inswapper_128.onnx with inswapper_128.hash"
        raise BadModelFileError(f"{source} holds no model file faceweave knows (FaceFusion keeps e.g. {example})")
    checked = [check_folder_model(store.catalog[m.name], m.path) for m in present]
    imported = _copy_all(store, checked) if copy else _link_all(store, checked)
    return FolderImport(folder=source, imported=imported, missing=tuple(missing))


def _link_all(store: ModelStore, models: list[FolderModel]) -> tuple[FolderModel, ...]:
    pins = {m.name: _pin(m.path, linked=True) for m in models}
    store.pin_all(pins)
    return tuple(FolderModel(m.name, m.path.resolve(), m.crc32) for m in models)


def _copy_all(store: ModelStore, models: list[FolderModel]) -> tuple[FolderModel, ...]:
    """Copy every file into the store through temporary files that are
    renamed into place only once all are written."""
    import shutil
    from contextlib import ExitStack

    from faceweave.io.atomic import atomic_output

    store.folder.mkdir(parents=True, exist_ok=True)
    targets = [store.path_for(store.catalog[m.name]) for m in models]
    pins = {m.name: _pin(m.path) for m in models}
    with ExitStack() as stack:
        for model, target in zip(models, targets, strict=True):
            if model.path.resolve() != target.resolve():
                shutil.copyfile(model.path, stack.enter_context(atomic_output(target)))
    store.pin_all(pins)
    return tuple(FolderModel(m.name, t, m.crc32) for m, t in zip(models, targets, strict=True))


def _pin(path: Path, *, linked: bool = False) -> Pin:
    """The pin of an imported file (``linked``: it stays where it is)."""
    where = str(path.resolve()) if linked else None
    return Pin(sha256=sha256_file(path), size=path.stat().st_size, source="import", path=where)
