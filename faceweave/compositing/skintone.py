"""How much of the target's skin a new face takes: :class:`SkinTone`.

One number, ``SwapOptions.skin_tone`` in ``[0, 1]``, moves the new face
from the source's own skin (0: its colour, its tint and its cheeks as the
source photo has them, only the target's shading) to the target's (1: the
skin colour matched, the target's fine tint in lightness and colour, its
cheeks, and all of its low-frequency shading).  ``0.5`` is the compositing
of the releases before the control existed, to the bit.  Between the
anchors each share moves linearly (:func:`skin_tone_steps`).  A pure
mapping, resolved once per swapper; the compositing steps read the shares
(:mod:`faceweave.compositing.composite`)."""

from __future__ import annotations

from dataclasses import dataclass

#: the level at which every share is the compositing of the releases
#: before the control (colour matched, 60 % of the target's fine chroma,
#: none of its fine lightness, the cheeks settled, shading as asked)
ANCHOR = 0.5
#: the share of the target's fine skin chroma at :data:`ANCHOR` (the rest is
#: the source's modelling of its cheeks and its own blush, which carry
#: identity)
ANCHOR_CHROMA = 0.6
#: the share of the target's fine skin lightness at level 1 (at the anchor
#: none: the source's modelling stays)
FULL_LIGHTNESS = 0.5


@dataclass(frozen=True)
class SkinTone:
    """The shares of the target's skin one composite takes, each in ``[0, 1]``:

    ``colour``, of the skin-colour match (mean and spread in CIELAB; 0: the
    source's colour kept); ``chroma`` and ``lightness``, of the target's
    fine skin tint (:func:`~faceweave.compositing.composite.skin_tint`);
    ``lids``, of the lid lift around the eyes; ``cheeks``, of the cheeks'
    settling to the target's after the blend
    (:func:`~faceweave.compositing.composite.settle_cheeks`); ``shading``,
    the least share of the target's low-frequency shading (the option's
    ``shading`` when higher).  ``level`` is the number they came from."""

    level: float = ANCHOR
    colour: float = 1.0
    chroma: float = ANCHOR_CHROMA
    lightness: float = 0.0
    lids: float = 1.0
    cheeks: float = 1.0
    shading: float = 0.0

    def __post_init__(self) -> None:
        for name in ("level", "colour", "chroma", "lightness", "lids", "cheeks", "shading"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"skin tone {name} must be in [0, 1]; got {value}")

    def shading_amount(self, asked: float) -> float:
        """The shading share for an option's ``asked`` one: at least :attr:`shading`."""
        return max(float(asked), self.shading)


def skin_tone_steps(level: float) -> SkinTone:
    """The shares for a ``level`` in ``[0, 1]`` (``ValueError`` outside):
    up to :data:`ANCHOR` the colour match, the tint's chroma, the lids and
    the cheeks grow from none to the anchor's; past it the tint's chroma
    grows to all of the target's, its lightness to :data:`FULL_LIGHTNESS`,
    and the least shading share to 1."""
    if not 0.0 <= level <= 1.0:
        raise ValueError(f"skin tone must be in [0, 1]; got {level}")
    below = min(level / ANCHOR, 1.0)
    above = max((level - ANCHOR) / (1.0 - ANCHOR), 0.0)
    return SkinTone(
        level=float(level),
        colour=below,
        chroma=ANCHOR_CHROMA * below + (1.0 - ANCHOR_CHROMA) * above,
        lightness=FULL_LIGHTNESS * above,
        lids=below,
        cheeks=below,
        shading=above,
    )


#: the shares at the default level (frozen; the compositing steps' default)
DEFAULT_SKIN_TONE = SkinTone()
