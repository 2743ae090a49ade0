"""The commands' flags for the options, made from the options models
(:mod:`faceweave.option_schema`), and :func:`typer_command`, which makes a
typer command of a frozen dataclass of a command's own flags and the
options of its kinds.

A command declares its own flags once, as the fields of its dataclass
(``Annotated`` typer options, with defaults); every option flag is made
here from the option's field: its flag name, help text, panel, value name
and default.  The command's run function gets the dataclass, whose
``options`` field holds the option values as given
(:class:`~faceweave.option_schema.GivenOptions`)."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from types import MappingProxyType
from typing import Annotated, Any, Protocol, TypeVar

import typer

from faceweave.cli import console
from faceweave.option_fields import OutputKind
from faceweave.option_schema import GivenOptions, Leaf, command_leaves, shown_default


class CommandArgs(Protocol):
    """What :func:`typer_command` needs of a command's dataclass."""

    @property
    def verbose(self) -> bool: ...

    @property
    def options(self) -> GivenOptions: ...


Args = TypeVar("Args", bound=CommandArgs)

#: the value names the help shows for options that do not name one
_METAVARS = {bool: None, int: "N", float: "F", str: "TEXT"}


def option_parameter(leaf: Leaf, kinds: tuple[OutputKind, ...]) -> inspect.Parameter:
    """The typer parameter of one option for a command of ``kinds``."""
    kind = leaf.value_type
    default: Any = None if leaf.flag.given or leaf.optional else leaf.default
    help_text = leaf.info.description
    if kind is bool:  # one switch, off by default: it turns on, or off what is on by default
        declared: Any = bool
        names: tuple[str, ...] = (f"--no-{leaf.option[2:]}",) if leaf.default else (leaf.option,)
        help_text = (leaf.flag.off or f"Off: {help_text}") if leaf.default else help_text
        default = False
    else:
        names = (leaf.option, *leaf.flag.aliases)
        if leaf.listed:
            declared, default = list[str] | None, None
        elif typing.get_origin(kind) is tuple:
            declared = kind
        else:
            declared = kind if kind in (int, float) else str
        if default is None:
            declared = declared | None
    shown = shown_default(leaf, kinds)
    option = typer.Option(
        *names,
        metavar=leaf.flag.metavar or _METAVARS.get(kind, "TEXT"),
        help=help_text,
        rich_help_panel=leaf.flag.panel,
        show_default=shown if shown is not None else kind is not bool,
    )
    return inspect.Parameter(
        leaf.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[declared, option]
    )


def option_value(leaf: Leaf, value: Any) -> Any:
    """The option's value of its flag's: a switch that was given sets the
    option to the opposite of its default; one not given leaves it (``None``)."""
    if leaf.value_type is bool:
        return (not leaf.default) if value else None
    return value


def typer_command(
    args_type: type[Args],
    run: Callable[[console.Terminal, Args], int],
    *,
    kinds: tuple[OutputKind, ...],
    where: Callable[[Leaf], bool] | None = None,
) -> Callable[..., None]:
    """A typer command whose flags are the fields of ``args_type`` (a frozen
    dataclass with a ``verbose`` field and an ``options`` field) and the
    options that change outputs of ``kinds``, narrowed by ``where``
    (:func:`~faceweave.option_schema.command_leaves`); it runs ``run`` with
    the dataclass in :func:`console.run`.  Its help is the dataclass's
    docstring."""
    leaves = command_leaves(kinds, where)
    hints = typing.get_type_hints(args_type, include_extras=True)
    own = [f for f in dataclasses.fields(args_type) if f.name != "options"]  # type: ignore[arg-type]
    params = [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default,
            annotation=hints[f.name],
        )
        for f in own
    ]
    params += [option_parameter(leaf, kinds) for leaf in leaves]

    def command(**values: Any) -> None:
        given = MappingProxyType({leaf.name: option_value(leaf, values.pop(leaf.name)) for leaf in leaves})
        args = typing.cast(Any, args_type)(**values, options=GivenOptions(given))
        raise typer.Exit(console.run(args.verbose, lambda term: run(term, args)))

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__doc__ = args_type.__doc__
    command.__name__ = command.__qualname__ = f"{args_type.__name__.removesuffix('Args').lower()}_command"
    return command
