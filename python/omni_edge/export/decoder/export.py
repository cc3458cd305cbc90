"""`omni-edge export llm` for a text decoder (Qwen3 today): per-stage, static-shape graphs per
context bucket (embedding, prefill AR-N, decode AR-1, LM head) for ONNX Runtime and/or
ExecuTorch, or QNN context binaries per SoC. Each format is one artifact component with a hashed
manifest v2, validation reports measured against transformers through the native engine, and a
plan.

Layout of OUT:
    plan.json                   the first format's plan (plan.onnx.json / plan.pte.json: each)
    thinker-onnx/  manifest.json, *.onnx, weights.bin, weights.json, tokenizer files, reports/
    thinker-pte/   manifest.json, model.pte, placement.json, tokenizer files, reports/
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from omni_edge import __version__
from omni_edge.artifacts import new_component, write_manifest, write_report
from omni_edge.contracts import ArtifactMetadata, ValidationRef
from omni_edge.export.decoder.graphs import DecoderShape
from omni_edge.export.decoder.plan import (
    PRECISION_DEFAULTS,
    kv_caches,
    llm_section,
    shape_bucket,
    state_layout_version,
    thinker_stage,
    write_plan,
)
from omni_edge.export.decoder.validation import validate_llm
from omni_edge.export.gguf import checkpoint_source
from omni_edge.export.options import LlmExportOptions

# Limits of the reports per CPU precision: 8-bit weights keep greedy generation (>= 90% of 64
# tokens); 4-bit round-to-nearest weights lose more on small models (measured on the test suite's
# unseen 96-wide checkpoint: 82-84% greedy, 69-78% top-1 over 36 positions, 14-16 dB) and are held
# to what they keep, with room for another CPU's training of that checkpoint.
CPU_LIMITS: dict[str, dict[str, float]] = {
    "int8": {"logit_sqnr_db": 25.0, "top1_agreement": 0.85, "greedy_agreement_64": 0.90, "perplexity_rel_delta": 0.05},
    "int4": {"logit_sqnr_db": 12.0, "top1_agreement": 0.55, "greedy_agreement_64": 0.70, "perplexity_rel_delta": 0.20},
}


def checked(opts: LlmExportOptions) -> LlmExportOptions:
    """The options with the target's default precision, or a ValueError before any work."""
    opts = replace(opts, precision=opts.precision_or(PRECISION_DEFAULTS))
    if opts.target == "cpu":
        from omni_edge.export.targets.cpu_quant import CPU_PRECISIONS

        if opts.precision not in CPU_PRECISIONS:
            raise ValueError(f"--target cpu takes --precision {', '.join(CPU_PRECISIONS)}, not {opts.precision!r}")
    else:
        from omni_edge.export.targets import qnn_target

        if opts.kv != "full":
            raise ValueError("--kv ring cannot target qnn-htp yet: ring positions grow without bound, and the HTP "
                             "graphs read RoPE from tables of fixed size (positions of the last bucket); use --kv full")
        for soc in opts.socs:
            target_soc, _ = qnn_target.check_target(soc, opts.precision)
            if opts.share_weights:
                qnn_target.check_weight_sharing(soc, target_soc)
    return opts


def export_decoder_lm(model: Any, checkpoint: Path, out: Path, opts: LlmExportOptions,
                      prompts: Sequence[Any] = ()) -> list[Path]:
    """Every requested format of a loaded causal LM (options already `checked`); returns the plan
    paths (the first is also OUT/plan.json). `prompts`: qnn-htp's media calibration prompts
    (qnn_target.Prompt) beside the shipped text."""
    shape = DecoderShape.from_config(model.config)
    caches = kv_caches(shape, opts)
    out.mkdir(parents=True, exist_ok=True)
    if opts.target == "qnn-htp":
        from omni_edge.export.decoder.qnn import export_qnn

        plans = export_qnn(model, checkpoint, out, opts, shape, caches, prompts)
    else:
        plans = [_cpu_component(model, checkpoint, out, opts, shape, caches, fmt) for fmt in opts.formats]
    shutil.copy2(plans[0], out / "plan.json")
    return plans


def _cpu_component(model: Any, checkpoint: Path, out: Path, opts: LlmExportOptions, shape: DecoderShape,
                   caches: list[int], fmt: str) -> Path:
    """One format's component (graphs, reports, manifest) and its plan."""
    quantized = opts.precision != "fp32"
    component = f"thinker-{fmt}" + (f"-{opts.precision}" if quantized else "")
    cdir = new_component(out / component, checkpoint)
    with tqdm(total=3 + 2 * len(caches), desc=f"export {fmt}", unit="graph", leave=False) as progress:
        if fmt == "onnx":
            from omni_edge.export.decoder.onnx import export_onnx

            graphs = export_onnx(cdir, model, shape, opts, caches, progress, precision=opts.precision)
        else:
            from omni_edge.export.decoder.pte import export_pte

            graphs = export_pte(cdir, model, shape, opts, caches, progress, precision=opts.precision)
    label = f"{fmt}, {opts.precision}" if quantized else fmt
    plan_path = write_plan(out, f"{checkpoint.name} ({label}, {opts.kv} KV)",
                           thinker_stage(component, llm_section(shape, opts, caches, checkpoint, fmt), graphs))
    revision = json.loads((checkpoint / "config.json").read_text()).get("_name_or_path", "") or "local"
    identity = dict(checkpoint_id=checkpoint.name, checkpoint_revision=revision,
                    precision=f"{opts.precision}-b{opts.block_size}" if quantized else "fp32",
                    shape_bucket=shape_bucket(opts, caches), target_abi="x86_64-linux")
    numerical, task = validate_llm(model, plan_path, cdir / "tokenizer.json", identity, opts.validate,
                                   threads=opts.threads, limits=CPU_LIMITS.get(opts.precision))
    write_report(cdir / "reports" / "numerical.json", numerical)
    write_report(cdir / "reports" / "task.json", task)
    runtime = "onnxruntime" if fmt == "onnx" else "executorch"
    write_manifest(cdir, component, ArtifactMetadata(
        **identity, runtime=runtime, runtime_version=importlib.metadata.version(runtime), adapter_version="1",
        exporter_version=__version__, compiler_version=f"torch-{torch.__version__}",
        state_layout_version=state_layout_version(shape),
        numerical_validation=ValidationRef("reports/numerical.json", numerical.passed),
        task_validation=ValidationRef("reports/task.json", task.passed)),
        extra_metadata={"llm": {"kv": opts.kv, "caches": caches, "prefill_chunk": opts.prefill_chunk,
                                "format": fmt, **_quantization(opts, fmt)}, **opts.extra_metadata,
                        **checkpoint_source(checkpoint)})
    return plan_path


def _quantization(opts: LlmExportOptions, fmt: str) -> dict[str, Any]:
    from omni_edge.export.targets.cpu_quant import manifest_block

    return manifest_block(opts.precision, opts.block_size, "body and LM head (the embedding stays float32)", fmt)
