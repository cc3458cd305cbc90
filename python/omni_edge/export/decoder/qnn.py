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
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from omni_edge import __version__
from omni_edge.artifacts import new_component, write_manifest, write_report
from omni_edge.contracts import ArtifactMetadata, ReportCheck, ValidationRef, ValidationReport
from omni_edge.export.decoder.graphs import DecoderShape, body_io_names, state_io_names
from omni_edge.export.decoder.onnx import export_onnx
from omni_edge.export.decoder.plan import llm_section, shape_bucket, state_layout_version, thinker_stage, write_plan
from omni_edge.export.decoder.validation import validate_llm
from omni_edge.export.gguf import checkpoint_source
from omni_edge.export.options import LlmExportOptions
from omni_edge.export.targets import qnn_target
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


def group_files(groups: dict[str, Any]) -> dict[str, str]:
    """{"decode:512": "decode_s512.onnx", ...} for every graph of a stage's graph groups (the keys
    the native engine's calibration capture uses)."""
    return {f"{role}:{key}": ref for role, group in groups.items() for key, ref in group["graphs"].items()}


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


def export_qnn(model: Any, checkpoint: Path, out: Path, opts: LlmExportOptions, shape: DecoderShape,
               caches: list[int], prompts: Sequence[qnn_target.Prompt] = ()) -> list[Path]:
    """Export, quantize, compile and validate; one component and plan per SoC (plus a
    weight-shared twin per SoC with opts.share_weights). Returns the plans. `prompts`: media
    prompts calibrated on beside the text (a multimodal thinker's)."""
    import onnxruntime as ort

    ort.set_default_logger_severity(3)
    build = out / f".build-qnn-{opts.precision}"
    if build.exists():
        shutil.rmtree(build)
    (build / "fp32").mkdir(parents=True)
    (build / "qdq").mkdir()
    shutil.copy2(checkpoint / "tokenizer.json", build / "fp32" / "tokenizer.json")
    graphs = _quantized_graphs(model, checkpoint, build, opts, shape, caches, prompts)
    plans = []
    for soc_key in opts.socs:
        soc, _ = qnn_target.check_target(soc_key, opts.precision)
        validated = _soc_component(model, checkpoint, out, build, opts, graphs, soc_key, soc)
        plans.append(validated.plan)
        if opts.share_weights:
            plans.append(_shared_twin(out, checkpoint, opts, graphs, soc_key, soc, validated))
    shutil.rmtree(build)
    return plans


@dataclass
class _Graphs:
    """What every SoC's component is compiled and validated from: the fp32 plan's graph groups
    and files, the graphs to compile, the KV codes, the held-out inputs, the calibration facts."""

    groups: dict[str, Any]
    files: dict[str, str]
    device: dict[str, Path]
    llm: dict[str, Any]
    kv_codes: dict[str, dict[str, float]]
    held_out: dict[str, list[list[np.ndarray]]]
    calibration: dict[str, Any]
    caches: list[int]
    layout: int  # the manifest's state_layout_version
    state_io: dict[str, Any] | None  # a hybrid's conv and recurrent states at the boundary


def _quantized_graphs(model: Any, checkpoint: Path, build: Path, opts: LlmExportOptions, shape: DecoderShape,
                      caches: list[int], prompts: Sequence[qnn_target.Prompt]) -> _Graphs:
    precision = qnn_target.PRECISIONS[opts.precision]
    # 1. fp32 graphs and their plan, with the mask value of the quantized graphs.
    with tqdm(total=3 + 2 * len(caches), desc="export fp32 for calibration", unit="graph", leave=False) as progress:
        # RoPE from tables covering every position a prefill chunk can reach (padding included).
        groups = export_onnx(build / "fp32", model, shape, opts, caches, progress, rope_table=caches[-1] + opts.prefill_chunk)
    groups["lm_head"].pop("options", None)
    llm = llm_section(shape, opts, caches, checkpoint)
    llm["mask_value"] = qnn_target.QDQ_MASK_VALUE
    fp32_plan = {"plan_version": 1, "name": "fp32 for calibration", "stages": [thinker_stage("fp32", llm, groups)]}
    write_text_atomic(build / "plan.fp32.json", json.dumps(fp32_plan))
    files = group_files(groups)

    # 2. Calibration inputs of every graph, captured through the native engine; held-out inputs
    #    (the last calibration sequence reversed) for the per-graph SQNR.
    tokens = qnn_target.calibration_token_ids(checkpoint / "tokenizer.json", calibration_lengths(caches))
    samples = qnn_target.capture_calibration(build / "plan.fp32.json", [*tokens, *prompts], DECODE_STEPS,
                                              SAMPLES_PER_SEQUENCE, opts.threads)
    held_out = qnn_target.capture_calibration(build / "plan.fp32.json", [t[::-1] for t in tokens[-3:]], 4, 4, opts.threads)

    # 3. Quantize once per precision (fp16 compiles the prepared float graph in fp16 instead). The
    #    KV cache crosses the boundary as its uint16 codes, one scale per layer for every graph.
    device_graphs: dict[str, Path] = {}
    quantized = precision.weights != "fp16"
    names = body_io_names(shape.attention_layers, shape.linear_layers)[0]
    kv_fixed = qnn_target.kv_ranges(samples, names, shape.attention_layers) if quantized else {}
    kv_codes = qnn_target.kv_codes(kv_fixed)
    # A hybrid's conv and recurrent states cross as float (the HTP quantizes them at the
    # boundary), each with one range for every graph's input and output.
    states = dict(zip(*state_io_names(shape.linear_layers, chunk=False), strict=True))
    state_fixed = qnn_target.state_ranges(samples, names, states) if quantized and states else {}
    fixed = {**kv_fixed, **state_fixed}
    for name, file in tqdm(files.items(), desc=f"quantize {opts.precision}", unit="graph", leave=False):
        prepared = build / "qdq" / ("fp32_" + file)
        qnn_target.prepare_graph(build / "fp32" / file, prepared, fuse_norms=quantized)
        device_graphs[name] = prepared
        if quantized:
            device_graphs[name] = build / "qdq" / file
            body = name.split(":")[0] in ("prefill", "decode")
            qnn_target.quantize_graph(prepared, device_graphs[name], samples[name], precision,
                                      fixed_ranges=fixed if body else None)
            if body:
                qnn_target.quantized_kv_io(device_graphs[name], kv_codes)
    if quantized:
        llm["kv"]["dtype"] = "uint16"
    calibration = {"file": "calibration.txt", "sequences": [len(t) for t in tokens], "decode_steps": DECODE_STEPS,
                   "media_prompts": [len(p[0]) for p in prompts],
                   "samples_per_graph_and_sequence": SAMPLES_PER_SEQUENCE, "range_widening": qnn_target.RANGE_WIDENING}
    state_io: dict[str, Any] | None = None
    if states:
        state_io = {"dtype": "float32", "prefill": "the delta rule token by token (in fp16 the chunked rule's "
                    "states come out wrong on the HTP: benchmarks/hybrid_htp_probe.py)"}
        if state_fixed:
            state_io["ranges_inside"] = {n: list(state_fixed[n]) for n in states}
    return _Graphs(groups, files, device_graphs, llm, kv_codes, held_out, calibration, caches,
                   state_layout_version(shape), state_io)


@dataclass
class _Component:
    plan: Path
    identity: dict[str, str]
    facts: dict[str, Any]


def _soc_component(model: Any, checkpoint: Path, out: Path, build: Path, opts: LlmExportOptions, g: _Graphs,
                   soc_key: str, soc: Soc) -> _Component:
    """One SoC's component: context binaries, plan, validation on the HTP backend, manifest."""
    precision = qnn_target.PRECISIONS[opts.precision]
    component = f"thinker-qnn-{soc_key}-{opts.precision}"
    cdir = new_component(out / component, checkpoint, [qnn_target.CALIBRATION_TEXT])
    if opts.keep_qdq:
        _keep_sources(g.device, g.files, cdir / "qdq")
    # 4. Context binaries for this SoC (the compile itself runs on this host).
    compile_s = _compile(g.files, g.device, cdir, soc, precision, False, f"compile for {soc_key}")
    plan_path = write_plan(out, f"{checkpoint.name} (QNN HTP {soc_key}, {opts.precision})",
                           thinker_stage(component, g.llm, npu_groups(g.groups)))
    identity = dict(checkpoint_id=checkpoint.name, checkpoint_revision="local", precision=opts.precision,
                    shape_bucket=shape_bucket(opts, g.caches), target_abi=f"qnn-htp-v{soc.htp_arch}")
    # 5. Validation on the HTP backend, through the native engine.
    limits = QUANTIZED_LIMITS[opts.precision]
    numerical, task = validate_llm(model, plan_path, cdir / "tokenizer.json", identity, opts.validate,
                                   threads=opts.threads, limits=limits)
    if opts.validate:
        per_graph = qnn_target.graph_sqnr(build / "fp32", cdir,
                                          {k: f for k, f in g.files.items() if not k.startswith("embed")}, g.held_out,
                                          codes=g.kv_codes)
        numerical = replace(numerical, checks=numerical.checks + tuple(
            ReportCheck(f"graph_sqnr_db.{name}", v, limits["logit_sqnr_db"] - 10, ">=")
            for name, v in sorted(per_graph.items())))
    write_report(cdir / "reports" / "numerical.json", numerical)
    write_report(cdir / "reports" / "task.json", task)
    facts = {**qnn_target.describe(soc, opts.precision, precision, g.kv_codes),
             **({"recurrent_state_io": g.state_io} if g.state_io else {}), "graphs": _graph_facts(cdir, g.files),
             "versions": qnn_target.versions(), "compile_seconds": round(compile_s, 2),
             "weight_sharing": False, "calibration": g.calibration}
    write_manifest(cdir, component, _metadata(identity, facts, numerical, task, g.layout),
                   extra_metadata={"qnn": facts, "llm": _llm_facts(opts, g), **checkpoint_source(checkpoint)})
    return _Component(plan_path, identity, facts)


def _llm_facts(opts: LlmExportOptions, g: _Graphs) -> dict[str, Any]:
    return {"kv": opts.kv, "caches": g.caches, "prefill_chunk": opts.prefill_chunk}


def npu_groups(groups: dict[str, Any], shared: dict[str, str] | None = None) -> dict[str, Any]:
    """The plan's graph groups on the NPU (their EPContext models); `shared`: the session options
    of the roles whose graphs share one context."""
    return {role: {"backend": "onnxruntime", "device": "npu",
                   "graphs": {k: qnn_target.ctx_name(v) for k, v in g["graphs"].items()},
                   **({"options": shared} if shared and role in SHARED_ROLES else {})}
            for role, g in groups.items()}


def _keep_sources(graphs: dict[str, Path], files: dict[str, str], out: Path) -> None:
    """The graphs the context binaries were compiled from, as qdq/<graph>.onnx + .data."""
    import onnx

    out.mkdir()
    for name, file in files.items():
        onnx.save(onnx.load(str(graphs[name])), str(out / file), save_as_external_data=True, location=file + ".data")


def _metadata(identity: dict[str, str], facts: dict[str, Any], numerical: ValidationReport,
              task: ValidationReport, layout: int) -> ArtifactMetadata:
    versions = facts["versions"]
    return ArtifactMetadata(
        **identity, runtime="onnxruntime-qnn", runtime_version=versions["onnxruntime_qnn"], adapter_version="1",
        exporter_version=__version__, compiler_version=f"qnn-{versions['qnn_sdk']}", state_layout_version=layout,
        calibration_file="calibration.txt",
        numerical_validation=ValidationRef("reports/numerical.json", numerical.passed),
        task_validation=ValidationRef("reports/task.json", task.passed))


def _shared_twin(out: Path, checkpoint: Path, opts: LlmExportOptions, g: _Graphs, soc_key: str, soc: Soc,
                 twin_of: _Component) -> Path:
    """The same quantized graphs with prefill and decode in one weight-shared context binary.

    The x86 HTP backend of QNN 2.51 refuses to load a context holding several graphs
    (QNN_COMMON_ERROR_NOT_SUPPORTED), so this twin cannot be validated here: its manifest names
    the validated twin built from the identical graphs and does not claim qualification."""
    component = f"thinker-qnn-{soc_key}-{opts.precision}-shared"
    cdir = new_component(out / component, checkpoint, [qnn_target.CALIBRATION_TEXT])
    compile_s = _compile(g.files, g.device, cdir, soc, qnn_target.PRECISIONS[opts.precision], True,
                         f"compile shared for {soc_key}")
    share_options = {"ort.ep.share_ep_contexts": "1"}  # one loaded context serves every session
    plan_path = write_plan(out, f"{checkpoint.name} (QNN HTP {soc_key}, {opts.precision}, shared weights)",
                           thinker_stage(component, g.llm, npu_groups(g.groups, share_options)))
    twin, facts = component.removesuffix("-shared"), twin_of.facts
    shared_facts = {**facts, "graphs": _graph_facts(cdir, g.files), "compile_seconds": round(compile_s, 2),
                    "weight_sharing": {"roles": list(SHARED_ROLES), "same_quantized_graphs_as": twin,
                                       "not_validated_because": "the x86 HTP emulator (QNN "
                                       f"{facts['versions']['qnn_sdk']}) cannot load multi-graph contexts; "
                                       f"validate on a device ({twin} is the emulator-validated twin)"}}
    numerical, task = validate_llm(None, plan_path, cdir / "tokenizer.json", twin_of.identity, enabled=False)
    write_report(cdir / "reports" / "numerical.json", numerical)
    write_report(cdir / "reports" / "task.json", task)
    write_manifest(cdir, component, _metadata(twin_of.identity, facts, numerical, task, g.layout),
                   extra_metadata={"qnn": shared_facts, "llm": _llm_facts(opts, g), **checkpoint_source(checkpoint)})
    return plan_path
