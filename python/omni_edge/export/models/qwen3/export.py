"""`omni-edge export llm` for a Qwen3 checkpoint: the shared text decoder's routes (ONNX Runtime,
ExecuTorch, QNN HTP per SoC) with transformers' model as the reference."""

from __future__ import annotations

from pathlib import Path

from omni_edge.export.decoder.export import checked, export_decoder_lm
from omni_edge.export.models.qwen3.reference import load_causal_lm
from omni_edge.export.options import LlmExportOptions


def export(checkpoint: Path, out: Path, opts: LlmExportOptions) -> list[Path]:
    """Every requested format; the plans (the first is also OUT/plan.json)."""
    opts = checked(opts)  # refuse before the model loads
    return export_decoder_lm(load_causal_lm(checkpoint), checkpoint, out, opts)
