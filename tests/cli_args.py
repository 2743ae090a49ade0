"""Parse a command line into a command's dataclass, as the real command
would (its flags made by :func:`faceweave.cli.option_flags.typer_command`),
without running it."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from faceweave.cli.option_flags import typer_command


def parse_args(args_type, argv: list[str], *, kinds, where=None):
    """The ``args_type`` instance the command makes of ``argv``; raises
    ``AssertionError`` with click's output when the line is refused."""
    seen = []

    def run(term, args) -> int:
        seen.append(args)
        return 0

    app = typer.Typer()
    app.command(_name(args_type))(typer_command(args_type, run, kinds=kinds, where=where))

    @app.command("other")
    def _other() -> None:  # a second command keeps the first one's name on the line
        """Nothing."""

    result = CliRunner().invoke(app, [_name(args_type), *argv])
    assert result.exit_code == 0 and seen, result.output
    return seen[0]


def _name(args_type) -> str:
    return args_type.__name__.removesuffix("Args").lower()
