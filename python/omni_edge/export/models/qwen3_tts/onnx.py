"""The speech graphs as ONNX Runtime graphs, weights shared in one file; at int8/int4 the
talker's and the code predictor's projections read MatMulNBits blocks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tqdm import tqdm

from omni_edge.export.models.qwen3_tts.graphs import graph_jobs
from omni_edge.export.models.qwen3_tts.reference import Qwen3Tts
from omni_edge.export.options import TtsExportOptions
from omni_edge.export.targets import onnx_target

# The graphs whose projections int8/int4 quantize (embeddings and the vocoder stay float32).
QUANTIZED_GRAPHS = ("talker_prefill", "talker_decode", "talker_head", "predictor_decode", "predictor_head")


def export_graphs(model: Qwen3Tts, out: Path, opts: TtsExportOptions) -> dict[str, str]:
    """Every graph as ONNX into `out`, weights shared in one file; graph name -> file. At int8 /
    int4 the talker's and the code predictor's projections (bodies and heads) read blocks
    (`cpu_quant`); embeddings and the vocoder stay float32."""
    files: dict[str, str] = {}
    for name, module, example, ins, outs in tqdm(graph_jobs(model, opts), desc="export speech graphs", unit="graph",
                                                 leave=False):
        onnx_target.export_graph(module, example, ins, outs, out / f"{name}.onnx")
        files[name] = f"{name}.onnx"
    if opts.precision != "fp32":
        from omni_edge.export.targets.cpu_quant import CPU_PRECISIONS, quantize_graph

        done: dict[bytes, Any] = {}
        for name, file in files.items():
            if name.startswith(QUANTIZED_GRAPHS):
                quantize_graph(out / file, CPU_PRECISIONS[opts.precision], opts.block_size, done)
    onnx_target.share_weights(out, list(files.values()))
    return files
