"""`omni-edge export llm --target qnn-htp`: the text model as QNN HTP artifacts.

The fp32 graphs (mask -100, the value 16-bit activations keep) are calibrated through the
native engine on the shipped calibration text, quantized once per precision (QDQ: 16-bit
activations, symmetric per-channel weights), and compiled into context binaries per SoC. Each
SoC's component is validated on the HTP backend (the emulator here) through the native
engine against transformers, and gets its own plan with every graph on the NPU.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tqdm import tqdm

from omni_edge import __version__
from omni_edge.artifacts import new_component, write_manifest, write_report
from omni_edge.contracts import ArtifactMetadata, ReportCheck, ValidationRef, ValidationReport
from omni_edge.export import qnn_target
from omni_edge.export.qwen3 import body_io_names
from omni_edge.export.validation import validate_llm
from omni_edge.files import write_text_atomic
from omni_edge.socs import Soc

# Limits of the reports per precision. 16-bit activations with 8- or 16-bit weights must keep
# greedy generation (>= 90% of 64 tokens); 4-bit weights lose more and are held to what they keep.
QUANTIZED_LIMITS: dict[str, dict[str, float]] = {
    "w8a16": {"logit_sqnr_db": 25.0, "top1_agreement": 0.85, "greedy_agreement_64": 0.90, "perplexity_rel_delta": 0.10},
    "a16w16": {"logit_sqnr_db": 30.0, "top1_agreement": 0.90, "greedy_agreement_64": 0.90, "perplexity_rel_delta": 0.05},
    "fp16": {"logit_sqnr_db": 40.0, "top1_agreement": 0.95, "greedy_agreement_64": 0.95, "perplexity_rel_delta": 0.02},
    "w4a16": {"logit_sqnr_db": 12.0, "top1_agreement": 0.50, "greedy_agreement_64": 0.50, "perplexity_rel_delta": 0.50},
}
DECODE_STEPS = 20           # calibration: decode steps after each sequence
SAMPLES_PER_SEQUENCE = 20   # calibration: captured inputs kept per graph and sequence
SHARED_ROLES = ("prefill", "decode")  # the graphs whose weights one shared context stores once


def calibration_lengths(caches: list[int]) -> list[int]:
    """Sequence lengths whose prefill and decode steps reach the middle and the end of every
    cache size: attention is calibrated over short and full caches alike."""
    lengths, previous = [16], 0
    for cache in caches:
        lengths += [max(8, previous + (cache - previous) // 2 - DECODE_STEPS), max(8, cache - DECODE_STEPS)]
        previous = cache
    return lengths


def _plan_files(plan: dict[str, Any]) -> dict[str, str]:
    """{"decode:512": "decode_s512.onnx", ...} for every graph of the (single) stage."""
    stage = plan["stages"][0]
    return {f"{role}:{key}": ref for role, group in stage["graphs"].items() for key, ref in group["graphs"].items()}


def _graph_facts(cdir: Path, files: dict[str, str]) -> dict[str, Any]:
    """Per plan graph: its EPContext model, the context binary and the QNN graph inside it."""
    import onnx

    facts: dict[str, Any] = {}
    for name, file in files.items():
        model = onnx.load(str(cdir / qnn_target.ctx_name(file)), load_external_data=False)
        nodes = [n for n in model.graph.node if n.op_type == "EPContext"]
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in nodes[0].attribute} if len(nodes) == 1 else {}
        facts[name] = {"model": qnn_target.ctx_name(file), "context_binary": attrs.get("ep_cache_context", b"").decode(),
                       "qnn_graph": attrs.get("partition_name", b"").decode()}
    return facts


def _compile(files: dict[str, str], graphs: dict[str, Path], cdir: Path, soc: Soc,
             precision: qnn_target.Precision, share: bool, desc: str) -> float:
    """Compile every graph into cdir; with `share`, the prefill and decode graphs of all buckets
    go into one context binary that stores their common weights once. Returns seconds."""
    started = time.perf_counter()
    shared = [n for n in files if share and n.split(":")[0] in SHARED_ROLES]
    for name in tqdm(files, desc=desc, unit="graph", leave=False):
        mode = "" if name not in shared else ("last" if name == shared[-1] else "open")
        qnn_target.compile_context(graphs[name], cdir, soc, precision, share=mode)
    return time.perf_counter() - started


def export_qnn(model: Any, checkpoint: Path, out: Path, opts: Any, shape: Any, caches: list[int],
               export_onnx: Callable[..., dict[str, Any]], llm_section: Callable[..., dict[str, Any]],
               stage: Callable[..., dict[str, Any]], write_plan: Callable[..., Path]) -> list[Path]:
    """Export, quantize, compile and validate; one component and plan per SoC (plus a
    weight-shared twin per SoC with opts.share_weights). Returns the plans."""
    import onnxruntime as ort

    ort.set_default_logger_severity(3)
    targets = [(key, *qnn_target.check_target(key, opts.precision)) for key in opts.socs]
    precision = targets[0][2]
    build = out / f".build-qnn-{opts.precision}"
    if build.exists():
        shutil.rmtree(build)
    (build / "fp32").mkdir(parents=True)
    (build / "qdq").mkdir()
    shutil.copy2(checkpoint / "tokenizer.json", build / "fp32" / "tokenizer.json")

    # 1. fp32 graphs and their plan, with the mask value of the quantized graphs.
    with tqdm(total=3 + 2 * len(caches), desc="export fp32 for calibration", unit="graph", leave=False) as progress:
        # RoPE from tables covering every position a prefill chunk can reach (padding included).
        groups = export_onnx(build / "fp32", model, shape, opts, caches, progress, rope_table=caches[-1] + opts.prefill_chunk)
    groups["lm_head"].pop("options", None)
    llm = llm_section(shape, opts, caches)
    llm["mask_value"] = qnn_target.QDQ_MASK_VALUE
    fp32_plan = {"plan_version": 1, "name": "fp32 for calibration", "stages": [stage("fp32", llm, groups)]}
    write_text_atomic(build / "plan.fp32.json", json.dumps(fp32_plan))
    files = _plan_files(fp32_plan)

    # 2. Calibration inputs of every graph, captured through the native engine; held-out inputs
    #    (the last calibration sequence reversed) for the per-graph SQNR.
    tokens = qnn_target.calibration_token_ids(checkpoint / "tokenizer.json", calibration_lengths(caches))
    samples = qnn_target.capture_calibration(build / "plan.fp32.json", tokens, DECODE_STEPS, SAMPLES_PER_SEQUENCE,
                                              opts.threads)
    held_out = qnn_target.capture_calibration(build / "plan.fp32.json", [t[::-1] for t in tokens[-3:]], 4, 4, opts.threads)

    # 3. Quantize once per precision (fp16 compiles the prepared float graph in fp16 instead). The
    #    KV cache crosses the boundary as its uint16 codes, one scale per layer for every graph.
    device_graphs: dict[str, Path] = {}
    quantized = precision.weights != "fp16"
    kv_fixed = qnn_target.kv_ranges(samples, body_io_names(shape.layers)[0], shape.layers) if quantized else {}
    kv_codes = qnn_target.kv_codes(kv_fixed)
    for name, file in tqdm(files.items(), desc=f"quantize {opts.precision}", unit="graph", leave=False):
        prepared = build / "qdq" / ("fp32_" + file)
        qnn_target.prepare_graph(build / "fp32" / file, prepared, fuse_norms=quantized)
        device_graphs[name] = prepared
        if quantized:
            device_graphs[name] = build / "qdq" / file
            body = name.split(":")[0] in ("prefill", "decode")
            qnn_target.quantize_graph(prepared, device_graphs[name], samples[name], precision,
                                      fixed_ranges=kv_fixed if body else None)
            if body:
                qnn_target.quantized_kv_io(device_graphs[name], kv_codes)
    if quantized:
        llm["kv"]["dtype"] = "uint16"

    calibration = {"file": "calibration.txt", "sequences": [len(t) for t in tokens], "decode_steps": DECODE_STEPS,
                   "samples_per_graph_and_sequence": SAMPLES_PER_SEQUENCE, "range_widening": qnn_target.RANGE_WIDENING}
    plans = []
    for soc_key, soc, _ in targets:
        component = f"thinker-qnn-{soc_key}-{opts.precision}"
        cdir = new_component(out / component, checkpoint, [qnn_target.CALIBRATION_TEXT])
        if opts.keep_qdq:
            _keep_sources(device_graphs, files, cdir / "qdq")
        # 4. Context binaries for this SoC (the compile itself runs on this host).
        compile_s = _compile(files, device_graphs, cdir, soc, precision, False, f"compile for {soc_key}")
        npu_groups = {role: {"backend": "onnxruntime", "device": "npu",
                             "graphs": {k: qnn_target.ctx_name(v) for k, v in g["graphs"].items()}}
                      for role, g in groups.items()}
        plan_path = write_plan(out, f"{checkpoint.name} (QNN HTP {soc_key}, {opts.precision})",
                               stage(component, llm, npu_groups))
        bucket = "ring" + str(caches[0]) if opts.kv == "ring" else "ctx" + "-".join(map(str, caches))
        identity = dict(checkpoint_id=checkpoint.name, checkpoint_revision="local", precision=opts.precision,
                        shape_bucket=f"{bucket}-n{opts.prefill_chunk}", target_abi=f"qnn-htp-v{soc.htp_arch}")
        # 5. Validation on the HTP backend, through the native engine.
        limits = QUANTIZED_LIMITS[opts.precision]
        numerical, task = validate_llm(model, plan_path, cdir / "tokenizer.json", identity, opts.validate,
                                       threads=opts.threads, limits=limits)
        if opts.validate:
            per_graph = qnn_target.graph_sqnr(build / "fp32", cdir,
                                              {k: f for k, f in files.items() if not k.startswith("embed")}, held_out,
                                              codes=kv_codes)
            numerical = ValidationReport(
                numerical.kind, numerical.checkpoint_id, numerical.checkpoint_revision, numerical.precision,
                numerical.shape_bucket, numerical.target_abi,
                numerical.checks + tuple(ReportCheck(f"graph_sqnr_db.{g}", v, limits["logit_sqnr_db"] - 10, ">=")
                                         for g, v in sorted(per_graph.items())))
        write_report(cdir / "reports" / "numerical.json", numerical)
        write_report(cdir / "reports" / "task.json", task)
        facts = {**qnn_target.describe(soc, opts.precision, precision, kv_codes), "graphs": _graph_facts(cdir, files),
                 "versions": qnn_target.versions(), "compile_seconds": round(compile_s, 2),
                 "weight_sharing": False, "calibration": calibration}
        llm_facts = {"kv": opts.kv, "caches": caches, "prefill_chunk": opts.prefill_chunk}
        write_manifest(cdir, component, _metadata(identity, facts, numerical, task),
                       extra_metadata={"qnn": facts, "llm": llm_facts})
        plans.append(plan_path)

        if opts.share_weights:
            plans.append(_shared_twin(out, checkpoint, files, device_graphs, groups, soc_key, soc, precision, opts,
                                      llm, stage, write_plan, identity, facts, llm_facts))
    shutil.rmtree(build)
    return plans


def _keep_sources(graphs: dict[str, Path], files: dict[str, str], out: Path) -> None:
    """The graphs the context binaries were compiled from, as qdq/<graph>.onnx + .data."""
    import onnx

    out.mkdir()
    for name, file in files.items():
        onnx.save(onnx.load(str(graphs[name])), str(out / file), save_as_external_data=True, location=file + ".data")


def _metadata(identity: dict[str, str], facts: dict[str, Any], numerical: ValidationReport,
              task: ValidationReport) -> ArtifactMetadata:
    versions = facts["versions"]
    return ArtifactMetadata(
        **identity, runtime="onnxruntime-qnn", runtime_version=versions["onnxruntime_qnn"], adapter_version="1",
        exporter_version=__version__, compiler_version=f"qnn-{versions['qnn_sdk']}", state_layout_version=1,
        calibration_file="calibration.txt",
        numerical_validation=ValidationRef("reports/numerical.json", numerical.passed),
        task_validation=ValidationRef("reports/task.json", task.passed))


def _shared_twin(out: Path, checkpoint: Path, files: dict[str, str], graphs: dict[str, Path], groups: dict[str, Any],
                 soc_key: str, soc: Soc, precision: qnn_target.Precision, opts: Any, llm: dict[str, Any],
                 stage: Callable[..., dict[str, Any]], write_plan: Callable[..., Path], identity: dict[str, str],
                 facts: dict[str, Any], llm_facts: dict[str, Any]) -> Path:
    """The same quantized graphs with prefill and decode in one weight-shared context binary.

    The x86 HTP backend of QNN 2.51 refuses to load a context holding several graphs
    (QNN_COMMON_ERROR_NOT_SUPPORTED), so this twin cannot be validated here: its manifest names
    the validated twin built from the identical graphs and does not claim qualification."""
    component = f"thinker-qnn-{soc_key}-{opts.precision}-shared"
    cdir = new_component(out / component, checkpoint, [qnn_target.CALIBRATION_TEXT])
    compile_s = _compile(files, graphs, cdir, soc, precision, True, f"compile shared for {soc_key}")
    share_options = {"ort.ep.share_ep_contexts": "1"}  # one loaded context serves every session
    npu_groups = {role: {"backend": "onnxruntime", "device": "npu",
                         "graphs": {k: qnn_target.ctx_name(v) for k, v in g["graphs"].items()},
                         **({"options": share_options} if role in SHARED_ROLES else {})}
                  for role, g in groups.items()}
    plan_path = write_plan(out, f"{checkpoint.name} (QNN HTP {soc_key}, {opts.precision}, shared weights)",
                           stage(component, llm, npu_groups))
    twin = component.removesuffix("-shared")
    shared_facts = {**facts, "graphs": _graph_facts(cdir, files), "compile_seconds": round(compile_s, 2),
                    "weight_sharing": {"roles": list(SHARED_ROLES), "same_quantized_graphs_as": twin,
                                       "not_validated_because": "the x86 HTP emulator (QNN "
                                       f"{facts['versions']['qnn_sdk']}) cannot load multi-graph contexts; "
                                       f"validate on a device ({twin} is the emulator-validated twin)"}}
    numerical, task = validate_llm(None, plan_path, cdir / "tokenizer.json", identity, enabled=False)
    write_report(cdir / "reports" / "numerical.json", numerical)
    write_report(cdir / "reports" / "task.json", task)
    write_manifest(cdir, component, _metadata(identity, facts, numerical, task), extra_metadata={"qnn": shared_facts, "llm": llm_facts})
    return plan_path
