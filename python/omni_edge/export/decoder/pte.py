"""A text decoder as one ExecuTorch program (XNNPACK): a method per graph of the ONNX route;
int8/int4 projections through torchao's integer GEMMs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from omni_edge.export.decoder.graphs import BodyGraph, DecoderShape, EmbedGraph, HeadGraph, body_example
from omni_edge.export.options import LlmExportOptions


def export_pte(component_dir: Path, model: Any, shape: DecoderShape, opts: LlmExportOptions, caches: list[int],
               progress: tqdm, precision: str = "fp32") -> dict[str, Any]:
    """Writes `component_dir/model.pte`; returns the stage's graph groups for the plan."""
    from omni_edge.export.targets import executorch_target

    C = opts.prefill_chunk
    quantized = precision != "fp32"
    embed = EmbedGraph(model, rows=quantized).eval()
    body = BodyGraph(model, shape, reduce="matmul").eval()
    head = HeadGraph(model, shape, reduce="matmul", linear=quantized).eval()
    if quantized:
        from omni_edge.export.targets.cpu_quant import CPU_PRECISIONS, quantize_linears

        progress.set_postfix_str(f"{precision} weights")
        for module in (body, head):
            quantize_linears(module, CPU_PRECISIONS[precision], opts.block_size)
    methods: dict[str, tuple[torch.nn.Module, tuple[torch.Tensor, ...]]] = {
        "embed_chunk": (embed, (torch.zeros(1, C, dtype=torch.int64),)),
        "embed_step": (embed, (torch.zeros(1, 1, dtype=torch.int64),)),
        "lm_head": (head, (torch.zeros(1, 1, shape.hidden),)),
    }
    for cache in caches:
        methods[f"prefill_s{cache}"] = (body, body_example(shape, C, cache))
        methods[f"decode_s{cache}"] = (body, body_example(shape, 1, cache))
    executorch_target.export_program(methods, component_dir / "model.pte", progress)

    def ref(method: str) -> dict[str, str]:
        return {"file": "model.pte", "method": method}

    groups = {
        "embed": {"chunk": ref("embed_chunk"), "step": ref("embed_step")},
        "prefill": {str(c): ref(f"prefill_s{c}") for c in caches},
        "decode": {str(c): ref(f"decode_s{c}") for c in caches},
        "lm_head": {"step": ref("lm_head")},
    }
    return {role: {"backend": "executorch", "device": "cpu", "graphs": g} for role, g in groups.items()}
