"""`omni-edge export llm --format pte|both` on a Qwen2.5-Omni checkpoint: the three components as
ExecuTorch programs (XNNPACK), beside the ONNX ones.

    vision-pte/   model.pte, one method per image grid (`vision_<t>x<h>x<w>`)
    audio-pte/    model.pte, the chunk method (`audio_chunk`)
    thinker-pte/  model.pte, the decoder's methods as `export llm` writes them for a Qwen3
    plan.thinker-pte.json  the thinker alone (text), validated like any LLM (native engine)
    plan.pte.json          image + audio + text -> text, every stage on ExecuTorch

Each encoder method is checked against transformers through ExecuTorch's runtime (the same
inputs as the ONNX graphs' checks), and a whole image + audio chat request through the native
session on the multimodal plan against transformers' generate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from omni_edge.artifacts import identity_report, new_component
from omni_edge.contracts import ReportCheck
from omni_edge.export.comparison import sqnr_db
from omni_edge.export.decoder.graphs import DecoderShape
from omni_edge.export.decoder.plan import kv_caches, llm_section, shape_bucket, thinker_stage, write_plan
from omni_edge.export.decoder.pte import export_pte
from omni_edge.export.models.qwen25_omni.graphs import AudioChunkGraph, ThinkerParts, VisionGraph
from omni_edge.export.models.qwen25_omni.onnx import run_audio_chunks
from omni_edge.export.models.qwen25_omni.plan import (
    ENCODER_SQNR_DB,
    PREPROCESSOR,
    THINKER_CONFIG,
    component_identity,
    multimodal_plan,
    write_component_manifest,
)
from omni_edge.export.models.qwen25_omni.reference import Thinker
from omni_edge.export.models.qwen25_omni.validation import session_agreement
from omni_edge.export.options import LlmExportOptions
from omni_edge.export.targets import executorch_target


def _encoders(out: Path, checkpoint: Path, thinker: Thinker, grids: list[tuple[int, int, int]],
              progress: tqdm) -> tuple[dict[str, Any], dict[str, Any], dict[str, float]]:
    """Both encoder programs, their graph references and each one's worst SQNR against transformers."""
    model = thinker.model.model
    c = thinker.config.vision_config
    width = c.in_channels * c.temporal_patch_size * c.patch_size ** 2
    preprocessor = [checkpoint / "preprocessor_config.json"]
    vdir = new_component(out / "vision-pte", checkpoint, preprocessor, PREPROCESSOR)
    patches = {g: torch.randn(g[0] * g[1] * g[2], width, generator=torch.Generator().manual_seed(0)) for g in grids}
    methods: dict[str, tuple[torch.nn.Module, tuple[torch.Tensor, ...]]] = {
        "vision_" + "x".join(map(str, g)): (VisionGraph(model.visual, g).eval(), (patches[g],)) for g in grids}
    executorch_target.export_program(methods, vdir / "model.pte", progress)
    sqnr: dict[str, float] = {}
    for g in grids:
        with torch.no_grad():
            ref = model.get_image_features(patches[g], torch.tensor([g])).pooler_output
        ref = torch.cat(list(ref)) if isinstance(ref, (list, tuple)) else ref
        method = executorch_target.MethodSession(vdir / "model.pte", "vision_" + "x".join(map(str, g)))
        image = method.run(None, {"pixel_values": patches[g].numpy()})
        sqnr["vision"] = min(sqnr.get("vision", np.inf), sqnr_db(ref.numpy(), image[0]))
    adir = new_component(out / "audio-pte", checkpoint, preprocessor, PREPROCESSOR)
    graph = AudioChunkGraph(model.audio_tower).eval()
    executorch_target.export_program({"audio_chunk": (graph, (torch.zeros(1, model.audio_tower.num_mel_bins, graph.frames),
                                                              torch.tensor([graph.frames])))}, adir / "model.pte", progress)
    frames = int(2.6 * graph.frames)
    features = torch.randn(1, model.audio_tower.num_mel_bins, frames, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = model.get_audio_features(features, torch.ones(1, frames, dtype=torch.long)).last_hidden_state
    tokens = run_audio_chunks(executorch_target.MethodSession(adir / "model.pte", "audio_chunk"), features[0].numpy(), graph.frames)
    sqnr["audio"] = sqnr_db(ref.numpy(), tokens)
    vision = {"x".join(map(str, g)): {"file": "model.pte", "method": "vision_" + "x".join(map(str, g))} for g in grids}
    audio = {"chunk": {"file": "model.pte", "method": "audio_chunk"}}
    return vision, audio, sqnr


def export_omni_pte(checkpoint: Path, out: Path, opts: LlmExportOptions, thinker: Thinker, grids: list[tuple[int, int, int]],
                    chunk_frames: int) -> list[Path]:
    """The ExecuTorch components and plans (multimodal first)."""
    parts = ThinkerParts(thinker.model)
    shape = DecoderShape.from_config(parts.config)
    caches = kv_caches(shape, opts)
    with tqdm(total=3 + 2 * len(caches) + len(grids) + 1, desc="export qwen2.5-omni (pte)", unit="method",
              leave=False) as bar:
        vision, audio, sqnr = _encoders(out, checkpoint, thinker, grids, bar)
        cdir = new_component(out / "thinker-pte", checkpoint)
        (cdir / THINKER_CONFIG).write_text(thinker.config.to_json_string())
        graphs = export_pte(cdir, parts, shape, opts, caches, bar)
    section = {**llm_section(shape, opts, caches, checkpoint, "pte"), "position_rows": 3}
    plan = write_plan(out, f"{checkpoint.name} thinker (pte, {opts.kv} KV)", thinker_stage("thinker-pte", section, graphs),
                      "plan.thinker-pte.json")
    mm = multimodal_plan(out / "plan.pte.json", checkpoint.name, thinker, json.loads(plan.read_text())["stages"][0],
                         vision, audio, chunk_frames, grids, fmt="pte", backend="executorch")
    identity = {**component_identity(checkpoint, shape_bucket(opts, caches)), "target_abi": "x86_64-linux"}
    skipped = (ReportCheck("validation_run", 0.0, 1.0, ">="),)
    numerical, task = identity_report("numerical", identity, skipped), identity_report("task", identity, skipped)
    media = task
    encoder_numerical = {kind: identity_report("numerical", identity, (ReportCheck("embeds_sqnr_db", v, ENCODER_SQNR_DB, ">="),))
                         for kind, v in sqnr.items()}

    def manifests() -> None:
        for kind, refs in (("vision", vision), ("audio", audio)):
            write_component_manifest(out / f"{kind}-pte", f"{kind}-pte", identity, encoder_numerical[kind], media,
                      {kind: {"graphs": refs, "hidden_size": shape.hidden, "format": "pte"}})
        write_component_manifest(cdir, "thinker-pte", identity, numerical, task, {
            "llm": {"kv": opts.kv, "caches": caches, "prefill_chunk": opts.prefill_chunk, "format": "pte"},
            "omni": {"vision": "vision-pte", "audio": "audio-pte", "image_grids": [list(g) for g in grids]}})

    if opts.validate:
        from omni_edge.export.decoder.validation import validate_llm

        numerical, task = validate_llm(thinker.model, plan, cdir / "tokenizer.json", identity, True, threads=opts.threads)
        manifests()  # the session verifies every component before it runs the request
        agree = session_agreement(checkpoint, thinker, mm, opts.image_sizes[0])
        media = identity_report("task", identity, (ReportCheck("media_greedy_agreement", agree, 1.0, ">="),))
        task = identity_report("task", identity, task.checks + media.checks)
    manifests()
    return [mm, plan]
