"""Where model files live: the XDG cache folder and the :class:`ModelStore`.

The folder is ``$FACEWEAVE_MODELS``, else ``$XDG_CACHE_HOME/faceweave/models``,
else ``~/.cache/faceweave/models``, unless the caller gives one.  Beside the
files, ``pins.json`` records the sha256 (and size, and path when not copied)
of every file that was imported or downloaded without a spec-pinned hash.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from faceweave.errors import ChecksumError, ChosenModelMissingError, ModelError
from faceweave.models.catalog import builtin_specs, find_spec
from faceweave.models.spec import ModelSpec

PINS_FILE = "pins.json"
_CHUNK = 1 << 20


def default_models_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The models folder that the environment asks for (see the module doc)."""
    env = os.environ if environ is None else environ
    if env.get("FACEWEAVE_MODELS"):
        return Path(env["FACEWEAVE_MODELS"]).expanduser()
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]).expanduser() / "faceweave" / "models"
    return Path("~/.cache/faceweave/models").expanduser()


def sha256_file(path: Path, progress: Callable[[int], None] | None = None) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks; ``progress(bytes_done)``."""
    digest = hashlib.sha256()
    done = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            done += len(chunk)
            if progress is not None:
                progress(done)
    return digest.hexdigest()


@dataclass(frozen=True)
class Pin:
    """A file's recorded identity: ``source`` is ``"import"`` or ``"download"``;
    ``path`` is set when an import left the file where it was."""

    sha256: str
    size: int
    source: str
    path: str | None = None


class ModelStore:
    """The models folder and its pins, for one catalog of specs.

    Reads are cheap and never touch the network; :func:`faceweave.models.download.download_model`
    and :func:`faceweave.models.importer.import_model` add files.
    """

    def __init__(self, folder: Path | str | None = None, *, catalog: Mapping[str, ModelSpec] | None = None) -> None:
        self.folder = Path(folder).expanduser() if folder is not None else default_models_dir()
        self.catalog: Mapping[str, ModelSpec] = builtin_specs() if catalog is None else dict(catalog)

    def __repr__(self) -> str:
        return f"ModelStore({str(self.folder)!r})"

    def spec(self, name: str) -> ModelSpec:
        """The spec called ``name``; :class:`ModelNotFoundError` when unknown."""
        return find_spec(name, self.catalog)

    def path_for(self, spec: ModelSpec) -> Path:
        """Where the store keeps ``spec``'s file (whether or not it is there)."""
        return self.folder / spec.file_name

    def bundled_path(self, spec: ModelSpec) -> Path | None:
        """The file inside an installed package, for bundled models; ``None`` when absent."""
        if spec.bundled is None:
            return None
        from importlib import resources

        package, resource = spec.bundled
        try:
            candidate = Path(str(resources.files(package) / resource))
        except (ModuleNotFoundError, TypeError):
            return None
        return candidate if candidate.is_file() else None

    def locate(self, spec: ModelSpec) -> Path | None:
        """The file that would be used for ``spec``, or ``None`` when none is present.

        Order: a file inside a package (bundled), the store's own copy, then a
        path pinned by an import that did not copy.
        """
        bundled = self.bundled_path(spec)
        if bundled is not None:
            return bundled
        own = self.path_for(spec)
        if own.is_file():
            return own
        pin = self.pins().get(spec.name)
        if pin is not None and pin.path and Path(pin.path).is_file():
            return Path(pin.path)
        return None

    def is_present(self, spec: ModelSpec) -> bool:
        return self.locate(spec) is not None

    def resolve(self, name: str) -> Path:
        """The file for the model called ``name``, checked by size against
        the pinned size (not by sha256) and, where FaceFusion's ``NAME.hash``
        lies beside it (a FaceFusion models folder), by that CRC32.

        Raises:
            UnknownModelError: no catalog entry has that name.
            ChosenModelMissingError: no file present (the user's input: exit
                code 2, HTTP 422); the message says how to download or import it.
            ChecksumError: the file's size differs from the pinned size, or
                its CRC32 from FaceFusion's ``.hash`` beside it.
        """
        spec = self.spec(name)
        path = self.locate(spec)
        if path is None:
            how = f"`faceweave models download {name}` or " if spec.urls else ""
            raise ChosenModelMissingError(
                f"model {name} is not present in {self.folder}; get it with {how}`faceweave models import {name} PATH`"
            )
        expected = self.expected_sha256(spec)
        size = self.expected_size(spec)
        if size is not None and expected is not None and path.stat().st_size != size:
            raise ChecksumError(
                f"model {name} at {path} has {path.stat().st_size} bytes, expected {size}; download or import it again"
            )
        from faceweave.models.facefusion import check_hash_file

        check_hash_file(name, path)
        return path

    def expected_sha256(self, spec: ModelSpec) -> str | None:
        """The pinned sha256 (an import or download recorded it), else the
        spec's, else ``None``.  A pin wins: it is the file the user chose."""
        pin = self.pins().get(spec.name)
        return pin.sha256 if pin is not None else spec.sha256

    def expected_size(self, spec: ModelSpec) -> int | None:
        pin = self.pins().get(spec.name)
        return pin.size if pin is not None else spec.size

    def verify(self, name: str) -> Path:
        """Like :meth:`resolve`, then hash the file against the expected sha256
        (when one is known).  Raises :class:`ChecksumError` on a mismatch."""
        path = self.resolve(name)
        expected = self.expected_sha256(self.spec(name))
        if expected is not None:
            actual = sha256_file(path)
            if actual != expected:
                raise ChecksumError(f"model {name} at {path}: sha256 {actual}, expected {expected}")
        return path

    # -- pins ---------------------------------------------------------------

    @property
    def pins_path(self) -> Path:
        return self.folder / PINS_FILE

    def pins(self) -> dict[str, Pin]:
        """The recorded pins by model name (empty when none)."""
        try:
            raw = json.loads(self.pins_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot read {self.pins_path}: {exc}") from exc
        if not isinstance(raw, dict):
            raise ModelError(f"cannot read {self.pins_path}: not a JSON object")
        pins = {}
        for name, entry in raw.items():
            try:
                pins[name] = Pin(
                    sha256=str(entry["sha256"]),
                    size=int(entry["size"]),
                    source=str(entry.get("source", "import")),
                    path=entry.get("path"),
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise ModelError(f"cannot read {self.pins_path}: bad entry for {name!r}") from exc
        return pins

    def pin(self, name: str, pin: Pin) -> None:
        """Record ``pin`` for ``name`` (atomically replaces ``pins.json``)."""
        pins = self.pins()
        pins[name] = pin
        self._write_pins(pins)

    def pin_all(self, pins: Mapping[str, Pin]) -> None:
        """Record several pins in one atomic write of ``pins.json``."""
        merged = self.pins()
        merged.update(pins)
        self._write_pins(merged)

    def unpin(self, name: str) -> None:
        pins = self.pins()
        if pins.pop(name, None) is not None:
            self._write_pins(pins)

    def _write_pins(self, pins: Mapping[str, Pin]) -> None:
        from faceweave.io.atomic import atomic_output

        data = {key: {k: v for k, v in vars(value).items() if v is not None} for key, value in sorted(pins.items())}
        self.folder.mkdir(parents=True, exist_ok=True)
        with atomic_output(self.pins_path) as temp:
            temp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
