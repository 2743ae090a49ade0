"""Error-correcting code for the watermark payload: the rate-1/3, constraint-length-7
convolutional code of LTE / 3GPP (generators 133, 171, 165 octal), terminated
with six zero bits, decoded by soft-decision Viterbi.

Pure functions on numpy arrays; 64 payload bits become 210 coded bits.
"""

from __future__ import annotations

import numpy as np

GENERATORS = (0o133, 0o171, 0o165)
MEMORY = 6
STATES = 1 << MEMORY


def _parity(value: int) -> int:
    return (value).bit_count() & 1


#: OUTPUT[state, bit] -> the 3 coded bits (0/1) sent when ``bit`` enters the register in ``state``
_OUTPUT = np.array(
    [[[_parity(((bit << MEMORY) | state) & g) for g in GENERATORS] for bit in (0, 1)] for state in range(STATES)],
    dtype=np.int8,
)
#: for each next state: its two possible previous states, and the input bit that led there
_NEXT = np.arange(STATES)
_PREV = np.stack([((_NEXT & (STATES // 2 - 1)) << 1) | 0, ((_NEXT & (STATES // 2 - 1)) << 1) | 1], axis=1)
_INPUT = _NEXT >> (MEMORY - 1)


def coded_length(n_bits: int) -> int:
    """Number of coded bits for ``n_bits`` message bits (tail included)."""
    return len(GENERATORS) * (n_bits + MEMORY)


def encode(bits: np.ndarray) -> np.ndarray:
    """``(n,)`` 0/1 -> ``(3 (n + 6),)`` uint8 0/1."""
    state, out = 0, []
    for bit in list(np.asarray(bits).reshape(-1).astype(int)) + [0] * MEMORY:
        out.extend(_OUTPUT[state, 1 if bit else 0])
        state = ((1 if bit else 0) << (MEMORY - 1)) | (state >> 1)
    return np.array(out, dtype=np.uint8)


def decode(soft: np.ndarray, n_bits: int) -> np.ndarray:
    """Soft-decision Viterbi: ``soft`` ``(3 (n + 6),)`` (positive means 1) -> ``(n,)`` uint8 0/1.

    Maximises the correlation between ``soft`` and the +-1 form of a codeword
    that starts and ends in the zero state.
    """
    soft = np.asarray(soft, dtype=np.float64).reshape(-1, len(GENERATORS))
    if soft.shape[0] != n_bits + MEMORY:
        raise ValueError(f"expected {coded_length(n_bits)} soft values, got {soft.size}")
    signs = 2.0 * _OUTPUT - 1.0  # (states, 2, 3)
    metric = np.full(STATES, -np.inf)
    metric[0] = 0.0
    choices = np.empty((soft.shape[0], STATES), dtype=np.int8)
    for t, row in enumerate(soft):
        branch = signs @ row  # (states, 2): metric of sending bit b from state s
        cand = metric[_PREV] + branch[_PREV, _INPUT[:, None]]
        pick = np.argmax(cand, axis=1)
        choices[t] = pick
        metric = cand[_NEXT, pick]
    state, bits = 0, []
    for t in range(soft.shape[0] - 1, -1, -1):
        bits.append(_INPUT[state])
        state = _PREV[state, choices[t, state]]
    return np.array(bits[::-1][:n_bits], dtype=np.uint8)
