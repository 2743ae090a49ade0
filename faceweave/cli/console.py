"""Terminal plumbing shared by the commands: quiet native logging, error
messages and exit codes.

mediapipe, TensorFlow Lite, absl and glog write log lines straight to file
descriptor 2 from C++, where Python cannot filter them.  Unless ``--verbose``
is given, a command runs inside :func:`session`, which points descriptor 2 at
``/dev/null`` and gives the command a console bound to a private copy of the
real stderr, so that the CLI's own messages are the only thing the user sees.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TextIO

from rich.console import Console
from rich.markup import escape

from faceweave.errors import FaceweaveError, InputError, NoFaceError, NoMatchingFaceError

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class Terminal:
    """Where a command writes: ``out`` for results, ``err`` for messages."""

    out: Console
    err: Console
    verbose: bool

    def error(self, message: str) -> None:
        self.err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, markup=True, soft_wrap=True)

    def note(self, message: str) -> None:
        self.err.print(message, highlight=False, markup=False, soft_wrap=True)

    def line(self, text: str) -> None:
        """One plain line of results on stdout."""
        self.out.print(text, highlight=False, markup=False, soft_wrap=True)

    def json(self, value: object) -> None:
        """``value`` as indented JSON on stdout, without colour."""
        self.out.file.write(json.dumps(value, indent=2) + "\n")
        self.out.file.flush()


def run(verbose: bool, command: Callable[[Terminal], int | None]) -> int:
    """Run ``command`` in a :func:`session`; map what it raises to a message
    and an exit code, which is returned."""
    with session(verbose) as term:
        try:
            return command(term) or EXIT_OK
        except KeyboardInterrupt:
            term.note("interrupted")
            return EXIT_INTERRUPTED
        except FaceweaveError as exc:
            _traceback(term)
            term.error(_one_line(str(exc)) or type(exc).__name__)
            return exit_code(exc)
        except Exception as exc:  # noqa: BLE001 - the CLI boundary reports everything
            if _caused_by_interrupt(exc):  # e.g. Ctrl-C inside an import, re-raised as ImportError
                term.note("interrupted")
                return EXIT_INTERRUPTED
            _traceback(term)
            if _is_validation_error(exc):
                term.error(validation_message(exc))
                return EXIT_BAD_INPUT
            hint = "" if verbose else "; run with --verbose for the traceback"
            term.error(f"internal error ({type(exc).__name__}: {_one_line(str(exc))}){hint}")
            return EXIT_FAILURE


def exit_code(exc: FaceweaveError) -> int:
    """2 for problems with the user's input, 1 for everything else."""
    return EXIT_BAD_INPUT if isinstance(exc, (InputError, NoFaceError, NoMatchingFaceError)) else EXIT_FAILURE


def validation_message(exc: Exception) -> str:
    """One line from a pydantic ``ValidationError`` of the options: the flag
    that sets the field (:mod:`faceweave.option_schema`) and the first problem."""
    from faceweave.option_schema import leaf_at

    first = exc.errors()[0]  # type: ignore[attr-defined]
    names = [part for part in first.get("loc", ()) if isinstance(part, str)]
    leaf = leaf_at(tuple(names))
    name = leaf.option if leaf is not None else ".".join(names) if names else "an option"
    more = exc.error_count() - 1  # type: ignore[attr-defined]
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more > 0 else ""
    message = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    return f"invalid value for {name}: {message}{suffix}"


def run_app(app: object, argv: list[str] | None = None, *, prog_name: str = "faceweave") -> int:
    """Run the typer ``app`` (the console-script entry point) and return its exit code.

    A usage error that typer / click find before a command runs (unknown
    option or command, a value of the wrong type or out of an option's
    range, a missing argument) becomes one ``error:`` line that names the
    command's ``--help``, instead of click's multi-line box.  Running a
    command with no arguments still prints its help (exit code 2).
    """
    import importlib

    import typer
    import typer.core

    # click's exceptions, wherever this typer takes click from (0.2x vendors it)
    clicks = (getattr(typer.core, "_click", None) or importlib.import_module("click")).exceptions
    # Ctrl-C at a prompt: click's Abort, which typer 0.2x keeps in typer.exceptions
    abort = getattr(clicks, "Abort", None) or importlib.import_module("typer.exceptions").Abort
    command = typer.main.get_command(app)  # type: ignore[arg-type]
    try:
        result = command.main(args=argv, prog_name=prog_name, standalone_mode=False)
    except clicks.NoArgsIsHelpError as exc:
        return exc.exit_code  # typer has printed the help already
    except clicks.ClickException as exc:
        ctx = getattr(exc, "ctx", None)
        hint = f"; see '{ctx.command_path} --help'" if ctx is not None else ""
        text = _one_line(exc.format_message()).rstrip(".")
        text = text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text
        Console(stderr=True, soft_wrap=True).print(
            f"[bold red]error:[/] {escape(text + hint)}", highlight=False, markup=True, soft_wrap=True
        )
        return exc.exit_code
    except abort:
        Console(stderr=True).print("interrupted", highlight=False, markup=False)
        return EXIT_INTERRUPTED
    return result if isinstance(result, int) else EXIT_OK


def _is_validation_error(exc: Exception) -> bool:
    from pydantic import ValidationError

    return isinstance(exc, ValidationError)


def _caused_by_interrupt(exc: BaseException) -> bool:
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _traceback(term: Terminal) -> None:
    if term.verbose:
        term.err.print(traceback.format_exc(), markup=False, highlight=False, end="")


@contextmanager
def session(verbose: bool) -> Iterator[Terminal]:
    """A :class:`Terminal` for one command; native log noise is hidden unless ``verbose``."""
    out = Console(soft_wrap=True)
    if verbose:
        yield Terminal(out=out, err=Console(stderr=True, soft_wrap=True), verbose=True)
        return
    quiet_python_logging()
    with _stderr_to_devnull() as real_stderr:
        yield Terminal(out=out, err=Console(file=real_stderr, soft_wrap=True), verbose=False)


def quiet_native_logging_env() -> None:
    """Ask glog / TensorFlow Lite for errors only; must run before mediapipe loads."""
    os.environ.setdefault("GLOG_minloglevel", "3")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def quiet_python_logging() -> None:
    quiet_native_logging_env()
    logging.getLogger().setLevel(logging.ERROR)
    try:
        from absl import logging as absl_logging
    except ImportError:
        return
    absl_logging.set_verbosity(absl_logging.ERROR)
    absl_logging.set_stderrthreshold(absl_logging.ERROR)


@contextmanager
def _stderr_to_devnull() -> Iterator[TextIO]:
    """Point descriptor 2 at ``/dev/null``; yield a stream on the real stderr."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    real = os.fdopen(os.dup(saved), "w", encoding="utf-8", errors="replace")
    try:
        yield real
    finally:
        real.flush()
        real.close()
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
