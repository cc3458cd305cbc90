"""`omni-edge export tts --target qnn-htp`: the speech stages as QNN HTP context binaries.

The talker stage (embeddings, bodies and head, code predictor) is compiled for the HTP of each
SoC in fp16 and the plan puts every one of its graphs on the NPU (CPU fallback disabled: an op
the HTP cannot run is a compile error naming it). The vocoder windows run on the CPU (fp32) by
default: on the tiny checkpoint the fp16 vocoder on the HTP measured -20 dB against fp32 (its
random decoder's activations sit near 1e-6, below fp16's normal range); `vocoder_on_npu`
compiles them too, for a trained decoder. Validation runs the native speech chain on the HTP
backend (the emulator here) against the PyTorch reference.

Quantized speech (w8a16) needs calibration inputs captured through the speech chain; that is
not built yet, so only fp16 (HTP v73 and newer) is offered.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from omni_edge import __version__
from omni_edge.artifacts import write_manifest, write_report
from omni_edge.contracts import ArtifactMetadata, ValidationRef
from omni_edge.export import qnn_target
from omni_edge.export.qwen3_tts import Qwen3Tts
from omni_edge.export.tts import TtsExportOptions, _reports, export_graphs, speech_plan, validate_native
from tqdm import tqdm

# fp16 against the fp32 reference (measured on the tiny checkpoint, sm8650 emulator): greedy codes
# drift once two logits are closer than fp16 resolves; the vocoder on the same codes keeps the
# waveform. Held to what fp16 keeps, not to fp32's identity.
FP16_LIMITS = {"frame_agreement": 0.3, "pcm_sqnr_db": 20.0, "pcm_max_abs_diff": 0.5}


def export_tts_qnn(checkpoint: Path, out: Path, opts: TtsExportOptions, socs: tuple[str, ...],
                   precision: str = "fp16", vocoder_on_npu: bool = False) -> list[tuple[Path, dict[str, float]]]:
    """One component `speech-qnn-<soc>-<precision>/` and plan `plan.qnn-<soc>-<precision>.json`
    per SoC; OUT/plan.json is the first SoC's. Returns each component with its validation."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    if precision != "fp16":
        raise ValueError(f"speech on the HTP is fp16 only for now, not {precision!r}: quantized speech graphs need "
                         "calibration through the speech chain, which is not built yet")
    targets = [(key, *qnn_target.check_target(key, precision)) for key in socs]  # refuse before any work
    ort.set_default_logger_severity(3)
    model = Qwen3Tts.from_pretrained(checkpoint)
    build = out / ".build-qnn-speech"
    if build.exists():
        shutil.rmtree(build)
    (build / "fp32").mkdir(parents=True)
    (build / "prepared").mkdir()
    files = export_graphs(model, build / "fp32", opts)
    prepared = {}
    for name, file in files.items():
        # fp16 keeps RMSNorm unfused (the HTP's fp16 path computes fused 4-D norms wrongly).
        prepared[name] = build / "prepared" / ("fp32_" + file)
        qnn_target.prepare_graph(build / "fp32" / file, prepared[name], fuse_norms=False)
    text = Tokenizer.from_file(str(checkpoint / "tokenizer.json")).encode("Hello from the speech pipeline.").ids
    results: list[tuple[Path, dict[str, float]]] = []
    for soc_key, soc, prec in targets:
        component = out / f"speech-qnn-{soc_key}-{precision}"
        if component.exists():
            shutil.rmtree(component)
        component.mkdir(parents=True)
        for rel in ("tokenizer.json", "config.json"):
            shutil.copy2(checkpoint / rel, component / rel)
        refs = {}
        on_npu = [n for n in files if vocoder_on_npu or not n.startswith("vocoder_")]
        for name in tqdm(on_npu, desc=f"compile speech for {soc_key}", unit="graph", leave=False):
            refs[name] = qnn_target.compile_context(prepared[name], component, soc, prec).name
        for name in set(files) - set(on_npu):  # the fp32 CPU graphs and their shared weights
            refs[name] = files[name]
            shutil.copy2(build / "fp32" / files[name], component / files[name])
        if len(on_npu) < len(files):
            for rel in ("weights.bin", "weights.json"):
                shutil.copy2(build / "fp32" / rel, component / rel)
        plan_path = out / f"plan.qnn-{soc_key}-{precision}.json"
        plan = speech_plan(model, component.name, refs, opts, device="npu",
                           vocoder_device="npu" if vocoder_on_npu else "cpu")
        plan_path.write_text(json.dumps(plan, indent=2) + "\n")
        identity = dict(checkpoint_id=checkpoint.name, checkpoint_revision="local", precision=precision,
                        shape_bucket=f"ctx{'-'.join(map(str, sorted(opts.buckets)))}-n{opts.prefill_chunk}"
                                     f"-w{opts.stream.window}", target_abi=f"qnn-htp-v{soc.htp_arch}")
        versions = qnn_target.versions()
        facts = {**qnn_target.describe(soc, precision, prec), "versions": versions}

        def manifest(got: dict[str, float] | None, component: Path = component, identity: dict[str, str] = identity,
                     facts: dict[str, object] = facts, versions: dict[str, str] = versions,
                     refs: dict[str, str] = refs) -> None:
            numerical, task = _reports(identity, got, FP16_LIMITS)
            write_report(component / "reports" / "numerical.json", numerical)
            write_report(component / "reports" / "task.json", task)
            write_manifest(component, component.name, ArtifactMetadata(
                **identity, runtime="onnxruntime-qnn", runtime_version=versions["onnxruntime_qnn"],
                adapter_version="1", exporter_version=__version__, compiler_version=f"qnn-{versions['qnn_sdk']}",
                state_layout_version=1, numerical_validation=ValidationRef("reports/numerical.json", numerical.passed),
                task_validation=ValidationRef("reports/task.json", task.passed)),
                extra_metadata={"qnn": facts, "speech": {"graphs": refs, "vocoder_on_npu": vocoder_on_npu,
                                                         "validation": got or {}}})

        got = None
        if opts.validate:
            manifest(None)  # the native chain verifies the artifact before it runs it
            got = validate_native(model, plan_path, opts, text)
        manifest(got)
        results.append((component, got or {}))
    shutil.copy2(out / f"plan.qnn-{targets[0][0]}-{precision}.json", out / "plan.json")
    shutil.rmtree(build)
    return results
