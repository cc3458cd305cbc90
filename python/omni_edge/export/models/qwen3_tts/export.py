"""`omni-edge export tts`: the talker, code predictor and vocoder of a Qwen3-TTS-shaped checkpoint
as static-shape graphs (graphs.py) for ONNX Runtime (onnx.py), ExecuTorch (pte.py) or the QNN
HTP (qnn.py), validated against the PyTorch reference (validation.py), with manifests and plans.
The graphs themselves: graphs.py.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from omni_edge import __version__
from omni_edge.artifacts import new_component, write_manifest, write_report
from omni_edge.contracts import ArtifactMetadata, ValidationRef
from omni_edge.export.decoder.graphs import DecoderShape
from omni_edge.export.models.qwen3_tts.graphs import (
    MASK_VALUE,
    PREDICTOR_SLOTS,
    talker_shape,
)
from omni_edge.export.models.qwen3_tts.onnx import export_graphs
from omni_edge.export.models.qwen3_tts.options import PRECISION_DEFAULTS, TtsExportOptions
from omni_edge.export.models.qwen3_tts.pte import export_program
from omni_edge.export.models.qwen3_tts.reference import (
    CODE_GROUPS,
    SAMPLE_RATE,
    SAMPLES_PER_FRAME,
    Qwen3Tts,
)
from omni_edge.export.models.qwen3_tts.runner import validation_ids
from omni_edge.export.models.qwen3_tts.validation import (
    LIMITS,
    SPEECH_CPU_LIMITS,
    reports,
    validate_graphs,
    validate_native,
    validate_quantized,
)
from omni_edge.files import write_text_atomic


def check_options(opts: TtsExportOptions) -> None:
    """Refuse options no export can honour, before any work."""
    if opts.prefill_chunk < 1 or not opts.buckets or min(opts.buckets) < opts.prefill_chunk:
        raise ValueError("every talker bucket must hold at least one prefill chunk")
    if opts.validation_frames < 1:
        raise ValueError("validation needs at least one frame")
    if opts.precision not in ("fp32", *SPEECH_CPU_LIMITS):
        raise ValueError(f"--target cpu takes --precision fp32, {', '.join(SPEECH_CPU_LIMITS)}, not {opts.precision!r}")
    if opts.precision != "fp32" and set(opts.formats) != {"onnx"}:
        raise ValueError(f"--precision {opts.precision} is built for ONNX Runtime only (--format onnx): an "
                         "ExecuTorch speech program has no teacher-forced check to qualify it yet")


def speech_component(directory: Path, model: Qwen3Tts, checkpoint: Path, extra: tuple[Path, ...] = ()) -> Path:
    """`new_component` for a speech checkpoint, with its text tokenizer as tokenizer.json (a
    release's is converted from vocab.json + merges.txt)."""
    out = new_component(directory, checkpoint, extra, required=("config.json",))
    if not (out / "tokenizer.json").is_file():
        model.tokenizer.save(str(out / "tokenizer.json"))
    return out


def _decoder(s: DecoderShape, vocab: int, chunk: int, buckets: list[int]) -> dict[str, Any]:
    return {"hidden_size": s.hidden, "num_layers": s.layers, "num_kv_heads": s.kv_heads, "head_dim": s.head_dim,
            "vocab_size": vocab, "prefill_chunk": chunk, "mask_value": MASK_VALUE,
            "kv": {"mode": "full", "buckets": buckets, "overflow": "refuse"}}


def speech_plan(model: Qwen3Tts, component: str, files: dict[str, Any], opts: TtsExportOptions,
                backend: str = "onnxruntime", device: str = "cpu", devices: dict[str, str] | None = None) -> dict[str, Any]:
    """The two-stage plan: talker (with its code predictor) -> vocoder, in the Omni stage
    vocabulary; `files` maps each graph name to its plan reference (a file, or file + method).
    Every graph group runs on `device` but those `devices` names (group role -> device)."""
    C, buckets, windows = opts.prefill_chunk, sorted(set(opts.buckets)), opts.stream.windows

    def group(graphs: dict[str, Any], role: str) -> dict[str, Any]:
        return {"backend": backend, "device": (devices or {}).get(role, device), "graphs": graphs}

    ids, s, sampling = model.ids, opts.stream, model.sampling
    talker = {
        "stage_id": 0, "model_stage": "talker", "execution_type": "llm_ar", "input_sources": [],
        "engine_output_type": "codes", "artifact": component,
        "talker": {"tokenizer": "tokenizer.json", "text_pad_id": model.text_pad_id, "code_groups": CODE_GROUPS,
                   "codebook_size": ids.codebook_size, "codec_ids": {"pad": ids.pad, "bos": ids.bos, "eos": ids.eos},
                   "max_frames": 1500, "min_frames": model.min_frames, "prompt": model.prompt.to_json(),
                   "sampling": sampling.to_json(),
                   "decoder": _decoder(talker_shape(model.talker.model.config), ids.vocab, C, buckets),
                   "predictor": _decoder(talker_shape(model.talker.code_predictor.config), ids.codebook_size, 1,
                                         [PREDICTOR_SLOTS])},
        "graphs": {
            "embed": group({"chunk": files[f"talker_embed_n{C}"], "step": files["talker_embed_n1"]}, "embed"),
            "prefill": group({str(b): files[f"talker_prefill_s{b}"] for b in buckets}, "prefill"),
            "decode": group({str(b): files[f"talker_decode_s{b}"] for b in buckets}, "decode"),
            "embed_hidden": group({"step": files["talker_embed_hidden_n1"]}, "embed_hidden"),
            "head": group({"step": files["talker_head"]}, "head"),
            "predictor_embed": group({"step": files["predictor_embed_n1"]}, "predictor_embed"),
            "predictor_decode": group({str(PREDICTOR_SLOTS): files[f"predictor_decode_s{PREDICTOR_SLOTS}"]}, "predictor_decode"),
            "predictor_head": group({"step": files["predictor_head"]}, "predictor_head"),
        },
    }
    vocoder = {
        "stage_id": 1, "model_stage": "code2wav", "execution_type": "llm_generation", "input_sources": [0],
        "final_output": True, "final_output_type": "audio", "engine_output_type": "audio", "artifact": component,
        "vocoder": {"code_groups": CODE_GROUPS, "samples_per_frame": SAMPLES_PER_FRAME, "sample_rate": SAMPLE_RATE,
                    "tail_samples": model.tail_samples, "first_chunk": s.first, "chunk": s.chunk,
                    "left_context": s.left_context, "windows": list(windows), "pcm_dtype": "float32",
                    "schedule": s.schedule()},
        "graphs": {"vocoder": group({str(w): files[f"vocoder_w{w}"] for w in windows}, "vocoder")},
    }
    return {"plan_version": 1, "name": f"speech ({component})", "stages": [talker, vocoder],
            "stream_limits": {"max_events": 64, "max_bytes": 16 << 20}}


def _runtime(fmt: str) -> tuple[str, str]:
    name = "onnxruntime" if fmt == "onnx" else "executorch"
    return name, importlib.metadata.version(name)


def export(checkpoint: Path, out: Path, opts: TtsExportOptions) -> list[tuple[Path, dict[str, float]]]:
    """The speech components of the target: CPU formats here, QNN context binaries per SoC in
    qnn.py. Returns each component with its validation numbers (empty when validation is off)."""
    if opts.target == "qnn-htp":
        from omni_edge.export.models.qwen3_tts.qnn import export_tts_qnn

        return export_tts_qnn(checkpoint, out, opts)
    return export_cpu(checkpoint, out, replace(opts, precision=opts.precision_or(PRECISION_DEFAULTS)))


def export_cpu(checkpoint: Path, out: Path, opts: TtsExportOptions) -> list[tuple[Path, dict[str, float]]]:
    """Per format a speech component `speech-<fmt>/` (graphs, tokenizer, config, manifest v2 with
    the validation reports) and OUT/plan.<fmt>.json; OUT/plan.json is the first format's plan."""
    check_options(opts)
    model = Qwen3Tts.from_pretrained(checkpoint, opts.voice)
    text = validation_ids(model)
    quantized = opts.precision != "fp32"
    identity = dict(checkpoint_id=checkpoint.name, checkpoint_revision="local",
                    precision=f"{opts.precision}-b{opts.block_size}" if quantized else "fp32",
                    shape_bucket=f"ctx{'-'.join(map(str, sorted(opts.buckets)))}-n{opts.prefill_chunk}"
                                 f"-w{opts.stream.window}", target_abi="x86_64-linux")
    s = opts.stream
    speech_metadata = {"code_groups": CODE_GROUPS, "codebook_size": model.ids.codebook_size,
                       "voice": dataclasses.asdict(opts.voice), "prompt": model.prompt.to_json(),
                       "codec_ids": {"pad": model.ids.pad, "bos": model.ids.bos, "eos": model.ids.eos},
                       "samples_per_frame": SAMPLES_PER_FRAME, "sample_rate": SAMPLE_RATE,
                       "tail_samples": model.tail_samples, "mask_value": MASK_VALUE,
                       "stream": {"first": s.first, "chunk": s.chunk, "left_context": s.left_context,
                                  "window": s.window, "windows": list(s.windows), "schedule": s.schedule()}}
    results: list[tuple[Path, dict[str, float]]] = []
    suffix = f"-{opts.precision}" if quantized else ""
    for fmt in opts.formats:
        component = speech_component(out / f"speech-{fmt}{suffix}", model, checkpoint)
        backend, version = _runtime(fmt)
        if fmt == "onnx":
            files = export_graphs(model, component, opts)
            refs: dict[str, Any] = dict(files)
        else:
            files = export_program(model, component, opts)
            refs = {name: {"file": "model.pte", "method": method} for name, method in files.items()}
        plan_path = out / f"plan.{fmt}{suffix}.json"
        write_text_atomic(plan_path, json.dumps(speech_plan(model, component.name, refs, opts, backend), indent=2) + "\n")

        def manifest(got: dict[str, float] | None, fmt: str = fmt, component: Path = component,
                     files: dict[str, str] = files, backend: str = backend, version: str = version) -> None:
            numerical, task = reports(identity, got, SPEECH_CPU_LIMITS[opts.precision] if quantized else LIMITS)
            write_report(component / "reports" / "numerical.json", numerical)
            write_report(component / "reports" / "task.json", task)
            write_manifest(component, component.name, ArtifactMetadata(
                **identity, runtime=backend, runtime_version=version, adapter_version="1", exporter_version=__version__,
                compiler_version=f"torch-{torch.__version__}", state_layout_version=1,
                numerical_validation=ValidationRef("reports/numerical.json", numerical.passed),
                task_validation=ValidationRef("reports/task.json", task.passed)),
                extra_metadata={"speech": {**speech_metadata, "graphs": files, "format": fmt,
                                           "validation": got or {}, **_quantization(opts)}})

        got = None
        if opts.validate and quantized:
            manifest(None)  # the native chain verifies the artifact before it runs it
            got = validate_quantized(model, plan_path, component, files, opts, text)
        elif opts.validate and fmt == "onnx":
            got = validate_graphs(model, component, files, opts, text)
        elif opts.validate:
            manifest(None)  # the native chain verifies the artifact before it runs it
            got = validate_native(model, plan_path, opts, text)
        manifest(got)
        results.append((component, got or {}))
    shutil.copy2(out / f"plan.{opts.formats[0]}{suffix}.json", out / "plan.json")
    return results


def _quantization(opts: TtsExportOptions) -> dict[str, Any]:
    from omni_edge.export.targets.cpu_quant import manifest_block

    return manifest_block(opts.precision, opts.block_size,
                          "talker and code predictor bodies and heads (embeddings and vocoder float32)")
