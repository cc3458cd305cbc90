"""`omni-edge export llm` for a Qwen3.5 hybrid checkpoint: the shared text decoder's routes with
the linear layers' states as graph inputs and outputs, transformers' model as the reference."""

from __future__ import annotations

from pathlib import Path

from omni_edge.export.decoder.causal_lm import export_causal_lm
from omni_edge.export.models.qwen3_5.reference import MODEL_TYPES
from omni_edge.export.options import LlmExportOptions


def export(checkpoint: Path, out: Path, opts: LlmExportOptions) -> list[Path]:
    """Every requested format; the plans (the first is also OUT/plan.json)."""
    return export_causal_lm(checkpoint, out, opts, MODEL_TYPES)
