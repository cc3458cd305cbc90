"""`omni-edge export llm --target qnn-htp` on a Qwen2.5-Omni checkpoint: the vision and audio
encoders as QNN HTP context binaries, the thinker on the CPU.

The CPU export runs first (its fp32 encoder graphs are what gets compiled, its thinker is the
plan's). Per SoC, each encoder graph is compiled for the HTP with CPU fallback disabled (an op
the HTP refuses is named) into `vision-qnn-<soc>-<precision>/` and `audio-qnn-<soc>-<precision>/`,
and `plan.qnn-<soc>-<precision>.json` puts both encoder stages on the NPU and the thinker on
the CPU (OUT/plan.json is the first SoC's; OUT/plan.cpu.json the all-CPU plan). fp16 (the
default: nothing to calibrate) or w8a16, calibrated on synthetic images and audio preprocessed
natively (as a device would); at w8a16 the HTP refuses the vision merger's exact GELU (Erf).

Validation on the HTP backend (the emulator here): each compiled graph's output against its fp32
graph on held-out media (SQNR), and a whole image + audio chat request through the native
session, encoders on the HTP, against transformers' generate (greedy agreement, reported).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from omni_edge.artifacts import identity_report, new_component
from omni_edge.contracts import ReportCheck, ValidationReport
from omni_edge.export.models.qwen25_omni.plan import PREPROCESSOR
from omni_edge.export.models.qwen25_omni.reference import load_thinker
from omni_edge.export.targets import qnn_target
from omni_edge.files import write_text_atomic
from omni_edge.runtime.media import wav_bytes
from omni_edge.socs import Soc

# Encoder outputs on the HTP against fp32, held-out media; below what the tiny checkpoint measured
# on the sm8750 emulator (fp16: vision 47 dB, audio 65 dB).
SQNR_LIMITS = {"fp16": 35.0, "w8a16": 15.0}


def media_samples(checkpoint: Path, grids: list[tuple[int, int, int]], chunk_frames: int, held_out: bool
                  ) -> dict[str, list[list[np.ndarray]]]:
    """Encoder inputs from synthetic media through the native preprocessing: per image grid a
    flat colour, noise and a gradient of that size; for the audio chunk graph, chunks of a tone,
    a chirp and noise (a shorter, masked last chunk among them). `held_out` draws others."""
    from omni_edge.runtime.media import audio_features, preprocess_image

    config = json.loads((checkpoint / "preprocessor_config.json").read_text())
    patch = int(config.get("patch_size", 14))
    rng = np.random.default_rng(7 if held_out else 3)
    out: dict[str, list[list[np.ndarray]]] = {}
    for t, h, w in grids:
        height, width = h * patch, w * patch
        ramp = np.linspace(0, 255, width, dtype=np.float64)[None, :, None] * np.ones((height, 1, 3))
        images = [np.full((height, width, 3), rng.integers(0, 256, 3), np.uint8),
                  rng.integers(0, 256, (height, width, 3), dtype=np.uint8), ramp.astype(np.uint8)]
        out["x".join(map(str, (t, h, w)))] = [[preprocess_image(i, config)[0]] for i in images]
    rate = 16000
    time = np.arange(int((3.1 if held_out else 2.6) * rate)) / rate
    sounds = [0.5 * np.sin(2 * np.pi * (330 if held_out else 440) * time),
              0.5 * np.sin(2 * np.pi * (150 + 900 * time) * time), 0.2 * rng.standard_normal(time.size)]
    chunks: list[list[np.ndarray]] = []
    for sound in sounds:
        features = audio_features(wav_bytes(sound, rate), config)
        for start in range(0, features.shape[1], chunk_frames):
            n = min(chunk_frames, features.shape[1] - start)
            chunk = np.zeros((1, features.shape[0], chunk_frames), np.float32)
            chunk[0, :, :n] = features[:, start:start + n]
            chunks.append([chunk, np.array([n], np.int64)])
    out["chunk"] = chunks
    return out


def _compile(build: Path, component: Path, graphs: dict[str, str], fp32_dir: Path, samples: dict[str, Any],
             soc: Soc, recipe: qnn_target.Precision) -> dict[str, str]:
    """Each graph prepared (and quantized), compiled into `component`: key -> context model."""
    quantized = recipe.weights != "fp16"
    refs = {}
    for key, file in graphs.items():
        prepared = build / ("fp32_" + file)
        if not prepared.exists():
            qnn_target.prepare_graph(fp32_dir / file, prepared, fuse_norms=quantized)
        device = prepared
        if quantized:
            device = build / file
            if not device.exists():
                qnn_target.quantize_graph(prepared, device, samples[key], recipe)
        refs[key] = qnn_target.compile_context(device, component, soc, recipe).name
    return refs


def _manifests(components: dict[str, tuple[Path, dict[str, str]]], identity: dict[str, str], sqnr: dict[str, float],
               soc: Soc, prec: qnn_target.Precision, task: ValidationReport) -> None:
    """Each encoder component's reports (its own graphs' worst SQNR; the request's agreement) and manifest."""
    precision = identity["precision"]
    for kind, (component, refs) in components.items():
        kind_identity = {**identity, "shape_bucket": "grids-" + "-".join(refs) if kind == "vision" else "chunk"}
        worst = min(v for k, v in sqnr.items() if k.startswith(kind))
        numerical = identity_report("numerical", kind_identity, (ReportCheck("embeds_sqnr_db", worst, SQNR_LIMITS[precision], ">="),))
        qnn_target.write_component(component, kind_identity, numerical,
                                   replace(task, shape_bucket=kind_identity["shape_bucket"]), soc, prec,
                                   {kind: {"graphs": refs, "sqnr_db": {k: v for k, v in sqnr.items() if k.startswith(kind)}}})


def export_encoders_qnn(checkpoint: Path, out: Path, opts: Any) -> list[Path]:
    """The CPU export, then per SoC the encoders compiled for its HTP and their plan."""
    from omni_edge.export.models.qwen25_omni.export import export_cpu
    from omni_edge.export.models.qwen25_omni.validation import Encoders, session_agreement

    precision = opts.precision or "fp16"
    if precision not in SQNR_LIMITS:
        raise ValueError(f"the encoders compile at {' or '.join(SQNR_LIMITS)} for qnn-htp, not {precision!r}")
    targets = [(key, *qnn_target.check_target(key, precision)) for key in opts.socs]  # refuse before any work
    cpu_plan = export_cpu(checkpoint, out, replace(opts, target="cpu", precision="fp32"))[0]
    thinker = load_thinker(checkpoint) if opts.validate else None  # the request's reference, once for every SoC
    encoders = Encoders.of(out)
    vision_files = {key: path.name for key, path in encoders.vision.items()}
    grids = [tuple(int(v) for v in key.split("x")) for key in vision_files]
    calibration = media_samples(checkpoint, grids, encoders.chunk_frames, held_out=False)  # type: ignore[arg-type]
    held_out = media_samples(checkpoint, grids, encoders.chunk_frames, held_out=True)  # type: ignore[arg-type]
    build = out / ".build-qnn-encoders"
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir(parents=True)
    plans: list[Path] = []
    for soc_key, soc, prec in tqdm(targets, desc="compile encoders", unit="SoC", leave=False):
        plan = json.loads(cpu_plan.read_text())
        sqnr: dict[str, float] = {}
        components: dict[str, tuple[Path, dict[str, str]]] = {}
        for kind, graphs, fp32_dir in (("vision", vision_files, out / "vision-onnx"),
                                       ("audio", {"chunk": encoders.audio.name}, out / "audio-onnx")):
            component = new_component(out / f"{kind}-qnn-{soc_key}-{precision}", checkpoint,
                                      [checkpoint / "preprocessor_config.json"], PREPROCESSOR)
            (build / soc_key).mkdir(exist_ok=True)
            refs = _compile(build / soc_key, component, graphs, fp32_dir, calibration, soc, prec)
            got = qnn_target.graph_sqnr(fp32_dir, component, graphs, held_out)
            sqnr.update({f"{kind}_{key}": round(v, 2) for key, v in got.items()})
            components[kind] = (component, refs)
            stage = next(s for s in plan["stages"] if s["model_stage"] == f"{kind}_encoder")
            stage["artifact"] = component.name
            stage["graphs"]["encoder"] = {"backend": "onnxruntime", "device": "npu", "graphs": refs}
        plan["name"] = f"{checkpoint.name} (image + audio -> text; encoders on the {soc_key} HTP, {precision})"
        plan_path = out / f"plan.qnn-{soc_key}-{precision}.json"
        identity = dict(checkpoint_id=checkpoint.name, checkpoint_revision="local", precision=precision,
                        shape_bucket="", target_abi=f"qnn-htp-v{soc.htp_arch}")
        pending = identity_report("task", identity, (ReportCheck("validation_run", 0.0, 1.0, ">="),))

        write_text_atomic(plan_path, json.dumps(plan, indent=2) + "\n")
        task = pending
        if thinker is not None:
            _manifests(components, identity, sqnr, soc, prec, pending)  # verified by the session before it runs them
            agree = session_agreement(checkpoint, thinker, plan_path, opts.image_sizes[0])
            # Reported, held to half: a random thinker's greedy path flips on the HTP's rounding.
            task = identity_report("task", identity, (ReportCheck("media_greedy_agreement", agree, 0.5, ">="),))
        _manifests(components, identity, sqnr, soc, prec, task)
        plans.append(plan_path)
    shutil.rmtree(build)
    # OUT/plan.json is the first SoC's (as every --target qnn-htp export); the CPU one stays beside.
    cpu_copy = out / "plan.cpu.json"
    shutil.copy2(cpu_plan, cpu_copy)
    shutil.copy2(plans[0], out / "plan.json")
    return [*plans, cpu_copy]
