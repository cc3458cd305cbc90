"""`omni-edge export llm` on a Qwen2.5-Omni checkpoint (thinker-only or a release): three ONNX
components with hashed manifests and reports measured against transformers, and the plans:
OUT/plan.onnx.json (the vision and audio encoders as entry stages feeding the thinker: image +
audio + text -> text; OUT/plan.json is a copy), and OUT/plan.thinker-onnx.json (the thinker
alone, text -> text: what the text validation runs). A format's plan is always the whole
pipeline in that format: plan.pte.json is the ExecuTorch one (pte.py).

    thinker-onnx/  the decoder as `export llm` writes a Qwen3 (embedding, prefill/decode per
                   bucket, LM head), its body taking M-RoPE positions [3, 1, N]; the plan's
                   decoder says `position_rows: 3`. Validated like any LLM (text, native engine).
    vision-onnx/   the vision encoder, one graph per image grid (`vision_<t>x<h>x<w>.onnx`).
    audio-onnx/    the audio encoder, one graph per chunk of 2 n_window mel frames.

The media report of the thinker runs a whole image + audio request: the encoders' graphs on
ONNX Runtime, their outputs spliced into the prompt at its placeholders, the native engine with
the prompt's M-RoPE rows, greedy, against transformers' generate on the same processed inputs.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from omni_edge.artifacts import identity_report, new_component
from omni_edge.contracts import ReportCheck, ValidationReport
from omni_edge.export.decoder.graphs import DecoderShape
from omni_edge.export.decoder.onnx import export_onnx
from omni_edge.export.decoder.plan import kv_caches, llm_section, shape_bucket, thinker_stage, write_plan
from omni_edge.export.decoder.validation import validate_llm
from omni_edge.export.models.qwen25_omni.graphs import ThinkerParts
from omni_edge.export.models.qwen25_omni.onnx import export_audio, export_vision
from omni_edge.export.models.qwen25_omni.plan import (
    ENCODER_SQNR_DB,
    PREPROCESSOR,
    THINKER_CONFIG,
    component_identity,
    image_grid,
    multimodal_plan,
    write_component_manifest,
)
from omni_edge.export.models.qwen25_omni.reference import Thinker, load_thinker
from omni_edge.export.models.qwen25_omni.validation import Encoders, media_report
from omni_edge.export.options import LlmExportOptions


def _encoder_component(out: Path, checkpoint: Path, kind: str, result: dict[str, Any], media: ValidationReport,
                       extra: dict[str, Any]) -> None:
    cdir = out / f"{kind}-onnx"
    identity = component_identity(checkpoint, "grids-" + "-".join(result["graphs"]) if kind == "vision" else
                                  f"chunk{result['chunk_frames']}")
    numerical = identity_report("numerical", identity, (ReportCheck("embeds_sqnr_db", result["sqnr_db"], ENCODER_SQNR_DB, ">="),))
    task = identity_report("task", identity, media.checks)
    write_component_manifest(cdir, f"{kind}-onnx", identity, numerical, task, {kind: {"graphs": result["graphs"], **extra}})


def export(checkpoint: Path, out: Path, opts: LlmExportOptions) -> list[Path]:
    """The thinker, vision and audio components and their plans: on the CPU (`export_cpu`), or
    the encoders compiled for the HTP (qnn.py) beside the CPU thinker."""
    if opts.target == "qnn-htp":
        from omni_edge.export.models.qwen25_omni.qnn import export_encoders_qnn

        return export_encoders_qnn(checkpoint, out, opts)
    if opts.precision not in ("", "fp32"):
        raise ValueError("a Qwen2.5-Omni checkpoint exports to --format onnx, pte or both at fp32 on the CPU (and its "
                         "encoders to --target qnn-htp) so far")
    return export_cpu(checkpoint, out, replace(opts, precision="fp32"))


def export_cpu(checkpoint: Path, out: Path, opts: LlmExportOptions) -> list[Path]:
    """The thinker (the shared text decoder's ONNX graphs with M-RoPE positions), vision and audio
    components; OUT/plan.json (encoders -> thinker) and the thinker's own plan; a vision graph for
    the patch grid of each of opts.image_sizes (width, height). With pte: the ExecuTorch twins."""
    thinker = load_thinker(checkpoint)
    parts = ThinkerParts(thinker.model)
    shape = DecoderShape.from_config(parts.config)
    if not shape.mrope_section:
        raise ValueError(f"{checkpoint}: the thinker's rope_parameters have no mrope_section")
    caches = kv_caches(shape, opts)
    if not opts.image_sizes:
        raise ValueError("--image-sizes: at least one image size")
    grids = sorted({image_grid(checkpoint, w, h) for w, h in opts.image_sizes})
    out.mkdir(parents=True, exist_ok=True)
    with tqdm(total=3 + 2 * len(caches) + len(grids) + 1, desc="export qwen2.5-omni", unit="graph", leave=False) as bar:
        preprocessor = [checkpoint / "preprocessor_config.json"]
        vision = export_vision(new_component(out / "vision-onnx", checkpoint, preprocessor, PREPROCESSOR), thinker,
                               grids, bar)
        audio = export_audio(new_component(out / "audio-onnx", checkpoint, preprocessor, PREPROCESSOR), thinker, bar)
        cdir = new_component(out / "thinker-onnx", checkpoint)
        # The placeholder ids the runtime reads: the thinker's config (a release nests it).
        (cdir / THINKER_CONFIG).write_text(thinker.config.to_json_string())
        graphs = export_onnx(cdir, parts, shape, opts, caches, bar)
    section = {**llm_section(shape, opts, caches, checkpoint), "position_rows": 3}
    plan = write_plan(out, f"{checkpoint.name} thinker (onnx, {opts.kv} KV)", thinker_stage("thinker-onnx", section, graphs),
                      "plan.thinker-onnx.json")
    encoders = Encoders({g: out / "vision-onnx" / f for g, f in vision["graphs"].items()},
                        out / "audio-onnx" / audio["graphs"]["chunk"], audio["chunk_frames"])
    identity = component_identity(checkpoint, shape_bucket(opts, caches))
    numerical, task, media = _thinker_reports(checkpoint, thinker, plan, cdir / "tokenizer.json", encoders, identity, opts)
    # An encoder's task is the thinker's: the whole request's greedy ids with its output spliced in.
    _encoder_component(out, checkpoint, "vision", vision, media, {"hidden_size": shape.hidden})
    _encoder_component(out, checkpoint, "audio", audio, media, {"chunk_frames": audio["chunk_frames"],
                                                                "hidden_size": shape.hidden})
    write_component_manifest(cdir, "thinker-onnx", identity, numerical, task, {
        "llm": {"kv": opts.kv, "caches": caches, "prefill_chunk": opts.prefill_chunk, "format": "onnx"},
        "omni": {"vision": "vision-onnx", "audio": "audio-onnx", "image_grids": [list(g) for g in grids],
                 "skipped": thinker.skipped}})
    multimodal = multimodal_plan(out / "plan.onnx.json", checkpoint.name, thinker, json.loads(plan.read_text())["stages"][0],
                                 vision["graphs"], audio["graphs"], audio["chunk_frames"], grids)
    shutil.copy2(multimodal, out / "plan.json")
    plans = [multimodal, plan]
    if "pte" in opts.formats:
        from omni_edge.export.models.qwen25_omni.pte import export_omni_pte

        plans += export_omni_pte(checkpoint, out, opts, thinker, grids, audio["chunk_frames"])
    return plans


def _thinker_reports(checkpoint: Path, thinker: Thinker, plan: Path, tokenizer: Path, encoders: Encoders,
                     identity: dict[str, str], opts: LlmExportOptions) -> tuple[ValidationReport, ValidationReport, ValidationReport]:
    """The thinker's numerical and task reports (text, then the media request's checks appended)
    and the media report the encoders share; placeholders when validation is off."""
    skipped = (ReportCheck("validation_run", 0.0, 1.0, ">="),)
    numerical, task = identity_report("numerical", identity, skipped), identity_report("task", identity, skipped)
    if not opts.validate:
        return numerical, task, task
    numerical, task = validate_llm(thinker.model, plan, tokenizer, identity, True, threads=opts.threads)
    media = media_report(checkpoint, thinker, plan, encoders, opts.image_sizes[0], identity, opts.threads)
    return numerical, replace(task, checks=task.checks + media.checks), media
