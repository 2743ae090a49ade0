"""Which steps a face's render runs for one kind of output
(:class:`RenderProfile`), resolved once from the options.

A photo is rendered once and may take its time: its new face is looked at
and its expression corrected, the frame itself is warped at its own
resolution, and its detail is refined in one pass (grain, blur, sharpness,
texture).  A video or a live stream keeps its frame rate and must not
change from frame to frame where the picture does not: no expression check
and no sharpening, the reshaped crop pasted, grain and blur matched, and
(by default) the target's own lips and the creases beside them kept, so
the mouth follows the speech.  Frames of a video or a stream reuse their
track's face plan (:mod:`faceweave.compositing.plans`); a photo makes its
plan and applies it at once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from faceweave.options import MaskOptions

#: the kinds of output a face is rendered for
RenderKind = Literal["photo", "video", "live"]
KINDS: tuple[RenderKind, ...] = ("photo", "video", "live")


@dataclass(frozen=True)
class RenderProfile:
    """The steps of one kind of output: ``expression_check`` (the new face
    looked at and corrected, when the options ask for it), ``warp_frame``
    (the frame warped by the reshaping at its own resolution, rather than
    the reshaped crop pasted), ``photo_detail`` (grain, blur, sharpness and
    texture refined in one pass, rather than grain and blur matched),
    ``target_lips`` (the target's own lips kept, ``MaskOptions.target_lips``)
    and ``folds`` (the target's creases along the nasolabial folds kept)."""

    kind: RenderKind
    expression_check: bool
    warp_frame: bool
    photo_detail: bool
    target_lips: bool
    folds: bool

    @classmethod
    def resolve(cls, kind: RenderKind, masks: MaskOptions) -> RenderProfile:
        """The profile of ``kind`` under ``masks``."""
        still = kind == "photo"
        lips = masks.target_lips == "always" or (masks.target_lips == "video" and not still)
        # the folds follow the mouth: kept with the target's lips (in a photo
        # the mouth is the source's, and its folds carry much of the likeness)
        return cls(
            kind=kind, expression_check=still, warp_frame=still, photo_detail=still, target_lips=lips, folds=lips
        )


def resolve_profiles(masks: MaskOptions) -> dict[RenderKind, RenderProfile]:
    """Every kind's profile under ``masks``."""
    return {kind: RenderProfile.resolve(kind, masks) for kind in KINDS}
