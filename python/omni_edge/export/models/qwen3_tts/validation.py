"""What a speech artifact is checked against and held to: the PyTorch reference's codes (to a
near tie), its PCM (SQNR, max difference) and per-graph SQNR; teacher-forced agreements for the
quantized routes; the reports."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from omni_edge.contracts import ReportCheck, ValidationReport
from omni_edge.export.comparison import FP32_TIE_GAP, Agreement, sqnr_db
from omni_edge.export.models.qwen3_tts.reference import (
    CODE_GROUPS,
    SAMPLES_PER_FRAME,
    Qwen3Tts,
    compare_codes,
    decode_streaming,
    generate_codes,
)
from omni_edge.export.models.qwen3_tts.runner import GraphRunner, validation_sampling
from omni_edge.export.options import TtsExportOptions


def _compare(model: Qwen3Tts, got: np.ndarray, ref: np.ndarray, agreement: Agreement, pcm: np.ndarray,
             opts: TtsExportOptions, ends: list[int] | None = None) -> dict[str, float]:
    """Codes `got` against the reference's `ref` (`agreement`: by the near-tie rule of
    `comparison`); `pcm` (streamed from `got`, in the chunks ending at `ends` or the ones the
    stream shape cuts) against the PyTorch streaming decode of the same codes and chunks."""
    n = min(len(got), len(ref))
    agree = float((got[:n] == ref[:n]).all(axis=1).mean()) if n else 0.0
    codes = torch.from_numpy(got)
    ref_pcm = torch.cat(decode_streaming(model, codes, opts.stream, ends)).numpy() if len(got) else pcm
    err = pcm - ref_pcm if pcm.shape == ref_pcm.shape else np.full(1, np.inf, np.float32)
    return {"frames": float(len(got)), "reference_frames": float(len(ref)), "frame_agreement": agree,
            "codes_agree_to_near_tie": float(agreement.passed), "codes_verified": float(agreement.checked),
            "pcm_sqnr_db": sqnr_db(ref_pcm, pcm) if pcm.shape == ref_pcm.shape else -math.inf,
            "pcm_max_abs_diff": float(np.abs(err).max()),
            "samples_match": float(pcm.shape[0] == got.shape[0] * SAMPLES_PER_FRAME)}


def _reference_codes(model: Qwen3Tts, text_ids: list[int], got: np.ndarray, frames: int,
                     expected: np.ndarray | None = None) -> tuple[Agreement, np.ndarray]:
    """The validation run's codes `got` against the PyTorch reference (greedy, as validation
    decodes), by the near-tie rule for fp32 graphs."""
    greedy = validation_sampling(model)
    return compare_codes(lambda trace: generate_codes(model, text_ids, frames, greedy, trace), got, frames,
                         model.ids.eos, FP32_TIE_GAP, expected)


def forced_agreement(runner: GraphRunner, text_ids: list[int], ref: np.ndarray) -> dict[str, float]:
    """Teacher-forced agreement of `runner`'s graphs with the reference codes `ref` [T, 16]."""
    if not len(ref):
        return {k: 0.0 for k in FORCED_AGREEMENTS}
    pred = runner.codes(text_ids, 0, forced=ref)
    return {"forced_codebook0_agreement": float((pred[:, 0] == ref[:, 0]).mean()),
            "forced_predictor_agreement": float((pred[:, 1:] == ref[:, 1:]).mean())}


def validate_graphs(model: Qwen3Tts, directory: Path, files: dict[str, str], opts: TtsExportOptions,
                    text_ids: list[int]) -> dict[str, float]:
    """Greedy codes of `validation_frames` frames through the ONNX graphs (driven from Python)
    vs PyTorch, and the streamed PCM of those codes."""
    runner = GraphRunner(model, directory, files, opts)
    got = runner.codes(text_ids, opts.validation_frames)
    agreement, ref = _reference_codes(model, text_ids, got, opts.validation_frames)
    pcm = np.concatenate(runner.pcm(got)) if len(got) else np.zeros(0, np.float32)
    return {**_compare(model, got, ref, agreement, pcm, opts), **runner.window_sqnr()}


def validate_native(model: Qwen3Tts, plan: Path, opts: TtsExportOptions, text_ids: list[int],
                    reference: np.ndarray | None = None) -> dict[str, float]:
    """The same checks through the native speech chain on `plan` (its artifact's manifest may
    not be qualified yet), against `reference` codes (PyTorch's greedy codes by default)."""
    from omni_edge.runtime import SpeechSession

    session = SpeechSession.open(plan, allow_unqualified=True, threads=opts.threads)
    greedy = validation_sampling(model)
    utterance = session.speak(text_ids=text_ids, max_frames=opts.validation_frames, sampling=greedy)
    got = np.array(session.codes(), np.int64).reshape(-1, CODE_GROUPS)
    agreement, ref = _reference_codes(model, text_ids, got, opts.validation_frames, reference)
    ends = [int(e["frames_final"]) for e in utterance.events if e["kind"] == "pcm"]  # where its schedule cut
    return _compare(model, got, ref, agreement, utterance.pcm, opts, ends)


# Limits of the fp32 graphs against PyTorch: the greedy codes are PyTorch's up to near ties
# (`comparison`: equal until a near tie, then each code within the tie gap of PyTorch's best
# along the run's own path); PCM equal to float32 rounding (measured 126 dB, max 3e-7 on the
# tiny checkpoint).
LIMITS = {"codes_agree_to_near_tie": 1.0, "pcm_sqnr_db": 80.0, "pcm_max_abs_diff": 1e-4, "graph_sqnr_db": 80.0}


# int8 / int4 weights on the CPU: like the NPU's quantized precisions, the free run is not held to
# the reference (a random talker's logits are close; one flipped code changes every later one);
# the teacher-forced agreements say whether the quantized talker and predictor compute the same
# function, and the vocoder (float32) keeps the PCM exact for the codes it is given.
SPEECH_CPU_LIMITS: dict[str, dict[str, float]] = {
    "int8": {"forced_codebook0_agreement": 0.8, "forced_predictor_agreement": 0.8,
             "graph_sqnr_db": 80.0, "pcm_sqnr_db": 80.0, "pcm_max_abs_diff": 1e-4},
    "int4": {"forced_codebook0_agreement": 0.5, "forced_predictor_agreement": 0.5,
             "graph_sqnr_db": 80.0, "pcm_sqnr_db": 80.0, "pcm_max_abs_diff": 1e-4},
}


# Teacher-forced agreement with the reference codes: codebook 0 (the talker) and codebooks 1..15
# (the code predictor), each predicted from the reference's codes before it.
FORCED_AGREEMENTS = ("forced_codebook0_agreement", "forced_predictor_agreement")


def reports(identity: dict[str, str], got: dict[str, float] | None,
             limits: dict[str, float] = LIMITS) -> tuple[ValidationReport, ValidationReport]:
    """The numerical report (PCM, and each graph's SQNR where measured) and the task report
    (codes: the free run against the reference where `limits` holds it, and the teacher-forced
    agreements where measured)."""
    def report(kind: str, checks: tuple[ReportCheck, ...]) -> ValidationReport:
        return ValidationReport(kind, identity["checkpoint_id"], identity["checkpoint_revision"], identity["precision"],
                                identity["shape_bucket"], identity["target_abi"], checks)

    if got is None:  # --no-validate: reports that say so and fail
        skipped = (ReportCheck("validation_run", 0.0, 1.0, ">="),)
        return report("numerical", skipped), report("task", skipped)
    graphs = tuple(ReportCheck(k, v, limits["graph_sqnr_db"], ">=") for k, v in sorted(got.items())
                   if k.startswith("graph_sqnr_db."))
    forced = tuple(ReportCheck(k, got[k], limits[k], ">=") for k in FORCED_AGREEMENTS if k in got)
    numerical = report("numerical", (
        ReportCheck("pcm_sqnr_db", got["pcm_sqnr_db"], limits["pcm_sqnr_db"], ">="),
        ReportCheck("pcm_max_abs_diff", got["pcm_max_abs_diff"], limits["pcm_max_abs_diff"], "<="), *graphs))
    # The free run is held to the reference only where the limits say so (fp32); the share of
    # frames equal and the decisions verified are reported beside it.
    free = ((ReportCheck("codes_agree_to_near_tie", got["codes_agree_to_near_tie"], limits["codes_agree_to_near_tie"], ">="),
             ReportCheck("codes_verified", got["codes_verified"], 0.0, ">="),
             ReportCheck("frame_agreement", got["frame_agreement"], 0.0, ">="))
            if "codes_agree_to_near_tie" in limits else ())
    task = report("task", (*free, ReportCheck("samples_exact", got["samples_match"], 1.0, ">="), *forced))
    return numerical, task


def validate_quantized(model: Qwen3Tts, plan: Path, directory: Path, files: dict[str, str], opts: TtsExportOptions,
                       text_ids: list[int]) -> dict[str, float]:
    """The native speech chain's free run against PyTorch (its agreement reported, not held) and
    its PCM, each vocoder window, and the teacher-forced agreements of the quantized graphs with
    PyTorch's greedy codes."""
    runner = GraphRunner(model, directory, files, opts)
    reference = generate_codes(model, text_ids, opts.validation_frames, validation_sampling(model)).numpy()
    got = validate_native(model, plan, opts, text_ids, reference)
    return {**got, **runner.window_sqnr(), **forced_agreement(runner, text_ids, reference)}
