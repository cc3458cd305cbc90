"""A text decoder as ONNX graphs: embedding (chunk and step), prefill and decode bodies per
cache size, the LM head; weights shared in one file; int8/int4 projections as MatMulNBits. CPU
bodies of a full cache attend with ONNX Runtime's fused GroupQueryAttention over the valid slots
(`decoder.plan.fused_attention`); the HTP's and a ring's keep the masked attention."""

from __future__ import annotations

from typing import Any

import torch
from tqdm import tqdm

from omni_edge.export.decoder.graphs import (
    BodyGraph,
    DecoderShape,
    EmbedGraph,
    FusedBodyGraph,
    HeadGraph,
    body_example,
    body_io_names,
    fused_body_io_names,
)
from omni_edge.export.decoder.plan import fused_attention
from omni_edge.export.options import LlmExportOptions
from omni_edge.export.targets import onnx_target


def export_onnx(component_dir: Any, model: Any, shape: DecoderShape, opts: LlmExportOptions, caches: list[int],
                progress: tqdm, rope_table: int = 0, precision: str = "fp32") -> dict[str, Any]:
    """Writes the graphs into `component_dir`; returns the stage's graph groups for the plan."""
    C = opts.prefill_chunk
    # ONNX Runtime's CPU kernels fuse the "fused" norm pattern (one kernel instead of six per norm:
    # 285 -> ~200 nodes a body); the HTP's converter takes the ReduceMean form, and in fp16 the
    # scaled one (squares of a real model's residual rows overflow fp16).
    norm = "fused" if opts.target == "cpu" else "scaled" if opts.precision == "fp16" else "mean"
    embed, head = EmbedGraph(model, rows=precision != "fp32").eval(), HeadGraph(model, shape, reduce=norm).eval()
    fused = fused_attention(opts)
    # Plain RoPE: the fused kernel rotates at the slot positions from tables of the bucket's size.
    rotary_inside = fused and not shape.mrope_section and not shape.rotary_dim
    body = (FusedBodyGraph(model, shape, reduce=norm, cache=caches[0] if rotary_inside else 0) if fused
            else BodyGraph(model, shape, reduce=norm, rope_table=rope_table, htp=opts.target == "qnn-htp")).eval()
    files: list[str] = []

    def graph(module: torch.nn.Module, example: tuple[torch.Tensor, ...], ins: list[str], outs: list[str], name: str) -> str:
        progress.set_postfix_str(name)
        onnx_target.export_graph(module, example, ins, outs, component_dir / name)
        files.append(name)
        progress.update()
        return name


    def io_names(chunk: bool) -> tuple[list[str], list[str]]:
        a, r = shape.attention_layers, shape.linear_layers
        return fused_body_io_names(a, rotary_inside, r, chunk) if fused else body_io_names(a, r, chunk)
    groups: dict[str, Any] = {
        "embed": {"chunk": graph(embed, (torch.zeros(1, C, dtype=torch.int64),), ["input_ids"], ["hidden"], f"embed_n{C}.onnx"),
                  "step": graph(embed, (torch.zeros(1, 1, dtype=torch.int64),), ["input_ids"], ["hidden"], "embed_n1.onnx")},
        "prefill": {}, "decode": {},
        "lm_head": {"step": graph(head, (torch.zeros(1, 1, shape.hidden),), ["hidden"], ["logits"], "lm_head.onnx")},
    }
    for cache in caches:
        if isinstance(body, FusedBodyGraph) and body.rotary_inside:
            body.set_slots(cache)
        for role, n in (("prefill", C), ("decode", 1)):
            groups[role][str(cache)] = graph(body, body_example(shape, n, cache, fused, rotary_inside),
                                             *io_names(role == "prefill"), f"{role}_s{cache}.onnx")
    if precision != "fp32":
        from omni_edge.export.targets.cpu_quant import CPU_PRECISIONS, quantize_graph

        done: dict[bytes, Any] = {}
        for name in files:
            if not name.startswith("embed_"):  # the embedding gathers one float32 row per token
                progress.set_postfix_str(f"{precision} {name}")
                quantize_graph(component_dir / name, CPU_PRECISIONS[precision], opts.block_size, done)
    progress.set_postfix_str("sharing weights")
    onnx_target.share_weights(component_dir, files)
    plan = {role: {"backend": "onnxruntime", "device": "cpu", "graphs": g} for role, g in groups.items()}
    if precision == "fp32":
        # One matrix-vector product per token: MLAS's plain GEMV over the [hidden, vocab] weight beats
        # its prepacked GEMM (28.5 vs 37 ms for a 151936-token head here), and skipping the packed
        # copy saves its memory. Prefill bodies keep prepacking (41 vs 62 ms per 32-token chunk).
        # Quantized heads keep it: MatMulNBits' integer kernels read the packed blocks.
        plan["lm_head"]["options"] = {"ort.session.disable_prepacking": "1"}
    return plan
