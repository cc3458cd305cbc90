"""`omni-edge export tts --target qnn-htp`: the speech stages as QNN HTP context binaries.

The talker stage (embeddings, bodies and head, code predictor) is compiled for the HTP of each
SoC and the plan puts every one of its graphs on the NPU (CPU fallback disabled: an op the HTP
cannot run is a compile error naming it). Precisions are the LLM route's: fp16, or QDQ with
16-bit activations and 8/4/16-bit per-channel weights (w8a16, w4a16, a16w16).

Quantized graphs are calibrated on the inputs they meet when speaking: the fp32 graphs are
driven through ONNX Runtime the way the controller drives them (`tts.GraphRunner`), over the
shipped calibration text, once per talker bucket, and every graph's inputs are recorded. The
omni graph (thinker hidden -> talker) is not quantized: it would be calibrated on text
embeddings, not on the thinker hidden states it reads in an omni plan, which this export does
not know; quantized plans run it on the CPU in fp32 (declared so in the plan).

The vocoder windows run on the CPU (fp32) by default: no random decoder keeps its numbers on the
HTP (README, "NPU route"); `vocoder_on_npu` compiles them too, for a trained decoder.

Validation on the HTP backend (the emulator here), against the PyTorch reference: the native
speech chain speaks the validation sentence (free-running codes, PCM); the compiled graphs,
teacher-forced with the reference codes, predict each code (agreement per codebook); and each
graph's worst output is compared with the fp32 graph's on held-out (reversed) sentences (SQNR).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from omni_edge import __version__
from omni_edge.artifacts import write_manifest, write_report
from omni_edge.contracts import ArtifactMetadata, ValidationRef
from omni_edge.export.models.qwen3_tts.onnx import export_graphs
from omni_edge.export.models.qwen3_tts.plan import check_options, speech_component, speech_plan
from omni_edge.export.models.qwen3_tts.reference import Qwen3Tts, generate_codes
from omni_edge.export.models.qwen3_tts.runner import GraphRunner, validation_ids, validation_sampling
from omni_edge.export.models.qwen3_tts.validation import forced_agreement, reports, validate_native
from omni_edge.export.options import TtsExportOptions
from omni_edge.export.targets import qnn_target
from omni_edge.files import write_text_atomic

# Limits against the fp32 reference per precision, below what the tiny and small checkpoints
# measured on the sm8650 emulator (README, "NPU route" of speech). Free-running greedy codes
# drift once two logits are closer than the precision resolves (a random model's logits are
# close; w8a16 measured 0 of 16 frames equal after the first miss), so the NPU precisions (fp16
# too: it rounds otherwise than fp32) are not held to the free run (its frame agreement is in
# the manifest's validation figures): the teacher-forced
# agreements and each graph's worst output SQNR say whether the graphs compute the same
# function. The vocoder on the CPU keeps the PCM exact for the codes it is given.
LIMITS: dict[str, dict[str, float]] = {
    "fp16": {"forced_codebook0_agreement": 0.9, "forced_predictor_agreement": 0.9,
             "graph_sqnr_db": 30.0, "pcm_sqnr_db": 20.0, "pcm_max_abs_diff": 0.5},
    "w8a16": {"forced_codebook0_agreement": 0.8, "forced_predictor_agreement": 0.8,
              "graph_sqnr_db": 25.0, "pcm_sqnr_db": 20.0, "pcm_max_abs_diff": 0.5},
    "a16w16": {"forced_codebook0_agreement": 0.8, "forced_predictor_agreement": 0.8,
               "graph_sqnr_db": 25.0, "pcm_sqnr_db": 20.0, "pcm_max_abs_diff": 0.5},
    "w4a16": {"forced_codebook0_agreement": 0.5, "forced_predictor_agreement": 0.5,
              "graph_sqnr_db": 12.0, "pcm_sqnr_db": 20.0, "pcm_max_abs_diff": 0.5},
}
FP16_LIMITS = LIMITS["fp16"]
CALIBRATION_FRAMES = 24   # frames spoken per calibration sentence
OMNI_GRAPH = "talker_embed_hidden_n1"  # reads a thinker's hidden states (omni plans)
SAMPLES_PER_RUN = 128     # recorded inputs kept per graph and sentence (a uniform choice of its runs; fewer when large)


def calibration_lengths(bucket: int) -> list[int]:
    """Sentence lengths for one talker bucket: a short one, and one whose frames end near the
    middle of the bucket (attention over short and long contexts)."""
    return [12, max(12, bucket // 2 - CALIBRATION_FRAMES)]


def capture_calibration(runner: GraphRunner, frames: int = CALIBRATION_FRAMES, per_run: int = SAMPLES_PER_RUN,
                        reverse: bool = False, omni: bool = True) -> dict[str, list[list[np.ndarray]]]:
    """Every graph's inputs while `runner`'s fp32 graphs speak the calibration text (reversed:
    held-out sentences), in every talker bucket; graph -> samples, up to `per_run` per graph and
    sentence. `omni`: also samples for the omni graph (text embeddings where a thinker's hidden
    states would be), for when that graph is compiled for the NPU."""
    model, opts = runner.model, runner.opts
    out: dict[str, list[list[np.ndarray]]] = {}
    table = model.talker.text_embedding.weight.detach().numpy()
    for bucket in sorted(set(opts.buckets), reverse=reverse):  # held-out starts in the bucket calibration ended in
        runner.use_bucket(bucket)
        for ids in qnn_target.calibration_token_ids(model.tokenizer, calibration_lengths(bucket)):
            ids = ids[::-1] if reverse else ids
            runner.start_recording(per_run)
            # the prompt's rows, then every frame takes one cache slot
            runner.pcm(runner.codes(ids, max(1, min(frames, bucket - len(model.prompt.rows(ids)) - 1))))
            assert runner.recorded is not None
            steps = runner.recorded.get("talker_embed_n1", [])
            if omni:  # the frames' codes with text embeddings where a thinker's state would be
                runner.recorded[OMNI_GRAPH] = [
                    [table[ids[i % len(ids)]].reshape(1, 1, -1).copy(), codes] for i, (_, codes) in enumerate(steps)]
            for name, runs in runner.recorded.items():
                out.setdefault(name, []).extend(runs)
    return out


def _require(samples: dict[str, list[list[np.ndarray]]], graphs: list[str], what: str) -> None:
    """Every graph met while speaking: a graph without samples cannot be calibrated or checked."""
    missing = [g for g in graphs if not samples.get(g)]
    if missing:
        raise ValueError(f"{what}: the speech chain never ran {', '.join(missing)} (the talker ended speech at once, "
                         "or a bucket is too small to speak in)")


def _htp_runner(model: Qwen3Tts, component: Path, refs: dict[str, str], on_npu: list[str],
                opts: TtsExportOptions) -> GraphRunner:
    """The compiled graphs driven from Python: the context binaries on the HTP backend, the
    rest (the vocoder, by default) on the CPU."""
    import onnxruntime as ort

    def on_htp(name: str, path: Path) -> Any:
        return ort.InferenceSession(str(path), qnn_target.htp_session_options()) if name in on_npu else None

    return GraphRunner(model, component, refs, opts, sessions=on_htp)


def export_tts_qnn(checkpoint: Path, out: Path, opts: TtsExportOptions) -> list[tuple[Path, dict[str, float]]]:
    """One component `speech-qnn-<soc>-<precision>/` and plan `plan.qnn-<soc>-<precision>.json`
    per SoC of opts.socs; OUT/plan.json is the first SoC's. Returns each component with its
    validation."""
    import onnxruntime as ort

    precision = opts.precision
    opts = replace(opts, target="cpu", precision="fp32")  # the float graphs every SoC's are made from
    check_options(opts)
    for key in opts.socs:  # refuse before any work
        qnn_target.check_target(key, precision)
    ort.set_default_logger_severity(3)
    model = Qwen3Tts.from_pretrained(checkpoint, opts.voice)
    build = out / ".build-qnn-speech"
    if build.exists():
        shutil.rmtree(build)
    (build / "fp32").mkdir(parents=True)
    (build / "device").mkdir()
    graphs = _device_graphs(model, build, opts, precision)
    text = validation_ids(model)
    reference = (generate_codes(model, text, opts.validation_frames, validation_sampling(model)).numpy()
                 if opts.validate else None)
    results = [_soc_component(model, checkpoint, out, build, opts, graphs, soc_key, text, reference)
               for soc_key in opts.socs]
    shutil.copy2(out / f"plan.qnn-{opts.socs[0]}-{precision}.json", out / "plan.json")
    shutil.rmtree(build)
    return results


@dataclass
class _Graphs:
    """The speech graphs made once for every SoC: the fp32 files, which run where, the graphs to
    compile, the held-out inputs and what calibrated them."""

    precision: str
    files: dict[str, str]
    on_npu: list[str]
    on_cpu: set[str]
    device: dict[str, Path]
    held_out: dict[str, list[list[np.ndarray]]]
    calibration: dict[str, Any]


def _device_graphs(model: Qwen3Tts, build: Path, opts: TtsExportOptions, precision: str) -> _Graphs:
    """The fp32 graphs, calibrated and quantized (or prepared for fp16) where they run on the HTP."""
    recipe = qnn_target.PRECISIONS[precision]
    quantized = recipe.weights != "fp16"
    files = export_graphs(model, build / "fp32", opts)
    # A quantized omni graph would be calibrated on text embeddings, not on the thinker hidden
    # states it reads in an omni plan (unknown here): it runs on the CPU in fp32 instead.
    on_cpu = {n for n in files if (n.startswith("vocoder_") and not opts.vocoder_on_npu)
              or (quantized and n == OMNI_GRAPH)}
    on_npu = [n for n in files if n not in on_cpu]
    samples = held_out = {}
    runner = GraphRunner(model, build / "fp32", files, opts) if quantized or opts.validate else None
    if runner is not None and quantized:
        samples = capture_calibration(runner, omni=OMNI_GRAPH in on_npu)
        _require(samples, on_npu, "calibration")
    if runner is not None and opts.validate:
        held_out = capture_calibration(runner, frames=6, per_run=4, reverse=True, omni=OMNI_GRAPH in on_npu)
        _require(held_out, on_npu, "held-out validation")
    del runner  # its fp32 sessions
    device_graphs = {}
    for name in tqdm(on_npu, desc=f"prepare speech ({precision})", unit="graph", leave=False):
        # fp16 keeps RMSNorm unfused (the HTP's fp16 path computes fused 4-D norms wrongly).
        prepared = build / "device" / ("fp32_" + files[name])
        qnn_target.prepare_graph(build / "fp32" / files[name], prepared, fuse_norms=quantized)
        device_graphs[name] = prepared
        if quantized:
            device_graphs[name] = build / "device" / files[name]
            qnn_target.quantize_graph(prepared, device_graphs[name], samples[name], recipe)
    calibration = {"file": "calibration.txt", "frames": CALIBRATION_FRAMES, "samples_per_graph_and_sentence":
                   SAMPLES_PER_RUN, "sentences": {str(b): calibration_lengths(b) for b in sorted(set(opts.buckets))},
                   "omni_graph": "cpu fp32", "range_widening": qnn_target.RANGE_WIDENING} if quantized else {}
    return _Graphs(precision, files, on_npu, on_cpu, device_graphs, held_out, calibration)


def _soc_component(model: Qwen3Tts, checkpoint: Path, out: Path, build: Path, opts: TtsExportOptions, g: _Graphs,
                   soc_key: str, text: list[int], reference: np.ndarray | None) -> tuple[Path, dict[str, float]]:
    """One SoC's component: context binaries (and the CPU graphs), plan, validation, manifest."""
    soc, prec = qnn_target.check_target(soc_key, g.precision)
    component = speech_component(out / f"speech-qnn-{soc_key}-{g.precision}", model, checkpoint,
                                 (qnn_target.CALIBRATION_TEXT,) if g.calibration else ())
    refs = {}
    for name in tqdm(g.on_npu, desc=f"compile speech for {soc_key}", unit="graph", leave=False):
        refs[name] = qnn_target.compile_context(g.device[name], component, soc, prec).name
    for name in g.on_cpu:  # the fp32 CPU graphs and their shared weights
        refs[name] = g.files[name]
        shutil.copy2(build / "fp32" / g.files[name], component / g.files[name])
    if g.on_cpu:
        for rel in ("weights.bin", "weights.json"):
            shutil.copy2(build / "fp32" / rel, component / rel)
    plan_path = out / f"plan.qnn-{soc_key}-{g.precision}.json"
    plan = speech_plan(model, component.name, refs, opts, device="npu",
                       devices={role: "cpu" for role, graph in (("vocoder", "vocoder_"), ("embed_hidden", OMNI_GRAPH))
                                if any(n.startswith(graph) for n in g.on_cpu)})
    write_text_atomic(plan_path, json.dumps(plan, indent=2) + "\n")
    identity = dict(checkpoint_id=checkpoint.name, checkpoint_revision="local", precision=g.precision,
                    shape_bucket=f"ctx{'-'.join(map(str, sorted(opts.buckets)))}-n{opts.prefill_chunk}"
                                 f"-w{opts.stream.window}", target_abi=f"qnn-htp-v{soc.htp_arch}")
    versions = qnn_target.versions()
    facts = {**qnn_target.describe(soc, g.precision, prec), "versions": versions,
             **({"calibration": g.calibration} if g.calibration else {})}

    def manifest(got: dict[str, float] | None) -> None:
        numerical, task = reports(identity, got, LIMITS[g.precision])
        write_report(component / "reports" / "numerical.json", numerical)
        write_report(component / "reports" / "task.json", task)
        write_manifest(component, component.name, ArtifactMetadata(
            **identity, runtime="onnxruntime-qnn", runtime_version=versions["onnxruntime_qnn"],
            adapter_version="1", exporter_version=__version__, compiler_version=f"qnn-{versions['qnn_sdk']}",
            state_layout_version=1, numerical_validation=ValidationRef("reports/numerical.json", numerical.passed),
            task_validation=ValidationRef("reports/task.json", task.passed),
            calibration_file="calibration.txt" if g.calibration else None),
            extra_metadata={"qnn": facts, "speech": {"graphs": refs, "vocoder_on_npu": opts.vocoder_on_npu,
                                                     "validation": got or {}}})

    got = None
    if opts.validate and reference is not None:
        manifest(None)  # the native chain verifies the artifact before it runs it
        got = validate_native(model, plan_path, opts, text, reference)
        got.update(forced_agreement(_htp_runner(model, component, refs, g.on_npu, opts), text, reference))
        sqnr = qnn_target.graph_sqnr(build / "fp32", component, {n: g.files[n] for n in g.on_npu}, g.held_out,
                                     all_outputs=True)
        got.update({f"graph_sqnr_db.{name}": round(v, 2) for name, v in sqnr.items()})
    manifest(got)
    return component, got or {}
