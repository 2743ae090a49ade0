"""A track's face plan carried from frame to frame: plan once per track,
apply per frame.

The slow part of a face's compositing (:class:`~faceweave.compositing.values.FacePlan`:
the masks that follow the mesh, such as its skin, the fade of the forehead,
the features, the beard and the slow part of the occlusion test, and the
colour's target shading, skin tint and lids) depends on the face's place in
its working crop and on its looks and light, which change slowly along a
track.  The frame that makes a
plan and the frames that reuse it are decided in frame order, on the
planning thread (:class:`PlanPolicy`, from the target's mesh in its crop,
so the decision and the output do not depend on which render thread runs
first); the plan itself is made by the first frame's render, on a render
thread, and handed to the later frames' renders through a :class:`PlanSlot`.

What changes from frame to frame stays per frame: the mouth and the lips,
the swapper's coverage, what is in front of the face (hands, hair, objects:
the occlusion test's pixels), the whites of the eyes, the colour match and
the blend."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

import numpy as np

from faceweave.compositing.blend import DetailPlan
from faceweave.compositing.values import FacePlan

#: how long a reusing render waits for the plan of its track's earlier
#: frame (seconds) before it makes its own; the earlier frame started
#: first, so the wait only ends this way when that render failed
SLOT_WAIT_S = 30.0


class PlanSlot:
    """One face plan handed from the render of the frame that makes it to
    the renders of the later frames that reuse it (threads: one puts, any
    number get), in two parts as the making render has them: the masks and
    the tone once it has composited (:meth:`put`, :meth:`get`), then how
    its detail is matched once it has pasted (:meth:`put_detail`,
    :meth:`get_detail`).  A reusing render starts its own compositing as
    soon as the first part is there, rather than waiting for the whole
    render of the earlier frame; what it gets is the same either way."""

    def __init__(self, frame: int) -> None:
        #: the index of the frame that makes the plan
        self.frame = frame
        self._ready = threading.Event()
        self._detail_ready = threading.Event()
        self._plan: FacePlan | None = None
        self._detail: DetailPlan | None = None

    def put(self, plan: FacePlan | None) -> None:
        """Hand over the plan's masks and tone (``None``: the making render
        failed, so the later frames make their own, their detail plan too)."""
        self._plan = plan
        self._ready.set()
        if plan is None:
            self.put_detail(None)

    def put_detail(self, detail: DetailPlan | None) -> None:
        """Hand over how the detail is matched (``None``: measured by each later frame)."""
        if not self._detail_ready.is_set():
            self._detail = detail
            self._detail_ready.set()

    def give_up(self) -> None:
        """The making render failed: the parts not handed over yet are
        ``None`` (the later frames make their own), those handed over stay."""
        if not self._ready.is_set():
            self._ready.set()
        self.put_detail(None)

    def get(self, timeout: float = SLOT_WAIT_S) -> FacePlan | None:
        """The plan's masks and tone once made (waiting for them), or
        ``None`` when it failed or did not come within ``timeout`` seconds."""
        return self._plan if self._ready.wait(timeout) else None

    def get_detail(self, timeout: float = SLOT_WAIT_S) -> DetailPlan | None:
        """How the detail is matched once the making render has pasted
        (waiting for it), or ``None`` when it failed or did not come in time."""
        return self._detail if self._detail_ready.wait(timeout) else None


@dataclass(frozen=True, eq=False)
class PlanUse:
    """What one face of a frame does with its track's face plan: make it
    into ``slot`` (``makes``), or reuse what ``slot`` gets."""

    slot: PlanSlot
    makes: bool


def crop_layout(mesh: np.ndarray, matrix: np.ndarray, face_size: float) -> np.ndarray:
    """``(N, 2)`` float32: the face's mesh ``(N, 2+)`` (frame pixels) in its
    working crop (``matrix``: frame -> crop), in units of the face size."""
    points = np.asarray(mesh, np.float64)[:, :2]
    m = np.asarray(matrix, np.float64)
    return ((points @ m[:, :2].T + m[:, 2]) / float(face_size)).astype(np.float32)


def layout_drift(a: np.ndarray, b: np.ndarray) -> float:
    """The root-mean-square distance between two :func:`crop_layout` s (face sizes)."""
    return float(np.sqrt(np.mean(np.sum((np.asarray(a) - np.asarray(b)) ** 2, axis=1))))


@dataclass(frozen=True)
class HeldPlan:
    """A track's current plan as the planner sees it: made by frame
    ``frame`` for ``source``, with the face laid out as ``layout``
    (:func:`crop_layout`) in a crop of face size ``face_size``, under the
    target skin colour ``light`` (CIELAB mean); ``uses``: the frames that
    have used it so far (the one that made it included).  Frames are
    counted as planned, not as read: a live stream that drops frames keeps
    a plan as many of its rendered frames as a file does."""

    slot: PlanSlot
    frame: int
    source: object
    layout: np.ndarray
    face_size: int
    light: np.ndarray
    uses: int = 1


@dataclass(frozen=True)
class PlanPolicy:
    """When a track's face plan is made anew: after ``every`` frames have
    used it at the latest (1: every frame, no reuse), and sooner when the face moved in
    its crop by more than ``drift`` of the face size (root mean square over
    the mesh: it turned, tilted or changed expression), when its crop's
    face size changed (the grids differ), when its source changed, or when
    the target's skin colour moved by more than ``light`` (ΔE: the light
    changed)."""

    every: int = 6
    drift: float = 0.01
    light: float = 1.5

    def __post_init__(self) -> None:
        if self.every < 1 or self.drift < 0 or self.light < 0:
            raise ValueError(f"plan policy: every >= 1, drift >= 0 and light >= 0; got {self}")

    def renews(self, held: HeldPlan | None, now: HeldPlan) -> bool:
        """Whether the frame that would make ``now`` makes a new plan rather
        than reuse ``held``."""
        if held is None or self.every == 1:
            return True
        return (
            held.uses >= self.every
            or held.source is not now.source
            or held.face_size != now.face_size
            or layout_drift(held.layout, now.layout) > self.drift
            or float(np.linalg.norm(now.light - held.light)) > self.light
        )

    def use(
        self,
        held: HeldPlan | None,
        *,
        frame: int,
        source: object,
        layout: np.ndarray,
        face_size: int,
        light: np.ndarray,
    ) -> tuple[PlanUse, HeldPlan]:
        """This frame's use of the track's plan, and the plan held after it."""
        now = HeldPlan(PlanSlot(frame), frame, source, layout, face_size, np.asarray(light, np.float64))
        if held is not None and not self.renews(held, now):
            return PlanUse(held.slot, makes=False), replace(held, uses=held.uses + 1)
        return PlanUse(now.slot, makes=True), now
