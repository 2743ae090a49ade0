"""``faceweave models``: list, download and import the neural models."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from faceweave.cli import console
from faceweave.errors import InvalidOptionError

ModelsDirOption = Annotated[
    Path | None,
    typer.Option(
        "--models-dir",
        metavar="DIR",
        envvar="FACEWEAVE_MODELS",
        help="Models folder (default: $XDG_CACHE_HOME/faceweave/models or ~/.cache/faceweave/models).",
    ),
]
VerboseOption = Annotated[bool, typer.Option("--verbose", "-v", help="Show library logs and tracebacks.")]


def _store(models_dir: Path | None):
    from faceweave.models import ModelStore

    if models_dir is not None and models_dir.exists() and not models_dir.is_dir():
        raise InvalidOptionError(
            f"--models-dir {models_dir}: is a file; give the folder that holds (or will hold) the models"
        )
    return ModelStore(models_dir)


def list_command(
    models_dir: ModelsDirOption = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the list as JSON.")] = False,
    verbose: VerboseOption = False,
) -> None:
    """List the known models: kind, whether present, size, licence, and whether the sha256 is pinned."""

    def body(term: console.Terminal) -> int:
        store = _store(models_dir)
        pins = store.pins()
        rows = []
        for spec in store.catalog.values():
            path = store.locate(spec)
            pin = pins.get(spec.name)
            if pin is not None:
                sha = f"pinned ({pin.source})"
            elif spec.sha256 is not None:
                sha = "pinned (spec)"
            else:
                sha = "not pinned"
            size = path.stat().st_size if path is not None else (pin.size if pin else spec.size)
            rows.append(
                {
                    "name": spec.name,
                    "kind": spec.kind,
                    "present": path is not None,
                    "bundled": spec.bundled is not None and path == store.bundled_path(spec),
                    "path": str(path) if path else None,
                    "size": size,
                    "licence": spec.licence,
                    "sha256": sha,
                }
            )
        if json_output:
            term.json({"models_dir": str(store.folder), "models": rows})
            return console.EXIT_OK
        from rich.table import Table

        table = Table(title=f"models in {store.folder}", title_justify="left")
        for column in ("name", "kind", "present", "size", "licence", "sha256"):
            table.add_column(column, justify="right" if column == "size" else "left", no_wrap=column == "name")
        for row in rows:
            present = "bundled" if row["bundled"] else ("yes" if row["present"] else "no")
            table.add_row(row["name"], row["kind"], present, _size(row["size"]), row["licence"], row["sha256"])
        term.out.print(table)
        return console.EXIT_OK

    raise typer.Exit(console.run(verbose, body))


MirrorOption = Annotated[
    str | None,
    typer.Option(
        "--mirror",
        metavar="URL",
        envvar="FACEWEAVE_MODELS_MIRROR",
        help="Download from this folder of model files (URL/NAME.onnx) instead of FaceFusion's hosts.",
    ),
]


def download_command(
    names: Annotated[
        list[str], typer.Argument(metavar="NAME...", help="Models to download (see `faceweave models list`).")
    ],
    offline: Annotated[
        bool, typer.Option("--offline", help="Never touch the network: fail for models that are not present.")
    ] = False,
    mirror: MirrorOption = None,
    models_dir: ModelsDirOption = None,
    verbose: VerboseOption = False,
) -> None:
    """Download models with resume and sha256 verification (a file that fails is deleted)."""

    def body(term: console.Terminal) -> int:
        from faceweave.models import download_model

        store = _store(models_dir)
        specs = [store.spec(name) for name in names]  # unknown names fail before any download
        for spec in specs:
            if store.is_present(spec):
                term.line(f"{spec.name}: present at {store.locate(spec)}")
                continue
            with _ProgressBar(term, spec.name) as bar:
                path = download_model(store, spec, offline=offline, progress=bar.update, mirror=mirror)
            term.line(f"{spec.name}: downloaded to {path}")
        return console.EXIT_OK

    raise typer.Exit(console.run(verbose, body))


def import_command(
    arguments: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[NAME] PATH",
            help="The .onnx file you already have, after the model's name when its file name is not the model's "
            "(see `faceweave models list`).",
            show_default=False,
        ),
    ] = None,
    from_facefusion: Annotated[
        Path | None,
        typer.Option(
            "--from-facefusion",
            metavar="DIR",
            help="Import every known model of a FaceFusion models folder (.assets/models), checking its .hash files.",
        ),
    ] = None,
    link: Annotated[
        bool, typer.Option("--link", help="Leave the files where they are (record their paths) instead of copying.")
    ] = False,
    trust: Annotated[
        bool, typer.Option("--trust", help="Accept a file whose sha256 differs from the one the spec pins.")
    ] = False,
    models_dir: ModelsDirOption = None,
    verbose: VerboseOption = False,
) -> None:
    """Register model files you already have, after checking their inputs/outputs (and FaceFusion's .hash
    files); pins their sha256."""

    def body(term: console.Terminal) -> int:
        store = _store(models_dir)
        given = arguments or []
        if from_facefusion is not None:
            if given:
                raise InvalidOptionError("give either --from-facefusion DIR or [NAME] PATH, not both")
            if trust:
                raise InvalidOptionError("--trust applies to one file (NAME PATH), not to --from-facefusion")
            return _import_folder(term, store, from_facefusion, copy=not link)
        if len(given) not in (1, 2):
            raise InvalidOptionError(f"give [NAME] PATH (one or two arguments), not {len(given)}")
        from faceweave.models import import_model
        from faceweave.models.importer import name_for_file

        name, path = given if len(given) == 2 else (name_for_file(store, given[0]), given[0])
        used = import_model(store, name, Path(path), copy=not link, trust=trust)
        pin = store.pins()[name]
        term.line(f"{name}: imported {used} (sha256 {pin.sha256})")
        return console.EXIT_OK

    raise typer.Exit(console.run(verbose, body))


def _import_folder(term: console.Terminal, store, folder: Path, *, copy: bool) -> int:
    """``--from-facefusion DIR``: one line per model imported, one per model missing (on stderr)."""
    from faceweave.models.facefusion import import_facefusion_folder

    result = import_facefusion_folder(store, folder, copy=copy)
    for model in result.imported:
        checked = f"CRC32 {model.crc32} checked" if model.crc32 else "no .hash beside it: signature checked only"
        term.line(f"{model.name}: imported {model.path} ({checked})")
    for missing in result.missing:
        term.note(f"missing: {missing.name} ({missing.why}); get it with `faceweave models download {missing.name}`")
    return console.EXIT_OK


class _ProgressBar:
    """A rich progress bar on stderr, drawn from the first ``update(done, total)``
    and always stopped on leaving the ``with`` block (also on errors)."""

    def __init__(self, term: console.Terminal, name: str) -> None:
        self.term, self.name = term, name
        self.bar: Any = None  # a rich.progress.Progress once drawn
        self.task: Any = None

    def __enter__(self) -> _ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def update(self, done: int, total: int | None) -> None:
        if self.bar is None:
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

            self.bar = Progress(
                TextColumn(self.name),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                console=self.term.err,
                transient=True,
            )
            self.bar.start()
            self.task = self.bar.add_task(self.name, total=total)
        self.bar.update(self.task, completed=done, total=total)


def _size(size: int | None) -> str:
    if size is None:
        return "?"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return "?"


def build_models_app() -> typer.Typer:
    """The ``models`` sub-app; register with ``app.add_typer(build_models_app(), name="models")``."""
    app = typer.Typer(
        name="models",
        help="List, download and import the neural models.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.command("list")(list_command)
    app.command("download", no_args_is_help=True)(download_command)
    app.command("import", no_args_is_help=True)(import_command)
    return app
