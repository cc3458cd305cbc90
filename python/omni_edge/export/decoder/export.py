"""`omni-edge export llm`: a Qwen3 checkpoint into per-stage, static-shape graphs per context
bucket (embedding, prefill AR-N, decode AR-1, LM head), for ONNX Runtime and/or ExecuTorch,
each format one artifact component with a hashed manifest v2, validation reports measured
against transformers through the native engine, and a plan.

Layout of OUT:
    plan.json                   the first format's plan (plan.onnx.json / plan.pte.json: each)
    thinker-onnx/  manifest.json, *.onnx, weights.bin, weights.json, tokenizer files, reports/
    thinker-pte/   manifest.json, model.pte, placement.json, tokenizer files, reports/
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from omni_edge import __version__
from omni_edge.artifacts import new_component, write_manifest, write_report
from omni_edge.contracts import ArtifactMetadata, ValidationRef
from omni_edge.export import onnx_target
from omni_edge.export.qwen3 import BodyGraph, EmbedGraph, HeadGraph, Qwen3Shape, body_example, body_io_names
from omni_edge.export.validation import validate_llm
from omni_edge.files import write_text_atomic

FP32_MASK_VALUE = -10000.0
# Limits of the reports per CPU precision: 8-bit weights keep greedy generation (>= 90% of 64
# tokens); 4-bit round-to-nearest weights lose more on small models (measured on the test suite's
# unseen 96-wide checkpoint: 82-84% greedy, 69-78% top-1 over 36 positions, 14-16 dB) and are held
# to what they keep, with room for another CPU's training of that checkpoint.
CPU_LIMITS: dict[str, dict[str, float]] = {
    "int8": {"logit_sqnr_db": 25.0, "top1_agreement": 0.85, "greedy_agreement_64": 0.90, "perplexity_rel_delta": 0.05},
    "int4": {"logit_sqnr_db": 12.0, "top1_agreement": 0.55, "greedy_agreement_64": 0.70, "perplexity_rel_delta": 0.20},
}


@dataclass
class LlmExportOptions:
    formats: tuple[str, ...] = ("onnx",)
    prefill_chunk: int = 32
    buckets: tuple[int, ...] = (512, 1024)
    kv: str = "full"            # full | ring
    window: int | None = None   # ring: defaults to the checkpoint's sliding window
    overflow: str = "refuse"    # full: refuse | ring
    validate: bool = True
    max_new_tokens: int = 256
    threads: int = 0
    target: str = "cpu"                     # cpu (ONNX Runtime / ExecuTorch) | qnn-htp
    precision: str = ""                     # cpu: fp32 | int8 | int4 (ONNX Runtime); qnn-htp: w8a16 | w4a16 | a16w16 | fp16
    block_size: int = 32                    # cpu int8/int4: weights per quantization block along K
    socs: tuple[str, ...] = ("sm8750",)     # qnn-htp: one component per SoC
    share_weights: bool = False             # qnn-htp: also a twin with prefill+decode in one weight-shared context
    keep_qdq: bool = False                  # qnn-htp: keep the quantized source graphs (qdq/) for AI Hub compile jobs
    image_sizes: tuple[tuple[int, int], ...] = ((448, 448),)  # multimodal: a vision graph per size's patch grid
    extra_metadata: dict[str, Any] = field(default_factory=dict)


def _caches(shape: Qwen3Shape, opts: LlmExportOptions) -> list[int]:
    if opts.kv == "full":
        if shape.sliding_window is not None:
            raise ValueError(f"this checkpoint uses sliding-window attention (window {shape.sliding_window}): "
                             "export it with --kv ring so the runtime keeps exactly that window")
        caches = sorted(set(opts.buckets))
        if not caches or caches[0] < opts.prefill_chunk:
            raise ValueError("every context bucket must hold at least one prefill chunk")
        return caches
    if opts.kv == "ring":
        window = opts.window or shape.sliding_window
        if window is None:
            raise ValueError("--kv ring needs --window, or a checkpoint with a sliding window")
        if shape.sliding_window is not None and window != shape.sliding_window:
            raise ValueError(f"--window {window} differs from the checkpoint's sliding window {shape.sliding_window}")
        if window < opts.prefill_chunk:
            raise ValueError("the ring window must hold at least one prefill chunk")
        return [window]
    raise ValueError(f"unknown KV mode {opts.kv!r} (full or ring)")


def _llm_section(shape: Qwen3Shape, opts: LlmExportOptions, caches: list[int]) -> dict[str, Any]:
    kv: dict[str, Any] = ({"mode": "full", "buckets": caches, "overflow": opts.overflow} if opts.kv == "full"
                          else {"mode": "ring", "window": caches[0]})
    return {
        "tokenizer": "tokenizer.json", "chat_format": "chatml", "stop_tokens": ["<|im_end|>", "<|endoftext|>"],
        "hidden_size": shape.hidden, "num_layers": shape.layers, "num_kv_heads": shape.kv_heads,
        "head_dim": shape.head_dim, "vocab_size": shape.vocab, "prefill_chunk": opts.prefill_chunk,
        "mask_value": FP32_MASK_VALUE, "kv": kv, "max_new_tokens": opts.max_new_tokens,
        "sampling": {"temperature": 0.0},
    }


def _stage(component: str, llm: dict[str, Any], graphs: dict[str, Any]) -> dict[str, Any]:
    return {
        "stage_id": 0, "model_stage": "thinker", "execution_type": "llm_ar", "input_sources": [],
        "final_output": True, "final_output_type": "text", "engine_output_type": "text",
        "artifact": component, "llm": llm, "graphs": graphs,
    }


def _write_plan(out: Path, name: str, stage: dict[str, Any]) -> Path:
    plan = {"plan_version": 1, "name": name, "stages": [stage],
            "stream_limits": {"max_events": 64, "max_bytes": 1 << 20}}
    path = out / f"plan.{stage['artifact'].removeprefix('thinker-')}.json"
    write_text_atomic(path, json.dumps(plan, indent=2) + "\n")
    return path


def _export_onnx(component_dir: Path, model: Any, shape: Qwen3Shape, opts: LlmExportOptions,
                 caches: list[int], progress: tqdm, rope_table: int = 0, precision: str = "fp32") -> dict[str, Any]:
    C = opts.prefill_chunk
    # ONNX Runtime's CPU kernels fuse the "fused" norm pattern (one kernel instead of six per norm:
    # 285 -> ~200 nodes a body); the HTP's converter takes the ReduceMean form.
    norm = "fused" if opts.target == "cpu" else "mean"
    embed, head = EmbedGraph(model, rows=precision != "fp32").eval(), HeadGraph(model, shape, reduce=norm).eval()
    body = BodyGraph(model, shape, reduce=norm, rope_table=rope_table).eval()
    files: list[str] = []

    def graph(module: torch.nn.Module, example: tuple[torch.Tensor, ...], ins: list[str], outs: list[str], name: str) -> str:
        progress.set_postfix_str(name)
        onnx_target.export_graph(module, example, ins, outs, component_dir / name)
        files.append(name)
        progress.update()
        return name

    body_in, body_out = body_io_names(shape.layers)
    groups: dict[str, Any] = {
        "embed": {"chunk": graph(embed, (torch.zeros(1, C, dtype=torch.int64),), ["input_ids"], ["hidden"], f"embed_n{C}.onnx"),
                  "step": graph(embed, (torch.zeros(1, 1, dtype=torch.int64),), ["input_ids"], ["hidden"], "embed_n1.onnx")},
        "prefill": {}, "decode": {},
        "lm_head": {"step": graph(head, (torch.zeros(1, 1, shape.hidden),), ["hidden"], ["logits"], "lm_head.onnx")},
    }
    for cache in caches:
        groups["prefill"][str(cache)] = graph(body, body_example(shape, C, cache), body_in, body_out, f"prefill_s{cache}.onnx")
        groups["decode"][str(cache)] = graph(body, body_example(shape, 1, cache), body_in, body_out, f"decode_s{cache}.onnx")
    if precision != "fp32":
        from omni_edge.export.cpu_quant import CPU_PRECISIONS, quantize_graph

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


def _export_pte(component_dir: Path, model: Any, shape: Qwen3Shape, opts: LlmExportOptions,
                caches: list[int], progress: tqdm, precision: str = "fp32") -> dict[str, Any]:
    from omni_edge.export import executorch_target

    C = opts.prefill_chunk
    quantized = precision != "fp32"
    embed = EmbedGraph(model, rows=quantized).eval()
    body = BodyGraph(model, shape, reduce="matmul").eval()
    head = HeadGraph(model, shape, reduce="matmul", linear=quantized).eval()
    if quantized:
        from omni_edge.export.cpu_quant import CPU_PRECISIONS, quantize_linears

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


def _quantization(opts: LlmExportOptions, fmt: str) -> dict[str, Any]:
    from omni_edge.export.cpu_quant import manifest_block

    return manifest_block(opts.precision, opts.block_size, "body and LM head (the embedding stays float32)", fmt)


def _runtime_version(fmt: str) -> tuple[str, str]:
    import importlib.metadata as md

    return ("onnxruntime", md.version("onnxruntime")) if fmt == "onnx" else ("executorch", md.version("executorch"))


def export_llm(checkpoint: Path, out: Path, opts: LlmExportOptions) -> list[Path]:
    """Export every requested format; returns the plan paths (the first is also OUT/plan.json)."""
    from transformers import AutoModelForCausalLM

    if opts.target not in ("cpu", "qnn-htp"):
        raise ValueError(f"unknown target {opts.target!r} (cpu, qnn-htp)")
    config = checkpoint / "config.json"
    if config.is_file() and json.loads(config.read_text()).get("model_type") in ("qwen2_5_omni_thinker", "qwen2_5_omni"):
        from omni_edge.export.qwen25_omni_export import export_omni_llm

        return export_omni_llm(checkpoint, out, opts)  # its own precision defaults (encoders: fp16 on the HTP)
    opts = replace(opts, precision=opts.precision or ("fp32" if opts.target == "cpu" else "w8a16"))
    if opts.target == "cpu":
        from omni_edge.export.cpu_quant import CPU_PRECISIONS, check_block_size

        if opts.precision not in CPU_PRECISIONS:
            raise ValueError(f"--target cpu takes --precision {', '.join(CPU_PRECISIONS)}, not {opts.precision!r}")
        if opts.precision != "fp32":
            check_block_size(opts.block_size)
    if opts.target == "qnn-htp":
        from omni_edge.export import qnn_target

        if opts.kv != "full":
            raise ValueError("--kv ring cannot target qnn-htp yet: ring positions grow without bound, and the HTP "
                             "graphs read RoPE from tables of fixed size (positions of the last bucket); use --kv full")
        for soc in opts.socs:  # refuse before any work
            target_soc, _ = qnn_target.check_target(soc, opts.precision)
            if opts.share_weights:
                qnn_target.check_weight_sharing(soc, target_soc)
    for name in ("config.json", "tokenizer.json"):  # before transformers mistakes a missing path for a hub id
        if not (checkpoint / name).is_file():
            raise ValueError(f"{checkpoint}: not a checkpoint directory (no {name})")
    model: Any = AutoModelForCausalLM.from_pretrained(str(checkpoint), dtype=torch.float32)
    model.eval()
    if model.config.model_type != "qwen3":
        raise ValueError(f"{checkpoint}: model_type {model.config.model_type!r} is not supported (qwen3)")
    shape = Qwen3Shape.from_config(model.config)
    caches = _caches(shape, opts)
    out.mkdir(parents=True, exist_ok=True)
    revision = json.loads((checkpoint / "config.json").read_text()).get("_name_or_path", "") or "local"
    if opts.target == "qnn-htp":
        from omni_edge.export.llm_qnn import export_qnn

        qnn_plans = export_qnn(model, checkpoint, out, opts, shape, caches, _export_onnx, _llm_section, _stage, _write_plan)
        shutil.copy2(qnn_plans[0], out / "plan.json")
        return qnn_plans
    plans: list[Path] = []
    n_graphs = 3 + 2 * len(caches)
    for fmt in opts.formats:
        if fmt not in ("onnx", "pte"):
            raise ValueError(f"unknown format {fmt!r} (onnx, pte)")
        quantized = opts.precision != "fp32"
        component = f"thinker-{fmt}" + (f"-{opts.precision}" if quantized else "")
        cdir = new_component(out / component, checkpoint)
        with tqdm(total=n_graphs, desc=f"export {fmt}", unit="graph", leave=False) as progress:
            if fmt == "onnx":
                graphs = _export_onnx(cdir, model, shape, opts, caches, progress, precision=opts.precision)
            else:
                graphs = _export_pte(cdir, model, shape, opts, caches, progress, precision=opts.precision)
        stage = _stage(component, _llm_section(shape, opts, caches), graphs)
        label = f"{fmt}, {opts.precision}" if quantized else fmt
        plan_path = _write_plan(out, f"{checkpoint.name} ({label}, {opts.kv} KV)", stage)
        runtime, runtime_version = _runtime_version(fmt)
        bucket = "ring" + str(caches[0]) if opts.kv == "ring" else "ctx" + "-".join(map(str, caches))
        precision = f"{opts.precision}-b{opts.block_size}" if quantized else "fp32"
        identity = dict(checkpoint_id=checkpoint.name, checkpoint_revision=revision, precision=precision,
                        shape_bucket=f"{bucket}-n{opts.prefill_chunk}", target_abi="x86_64-linux")
        numerical, task = validate_llm(model, plan_path, cdir / "tokenizer.json", identity, opts.validate,
                                       threads=opts.threads, limits=CPU_LIMITS.get(opts.precision))
        write_report(cdir / "reports" / "numerical.json", numerical)
        write_report(cdir / "reports" / "task.json", task)
        write_manifest(cdir, component, ArtifactMetadata(
            **identity, runtime=runtime, runtime_version=runtime_version, adapter_version="1",
            exporter_version=__version__, compiler_version=f"torch-{torch.__version__}", state_layout_version=1,
            numerical_validation=ValidationRef("reports/numerical.json", numerical.passed),
            task_validation=ValidationRef("reports/task.json", task.passed)),
            extra_metadata={"llm": {"kv": opts.kv, "caches": caches, "prefill_chunk": opts.prefill_chunk,
                                    "format": fmt, **_quantization(opts, fmt)}, **opts.extra_metadata})
        plans.append(plan_path)
    shutil.copy2(plans[0], out / "plan.json")
    return plans
