"""The ``faceweave`` command line: ``swap``, ``batch``, ``faces``, ``people``, ``live``,
``evaluate``, ``verify``, ``serve``, ``worker``, ``models``, ``export`` and ``benchmark-model``.

Each command lives in its own module as a plain function with typer
annotations; this module builds the typer app from them.  Heavy modules
(mediapipe, dlib, OpenCV) are imported inside the commands, after
:mod:`faceweave.cli.console` has quietened their native logging.
"""

from __future__ import annotations

from typing import Annotated

import typer

from faceweave.cli.batch import batch_command
from faceweave.cli.benchmark import benchmark_command
from faceweave.cli.evaluate import evaluate_command
from faceweave.cli.export import benchmark_model_command, export_command
from faceweave.cli.faces import faces_command
from faceweave.cli.live import live_command
from faceweave.cli.models import build_models_app
from faceweave.cli.people import people_command
from faceweave.cli.serve import serve_command
from faceweave.cli.swap import swap_command
from faceweave.cli.verify import verify_command
from faceweave.cli.worker import worker_command


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("faceweave")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "unknown"


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"faceweave {_version()}")
        raise typer.Exit()


def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_show_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """Swap faces in photos, offline, on a CPU."""


def build_app() -> typer.Typer:
    app = typer.Typer(
        add_completion=False,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback()(_root)
    app.command("swap", no_args_is_help=True)(swap_command)
    app.command("batch", no_args_is_help=True)(batch_command)
    app.command("faces", no_args_is_help=True)(faces_command)
    app.command("people", no_args_is_help=True)(people_command)
    app.command("live", no_args_is_help=True)(live_command)
    app.command("evaluate", no_args_is_help=True)(evaluate_command)
    app.command("verify", no_args_is_help=True)(verify_command)
    app.command("serve")(serve_command)
    app.command("worker")(worker_command)
    app.add_typer(build_models_app(), name="models")
    app.command("export", no_args_is_help=True)(export_command)
    app.command("benchmark-model", no_args_is_help=True)(benchmark_model_command)
    app.command("benchmark", no_args_is_help=True)(benchmark_command)
    return app


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point; exits with the command's status (usage
    errors are one line, like every other error)."""
    from faceweave.cli.console import run_app

    raise SystemExit(run_app(build_app(), argv))


__all__ = ["build_app", "main"]
