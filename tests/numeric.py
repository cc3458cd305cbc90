"""The rule every numeric test follows, wherever CI runs (README, "Testing"):

1. A reference computed in the same run by the same code path may be compared exactly (a
   session's second run against its first, the native CLI against the binding on one plan).
2. Committed fixtures, other backends and other precisions are compared by a tolerance derived
   from the signal: SQNR or relative error, with a limit set below the measured value and the
   margin stated beside the limit.
3. Free-running greedy sequences (token ids, codec codes) are compared by
   `comparison.compare_greedy`: equal until they first part; there the reference's own top-2
   gap must be under the tie gap (`FP32_TIE_GAP` for float graphs, `quantized_tie_gap` from the
   measured SQNR for quantized ones), and the position is reported as a warning; later picks
   must be within the tie gap of the reference's best along the run's own path wherever the
   reference can be evaluated there.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from llm_reference import deficits_along, greedy_reference
from omni_edge.export.comparison import FP32_TIE_GAP, Agreement, compare_greedy, sqnr_db

__all__ = ["FP32_TIE_GAP", "assert_codes", "assert_greedy", "assert_sqnr", "sqnr_db"]


def assert_sqnr(reference: Any, got: Any, min_db: float, what: str = "") -> float:
    """SQNR of `got` against `reference` at least `min_db` (rule 2); returns it."""
    got_db = sqnr_db(np.asarray(reference), np.asarray(got))
    assert got_db >= min_db, f"{what}: SQNR {got_db:.1f} dB < {min_db} dB"
    return got_db


class NearTie(UserWarning):
    """A free run parted from its reference at a near tie (rule 3): reported, not a failure."""


def _checked(agreement: Agreement, what: str, min_checked: int) -> Agreement:
    assert agreement.passed, f"{what}: {agreement.describe()}"
    assert agreement.checked >= min_checked, f"{what}: only {agreement.checked} positions checked: {agreement.describe()}"
    if agreement.first_divergence is not None:
        warnings.warn(f"{what}: {agreement.describe()}", NearTie, stacklevel=3)
    return agreement


def assert_greedy(got: list[int], model: Path | Any, prompt_ids: list[int], what: str = "greedy ids",
                  tie_gap: float = FP32_TIE_GAP, min_checked: int | None = None) -> Agreement:
    """A run's greedy ids against transformers' `model` (a checkpoint or a loaded model) after
    `prompt_ids` (rule 3); the continuation after a near tie is checked along the run's path, so
    by default every position must be verified."""
    reference = greedy_reference(model, prompt_ids, len(got))
    agreement = compare_greedy(got, reference.ids, reference.gaps, tie_gap, deficits_along(model, prompt_ids, got))
    return _checked(agreement, what, len(got) if min_checked is None else min_checked)


def assert_codes(got: Any, run_reference: Callable[[Any], Any], max_frames: int, eos: int,
                 what: str = "codes", expected: Any = None, tie_gap: float = FP32_TIE_GAP) -> Agreement:
    """A run's codes [T, 16] against the PyTorch reference (rule 3): `qwen3_tts.compare_codes`
    with `run_reference(trace)` running the reference for at most `max_frames` frames, and
    `expected` the codes a reference wrote before (a committed fixture) or None for its own
    greedy run. Every decision must be verified."""
    from omni_edge.export.models.qwen3_tts.reference import compare_codes

    agreement, _ = compare_codes(run_reference, got, max_frames, eos, tie_gap, expected)
    return _checked(agreement, what, agreement.length)
