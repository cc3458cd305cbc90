"""How an output is compared with its reference, wherever the two were computed.

Two implementations of one float model round differently: another backend, another precision,
or the same library on a CPU with other SIMD kernels. Comparisons therefore follow one rule
(README, "Testing"):

- signals (logits, hidden states, PCM) are compared by SQNR or relative error against a limit
  set below what was measured, with the margin stated where the limit is set;
- greedy sequences (token ids; codec codes flattened frame by frame, codebook 0 first, the end
  of speech as one more decision) are equal position by position until they first part. There
  the reference must have been undecided: its own top-2 logit gap below a stated tie gap, or
  the run is wrong. The comparison reports that position. The continuation is then different
  text and is not compared with the reference's; where the reference's logits along the run's
  own path are known (`deficits`: how far below the reference's best each pick of the run
  scored there), every later pick must still be within the tie gap of the best.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

FP32_TIE_GAP = 1e-3
"""Top-2 gap under which an fp32 reference is undecided for another fp32 implementation. Logits
of the exported fp32 graphs differ from transformers' by rounding only (measured: at most
1.7e-5 on the tiny checkpoint, ONNX Runtime CPU); a pick can flip only where the gap is below
twice that, so 1e-3 leaves a margin of 29x."""


def quantized_tie_gap(logit_rms: float, sqnr_db: float, sigmas: float = 4.0) -> float:
    """The tie gap for a run whose logits carry noise measured at `sqnr_db` against the reference:
    the noise on one logit has RMS logit_rms * 10^(-sqnr/20), on the difference of two sqrt(2)
    times that, and a gap of `sigmas` times the latter flips about as rarely as a 4-sigma event."""
    return float(sigmas * math.sqrt(2.0) * logit_rms * 10.0 ** (-sqnr_db / 20.0))


def sqnr_db(reference: np.ndarray, got: np.ndarray) -> float:
    """Signal-to-quantization-noise ratio of `got` against `reference`, in dB (200 when equal)."""
    ref = np.asarray(reference, np.float64)
    noise = float(np.sum((ref - np.asarray(got, np.float64)) ** 2))
    signal = float(np.sum(ref ** 2))
    return 200.0 if noise == 0 else 10.0 * math.log10(max(signal, 1e-300) / noise)


def top2_gap(logits: np.ndarray) -> float:
    """The best logit minus the second best (inf when only one id is allowed)."""
    flat = np.asarray(logits, np.float64).ravel()
    if flat.size < 2:
        return math.inf
    top = np.partition(flat, -2)[-2:]
    return float(top[1] - top[0]) if np.isfinite(top[0]) else math.inf


def flatten_codes(codes: np.ndarray | Sequence[Sequence[int]], ended: bool, eos: int) -> list[int]:
    """A run's frames as its sequence of decisions: each frame's codes in order, then `eos` when
    the run ended by choosing end of speech (before its frame limit)."""
    flat: list[int] = np.asarray(codes, np.int64).ravel().tolist()
    return [*flat, eos] if ended else flat


@dataclass(frozen=True)
class Agreement:
    """The outcome of `compare_greedy`."""

    length: int                       # positions of the run
    first_divergence: int | None      # where the run first picked another id (None: never)
    gap_there: float | None           # the reference's top-2 gap at that position
    decisive_mismatch: int | None     # a position where the run clearly did not pick the reference's id
    checked: int                      # positions verified (all, when deficits covered the continuation)

    @property
    def passed(self) -> bool:
        return self.decisive_mismatch is None

    def describe(self) -> str:
        if self.first_divergence is None:
            return f"all {self.length} positions equal"
        where = f"parted at position {self.first_divergence} of {self.length} (reference top-2 gap {self.gap_there:.3g})"
        if self.decisive_mismatch is not None:
            return f"{where}; wrong at position {self.decisive_mismatch}"
        return f"{where}, a near tie; {self.checked} positions verified"


def compare_greedy(got: Sequence[int], reference: Sequence[int], reference_gaps: Sequence[float], tie_gap: float,
                   deficits: Sequence[float] | None = None) -> Agreement:
    """`got` (a free run) against `reference` (the reference's own greedy run) with the reference's
    top-2 gap at each of its positions, by the rule of this module; `deficits[i]` (optional) is
    the reference's best logit minus its logit for got[i], evaluated along got's own path."""
    n = len(got)
    part = next((i for i, (a, b) in enumerate(zip(got, reference, strict=False)) if a != b), None)
    if part is None and len(got) != len(reference):
        part = min(len(got), len(reference))  # one ended where the other went on
    if part is None:
        return Agreement(n, None, None, None, n)
    gap = float(reference_gaps[part]) if part < len(reference_gaps) else math.inf
    if gap >= tie_gap:
        return Agreement(n, part, gap, min(part, n), part)
    if deficits is None:
        return Agreement(n, part, gap, None, part)
    if len(deficits) < len(got):
        raise ValueError(f"{len(deficits)} deficits for a run of {len(got)}")
    wrong = next((i for i in range(part, len(got)) if deficits[i] > tie_gap), None)
    return Agreement(n, part, gap, wrong, len(got) if wrong is None else wrong)
