"""The options a user may set, read off the options models: one
:class:`Leaf` per field that carries a :class:`~faceweave.option_fields.Flag`,
and the one function that turns what a surface was given into
:class:`~faceweave.options.SwapOptions` (:func:`swap_options`).

The command line (:mod:`faceweave.cli.option_flags`) makes its flags from the
leaves, the HTTP API (:mod:`faceweave.service.jobspec`) its job fields; both
hand the values back here by the leaves' names, so an option is declared
once, in :mod:`faceweave.options`, and named nowhere else.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from faceweave.option_fields import Flag, OutputKind, split_words
from faceweave.options import KIND_DEFAULTS, SelectionWords, SwapOptions, selection_mode


@dataclass(frozen=True)
class Leaf:
    """One option a user may set: where it sits in :class:`SwapOptions`
    (``path``), how it is offered (``flag``) and the model's field."""

    path: tuple[str, ...]
    flag: Flag
    info: FieldInfo

    @property
    def name(self) -> str:
        """The API field's name, and the CLI parameter's."""
        return self.flag.name or self.path[-1]

    @property
    def option(self) -> str:
        """The command-line flag (``--face-mask-blur``)."""
        return "--" + self.name.replace("_", "-")

    @property
    def annotation(self) -> Any:
        """The field's type (``X | None`` for an optional one)."""
        return self.info.annotation

    @property
    def value_type(self) -> Any:
        """The field's type without ``None``."""
        args = typing.get_args(self.annotation)
        if _is_union(self.annotation):
            return next(a for a in args if a is not type(None))
        return self.annotation

    @property
    def optional(self) -> bool:
        return _is_union(self.annotation) and type(None) in typing.get_args(self.annotation)

    @property
    def listed(self) -> bool:
        """A list of any length (``tuple[str, ...]``): repeated or comma-separated."""
        args = typing.get_args(self.value_type)
        return typing.get_origin(self.value_type) is tuple and len(args) == 2 and args[1] is Ellipsis

    @property
    def default(self) -> Any:
        return self.info.default

    @property
    def bounds(self) -> list[Any]:
        """The field's constraints (``Ge``, ``Le`` ...), without the marker."""
        return [m for m in self.info.metadata if not isinstance(m, Flag)]


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _walk(model: type[BaseModel], path: tuple[str, ...]) -> list[Leaf]:
    found: list[Leaf] = []
    for name, info in model.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            found += _walk(kind, (*path, name))
            continue
        flag = next((m for m in info.metadata if isinstance(m, Flag)), None)
        if flag is not None:
            found.append(Leaf((*path, name), flag, info))
    return found


@cache
def leaves() -> tuple[Leaf, ...]:
    """Every option a user may set, in the models' order."""
    return tuple(_walk(SwapOptions, ()))


def command_leaves(kinds: tuple[OutputKind, ...], where: Callable[[Leaf], bool] | None = None) -> tuple[Leaf, ...]:
    """The options a command for outputs of ``kinds`` offers (those that
    change one of them), narrowed by ``where``."""
    return tuple(leaf for leaf in leaves() if set(leaf.flag.kinds) & set(kinds) and (where is None or where(leaf)))


def reads_faces(leaf: Leaf) -> bool:
    """The options that change how faces are found: the detector and
    landmarker, where their models run, the largest picture (what
    ``faceweave faces`` and ``faceweave people`` take)."""
    return leaf.path[0] in ("analysis", "runtime") or leaf.path == ("max_pixels",)


def api_leaves() -> tuple[Leaf, ...]:
    """The options a job may set."""
    return tuple(leaf for leaf in leaves() if leaf.flag.api)


def leaf_at(path: tuple[str, ...]) -> Leaf | None:
    """The leaf at ``path`` in :class:`SwapOptions` (a validation error's location)."""
    return next((leaf for leaf in leaves() if leaf.path == path), None)


def shown_default(leaf: Leaf, kinds: tuple[OutputKind, ...]) -> str | None:
    """The default as a command for ``kinds`` shows it in its help; ``None``
    where the value shows itself (or there is none to show)."""
    if leaf.flag.shown_default is not None:
        return leaf.flag.shown_default
    by_kind = {kind: KIND_DEFAULTS[kind].get(leaf.name, leaf.default) for kind in kinds}
    if leaf.flag.given and any(leaf.name in defaults for defaults in KIND_DEFAULTS.values()):
        if len(set(by_kind.values())) == 1:
            return str(next(iter(by_kind.values())))
        return ", ".join(f"{value} for {kind} targets" for kind, value in by_kind.items())
    if leaf.listed:
        return ", ".join(map(str, leaf.default)) or "none"
    return None


@dataclass(frozen=True)
class GivenOptions:
    """The option values one run was given, by leaf name (``None``: not
    given); :meth:`swap_options` resolves them for a kind of output."""

    values: Mapping[str, Any] = field(default_factory=lambda: types.MappingProxyType({}))

    def swap_options(
        self, *, kind: OutputKind, has_reference: bool | None, words: SelectionWords, fixed: Mapping[str, Any] = {}
    ) -> SwapOptions:
        return swap_options(self.values, kind=kind, has_reference=has_reference, words=words, fixed=fixed)


def swap_options(
    given: Mapping[str, Any],
    *,
    kind: OutputKind,
    has_reference: bool | None,
    words: SelectionWords,
    defaults: Mapping[str, Any] = {},
    fixed: Mapping[str, Any] = {},
) -> SwapOptions:
    """:class:`SwapOptions` from the values a surface was given, by leaf name.

    A value that is ``None`` was not given: ``defaults``, then the kind's
    (:data:`~faceweave.options.KIND_DEFAULTS`), then the model's apply.  The
    selection mode is the one implied by a reference face and face indices
    (:func:`~faceweave.options.selection_mode`; ``has_reference=None``
    leaves the selection out).  List values may list several items each
    (``skin,nose``).  ``fixed`` are further :class:`SwapOptions` fields
    (nested dicts) that no surface sets: the service's limits and runtime.

    Raises pydantic's ``ValidationError`` for a bad value, and
    :class:`~faceweave.errors.InvalidOptionError` for a selection that
    contradicts itself.
    """
    values = {leaf.name: given.get(leaf.name) for leaf in leaves()}
    for name, value in {**KIND_DEFAULTS[kind], **defaults}.items():
        if values.get(name) is None:
            values[name] = value
    if has_reference is None:
        values["faces"] = values["face_index"] = None
    else:
        values["faces"] = selection_mode(
            values["faces"], has_reference=has_reference, has_indices=bool(values["face_index"]), words=words
        )
    data: dict[str, Any] = {}
    for leaf in leaves():
        value = values[leaf.name]
        if value is None:
            continue
        if leaf.listed and isinstance(value, (list, tuple)):
            value = split_words(value)
        _put(data, leaf.path, value)
    for name, value in fixed.items():
        _put(data, (name,), value)
    return SwapOptions.model_validate(data)


def _put(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    """Set ``value`` at ``path`` in nested dicts (a dict value merges)."""
    for part in path[:-1]:
        data = data.setdefault(part, {})
    if isinstance(value, Mapping) and isinstance(data.get(path[-1]), dict):
        data[path[-1]].update(value)
    else:
        data[path[-1]] = dict(value) if isinstance(value, Mapping) else value
