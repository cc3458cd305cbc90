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
from pathlib import Path
from typing import Any

import torch

from omni_edge import __version__
from omni_edge.artifacts import write_manifest, write_report
from omni_edge.contracts import ArtifactMetadata, ValidationRef
from omni_edge.export.models.qwen3_tts.graphs import MASK_VALUE
from omni_edge.export.models.qwen3_tts.onnx import export_graphs
from omni_edge.export.models.qwen3_tts.plan import check_options, speech_component, speech_plan
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
from omni_edge.export.options import TtsExportOptions
from omni_edge.files import write_text_atomic


def _runtime(fmt: str) -> tuple[str, str]:
    name = "onnxruntime" if fmt == "onnx" else "executorch"
    return name, importlib.metadata.version(name)


def export(checkpoint: Path, out: Path, opts: TtsExportOptions) -> list[tuple[Path, dict[str, float]]]:
    """The speech components of the target: CPU formats here, QNN context binaries per SoC in
    qnn.py. Returns each component with its validation numbers (empty when validation is off)."""
    if opts.target == "qnn-htp":
        from omni_edge.export.models.qwen3_tts.qnn import export_tts_qnn

        return export_tts_qnn(checkpoint, out, opts)
    return export_cpu(checkpoint, out, opts)


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
