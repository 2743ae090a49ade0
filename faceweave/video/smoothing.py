"""Temporal smoothing of landmarks: the One Euro filter (Casiez et al.,
CHI 2012), vectorised over any array shape.  It smooths strongly while a
value is still (no jitter) and follows quickly when it moves (little lag)."""

from __future__ import annotations

import math

import numpy as np


def _alpha(cutoff: np.ndarray | float, dt: float) -> np.ndarray | float:
    tau = 1.0 / (2.0 * math.pi * np.asarray(cutoff))
    return 1.0 / (1.0 + tau / dt)


class OneEuroFilter:
    """One Euro filter over arrays of a fixed shape.

    ``min_cutoff`` (Hz) sets the smoothing of a still value; ``beta`` how
    fast the cutoff rises with speed; ``d_cutoff`` (Hz) smooths the speed
    estimate.  Values are in the caller's units (pixels here), so ``beta`` is
    per pixel per second.  The filter holds the last state; :meth:`reset`
    forgets it (at a scene cut or a new face)."""

    def __init__(self, *, min_cutoff: float = 1.0, beta: float = 0.05, d_cutoff: float = 1.0) -> None:
        self.min_cutoff = min_cutoff
        self.beta = beta
        self.d_cutoff = d_cutoff
        self._x: np.ndarray | None = None
        self._dx: np.ndarray | None = None
        self._t: float | None = None

    def reset(self) -> None:
        self._x = self._dx = None
        self._t = None

    def __call__(self, x: np.ndarray, t: float) -> np.ndarray:
        """The filtered value of ``x`` observed at time ``t`` (seconds)."""
        x = np.asarray(x, np.float64)
        if self._x is None or self._dx is None or self._t is None or t <= self._t or self._x.shape != x.shape:
            self._x, self._dx, self._t = x.copy(), np.zeros_like(x), t
            return x.astype(np.float32)
        dt = t - self._t
        dx = (x - self._x) / dt
        a_d = _alpha(self.d_cutoff, dt)
        dx_hat = a_d * dx + (1.0 - a_d) * self._dx
        cutoff = self.min_cutoff + self.beta * np.abs(dx_hat)
        a = _alpha(cutoff, dt)
        x_hat = a * x + (1.0 - a) * self._x
        self._x, self._dx, self._t = x_hat, dx_hat, t
        return x_hat.astype(np.float32)
