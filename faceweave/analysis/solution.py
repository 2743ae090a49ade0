"""One run of a mediapipe solution graph on one RGB image, made cheaper.

``SolutionBase.process`` (mediapipe 0.10) builds a new ``namedtuple`` type
on every call to hold its outputs: about 0.7 ms with the interpreter lock
held, once per face and frame in a video (where the face mesh itself takes
about 2 ms, on mediapipe's own threads).  :func:`run_image` does the rest of
what ``process`` does for a graph with one image input (the same packet,
the same simulated 30 fps time stamps, the same output conversion) and
returns the outputs as a :class:`types.SimpleNamespace` with the same
attribute names.  It uses the solution's documented-by-code internals of the
mediapipe release the project pins; a graph without them (another release)
runs through its own ``process``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

#: ``SolutionBase.process``'s time step: a 30 fps video's, in microseconds
TIME_STEP_US = 33333
#: the solution's attributes :func:`run_image` relies on
_INTERNALS = (
    "_graph",
    "_graph_outputs",
    "_input_stream_type_info",
    "_output_stream_type_info",
    "_simulated_timestamp",
    "_make_packet",
    "_get_packet_content",
)


def has_internals(solution: Any) -> bool:
    """Whether ``solution`` looks like the pinned mediapipe's ``SolutionBase``
    with exactly one input stream (what :func:`run_image` can drive)."""
    if not all(hasattr(solution, name) for name in _INTERNALS):
        return False
    inputs = solution._input_stream_type_info
    return solution._graph is not None and inputs is not None and len(inputs) == 1


def run_image(solution: Any, image: np.ndarray) -> Any:
    """``solution.process(image)`` for an ``(H, W, 3)`` uint8 RGB image: the
    graph's outputs by stream name (``None`` for a stream with no packet)."""
    if not has_internals(solution):
        return solution.process(image)
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError("Input image must contain three channel rgb data.")
    ((stream, kind),) = solution._input_stream_type_info.items()
    solution._graph_outputs.clear()
    solution._simulated_timestamp += TIME_STEP_US
    packet = solution._make_packet(kind, image).at(solution._simulated_timestamp)
    solution._graph.add_packet_to_input_stream(stream=stream, packet=packet)
    solution._graph.wait_until_idle()
    outputs = solution._graph_outputs
    contents = {
        name: solution._get_packet_content(kind, outputs[name]) if name in outputs else None
        for name, kind in solution._output_stream_type_info.items()
    }
    return SimpleNamespace(**contents)
