"""How an option is offered to users: the :class:`Flag` marker that the
options models (:mod:`faceweave.options`) carry on each field a user may
set, and the help panels the flags are listed under.

One declaration per option: the field's type, default, bounds and
``description`` (the help text) are the model's, the marker adds the name
the command line and the HTTP API know it by, its panel and the kinds of
output it changes.  :mod:`faceweave.option_schema` walks the models and
hands the leaves to the CLI (:mod:`faceweave.cli.option_flags`, which makes
the flags) and to the service (:mod:`faceweave.service.jobspec`, which makes
the job's fields).  A leaf: imports nothing of faceweave.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

#: the help panels, in the order the options models declare their fields
SELECTION = "Face selection"
QUALITY = "Quality and limits"
FACEFUSION = "FaceFusion masks and knobs (neural swappers)"
DETECTION = "Face detection"
MODELS = "Neural models (optional)"
EDITOR = "Face editor (LivePortrait)"

#: the kinds of output an option may change (:data:`faceweave.profiles.RenderKind`)
OutputKind = Literal["photo", "video", "live"]
ALL_KINDS: tuple[OutputKind, ...] = ("photo", "video", "live")


@dataclass(frozen=True)
class Flag:
    """How one option field is set from the command line and the HTTP API.

    * ``panel``: the help panel its flag is listed under.
    * ``name``: the API field's name and, dashed, the flag's (``--face-mask-blur``);
      default the field's own name.  A boolean is one switch: ``--occlusion-hands``
      turns on what is off by default, ``--no-occlusion`` turns off what is on.
    * ``off``: the help of a ``--no-`` switch (the field's description says
      what the option does when on, as the API's field does).
    * ``metavar``: the flag's value as the help shows it.
    * ``kinds``: the outputs it changes; a command offers the flags of its kinds.
    * ``api``: whether a job may set it (``False``: the worker's settings decide).
    * ``aliases``: further flag names.
    * ``shown_default``: the default as the help words it, where the value
      itself does not read well (a long list, an empty one).
    * ``given``: the surfaces leave it unset unless the user gives it, because
      its default depends on other choices (the selection mode implied by a
      reference face; a working size that depends on the kind of output).
    """

    panel: str
    name: str = ""
    off: str | None = None
    metavar: str | None = None
    kinds: tuple[OutputKind, ...] = ALL_KINDS
    api: bool = True
    aliases: tuple[str, ...] = ()
    shown_default: str | None = None
    given: bool = False


def split_words(values: Iterable[object]) -> tuple[object, ...]:
    """The items of a repeated list flag or form field, each of which may list
    several (``skin,nose`` or ``'skin nose'``); items that are not text
    (numbers from a JSON body) are kept as they are."""
    found: list[object] = []
    for value in values:
        found.extend(value.replace(",", " ").split() if isinstance(value, str) else [value])
    return tuple(found)
