"""The speech graphs as the methods of one ExecuTorch program (XNNPACK)."""

from __future__ import annotations

from pathlib import Path

from tqdm import tqdm

from omni_edge.export.models.qwen3_tts.graphs import graph_jobs
from omni_edge.export.models.qwen3_tts.reference import Qwen3Tts
from omni_edge.export.options import TtsExportOptions


def export_program(model: Qwen3Tts, out: Path, opts: TtsExportOptions) -> dict[str, str]:
    """Every graph as a method of one ExecuTorch program `out/model.pte` (XNNPACK); graph name ->
    method."""
    from omni_edge.export.targets import executorch_target

    jobs = graph_jobs(model, opts, reduce="matmul")
    with tqdm(total=len(jobs), desc="export speech methods", unit="graph", leave=False) as progress:
        executorch_target.export_program({name: (module, example) for name, module, example, _, _ in jobs},
                                         out / "model.pte", progress)
    return {name: name for name, *_ in jobs}
