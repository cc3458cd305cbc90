"""What every policy architecture's export shares: the action spec a plan declares, each graph
checked against its module (SQNR), the whole chunk through the native session, the chunk's
agreement with a reference, and the HTP compile loop (per SoC: compile, check, plan, validate)."""

from __future__ import annotations

import importlib.metadata as md
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from omni_edge.artifacts import identity_report, pending_task, write_validated
from omni_edge.contracts import ReportCheck, ValidationReport
from omni_edge.export.comparison import sqnr_db
from omni_edge.files import write_text_atomic

DEFAULT_DT_MS = 20.0    # 50 Hz control when the checkpoint does not say

ACTION_MAX_ABS = 1e-4   # fp32 graphs against transformers, the whole chunk after every step


# ExecuTorch's XNNPACK kernels approximate (its graphs measure 74-84 dB against the modules where
# ONNX Runtime's measure 125-137 dB); ten flow steps then end 1.5e-4 from the reference (tiny).
ACTION_MAX_ABS_BY_RUNTIME = {"onnxruntime": ACTION_MAX_ABS, "executorch": 1e-3}


GRAPH_SQNR_DB = 60.0    # each graph against its module: summation order only


def action_spec(path: Path | None, action_dim: int) -> dict[str, Any]:
    """--action-spec FILE ({"names": [...], "units": [...], "dt_ms": ...}), or the checkpoint's
    undeclared default: a0..aN in normalized units at 50 Hz."""
    spec: dict[str, Any] = {"schema_version": 1, "names": [f"a{i}" for i in range(action_dim)],
                            "units": ["normalized"] * action_dim, "dt_ms": DEFAULT_DT_MS}
    if path is not None:
        given = json.loads(path.read_text())
        unknown = set(given) - {"names", "units", "dt_ms"}
        if unknown:
            raise ValueError(f"{path}: unknown fields {sorted(unknown)} (names, units, dt_ms)")
        for key in ("names", "units"):
            if key in given and (not isinstance(given[key], list) or len(given[key]) != action_dim
                                 or not all(isinstance(v, str) and v for v in given[key])):
                raise ValueError(f"{path}: {key} needs {action_dim} entries, one non-empty string per action dimension")
        if "names" in given and len(set(given["names"])) != action_dim:
            raise ValueError(f"{path}: names: each action dimension has its own name")
        dt = given.get("dt_ms", DEFAULT_DT_MS)
        if isinstance(dt, bool) or not isinstance(dt, (int, float)) or not 0 < dt <= 60000:
            raise ValueError(f"{path}: dt_ms: the control period in ms, in (0, 60000]")
        spec.update(given)
    return spec


def graph_sqnr(examples: Any, run: Any) -> dict[str, float]:
    """Each graph's worst output SQNR against its module; run(name, feeds) -> outputs."""
    out = {}
    for name, (module, args, inputs, _) in examples.items():
        with torch.no_grad():
            ref = module(*args)
        refs = [r.numpy() for r in (ref if isinstance(ref, tuple) else (ref,))]
        got = run(name, {n: a.numpy() for n, a in zip(inputs, args, strict=True)})
        out[name] = min(sqnr_db(r, o) for r, o in zip(refs, got, strict=True))
    return out


def export_onnx(cdir: Path, examples: dict[str, Any], bar: Any) -> dict[str, float]:
    """Each example graph as an ONNX Runtime graph (name.onnx), checked against its module, all
    sharing one weights file; the SQNR per graph."""
    from omni_edge.export.targets import onnx_target

    for name, (module, args, inputs, outputs) in examples.items():
        bar.set_postfix_str(name)
        onnx_target.export_graph(module, args, inputs, outputs, cdir / f"{name}.onnx")
        bar.update()
    sqnrs = graph_sqnr(examples, lambda name, feeds: onnx_target.cpu_session(cdir / f"{name}.onnx").run(None, feeds))
    onnx_target.share_weights(cdir, [f"{name}.onnx" for name in examples])
    return sqnrs


def native_actions(plan: Path, observation: dict[str, Any], threads: int = 0) -> tuple[np.ndarray, dict[str, Any]]:
    """The action chunk and its event from the native session on `plan`, captured now.
    observation["images"]: camera -> a file, or a list of files (its frame history, oldest
    first)."""
    from omni_edge.runtime import Session
    from omni_edge.runtime.request import CameraImage, Observation, Request

    images = tuple(CameraImage(cam, str(f)) for cam, files in observation["images"].items()
                   for f in (files if isinstance(files, (list, tuple)) else [files]))
    events: list[dict[str, Any]] = []
    with Session.open(plan, allow_unqualified=True, threads=threads) as session:
        # Captured once the session is open: loading graphs (HTP context binaries) takes seconds
        # that would age it past the plan's limit.
        request = Request(prompt=observation["prompt"], observation=Observation(
            timestamp_ms=time.time() * 1000.0, images=images, state=tuple(float(v) for v in observation["state"]),
            noise=tuple(tuple(float(v) for v in row) for row in observation["noise"])))
        session.submit(request, lambda stream, event, pcm: events.append(event))
    actions = [e for e in events if e["kind"] == "action"]
    if len(actions) != 1:
        raise RuntimeError(f"the policy session emitted {[e['kind'] for e in events]}, not one action")
    return np.asarray(actions[0]["actions"], np.float32), actions[0]


def agreement_checks(got: np.ndarray, ref: np.ndarray,
                     limit: float = ACTION_MAX_ABS) -> tuple[tuple[ReportCheck, ...], dict[str, Any]]:
    """Max abs and relative error over the chunk, and per step of the chunk."""
    err = np.abs(got - ref)
    per_step_abs = err.max(axis=1)
    per_step_rel = (err / np.maximum(np.abs(ref), 1e-6)).max(axis=1)
    # The gated check: the share of the chunk's values within `limit` of the reference (all).
    checks = (ReportCheck("action_agreement", float((err <= limit).mean()), 1.0, ">="),
              ReportCheck("action_max_abs", float(err.max()), limit, "<="))
    detail = {"per_step_max_abs": [float(v) for v in per_step_abs], "per_step_max_rel": [float(v) for v in per_step_rel],
              "max_abs": float(err.max()), "max_rel": float(per_step_rel.max()),
              "reference_max_abs_value": float(np.abs(ref).max())}
    return checks, detail


def validate_component(cdir: Path, component: str, runtime: str, plan: Path, identity: dict[str, str], sqnrs: dict[str, float],
              obs: dict[str, Any], ref: np.ndarray, extra: dict[str, Any], threads: int, bar: Any) -> None:
    """The component's reports: each graph's SQNR, and the whole chunk natively against the
    reference (a provisional manifest first: the session verifies the component before it runs
    it)."""
    numerical = identity_report("numerical", identity, tuple(ReportCheck(f"{n}_sqnr_db", v, GRAPH_SQNR_DB, ">=")
                                                             for n, v in sqnrs.items()))
    _write_manifest(cdir, component, runtime, identity, numerical, pending_task(identity), {})
    bar.set_postfix_str(f"{component}: native chunk vs sample_actions")
    got, _ = native_actions(plan, obs, threads)
    bar.update()
    checks, detail = agreement_checks(got, ref, ACTION_MAX_ABS_BY_RUNTIME[runtime])
    _write_manifest(cdir, component, runtime, identity, numerical, identity_report("task", identity, checks),
              {"policy": {**extra, "agreement": detail}})


def _write_manifest(cdir: Path, component: str, runtime: str, identity: dict[str, str], numerical: ValidationReport,
              task: ValidationReport, extra: dict[str, Any]) -> None:
    write_validated(cdir, component, identity, numerical, task, runtime=runtime, runtime_version=md.version(runtime),
                    compiler_version=f"torch-{torch.__version__}", extra_metadata=extra)


# fp16 on the HTP against fp32 (per graph output), and the whole chunk after the flow at fp16.
HTP_GRAPH_SQNR_DB = 30.0
HTP_ACTION_SQNR_DB = 25.0


@dataclass
class HtpPolicy:
    """What a policy family gives the shared HTP compile loop."""

    name: str                                  # in plan names: "π0 policy", "InternVLA-A1"
    section: str                               # the plan stage's section: "policy", "internvla"
    graphs: dict[str, str]                     # role -> the fp32 ONNX file in the CPU component
    graph_keys: dict[str, str]                 # role -> the plan's graph key
    new_component: Callable[[Path], Path]      # an empty component directory at this path
    samples: dict[str, list[list[np.ndarray]]]  # graph key -> held-out inputs
    reference: np.ndarray | None               # the chunk the native session must give (None: no validation)
    observation: dict[str, Any]                # that observation, as native_actions takes it
    bucket: str
    # Roles compiled at a weight-quantized precision (w8a16) when one is asked for; the others
    # stay fp16 (where the quantized graph does not keep its numbers, or the HTP refuses it).
    quantized: frozenset[str] = frozenset()


def compile_for_socs(out: Path, checkpoint: Path, plan: dict[str, Any], targets: list[tuple[str, Any, Any]],
                     precision: str, p: HtpPolicy, fp32_dir: Path, threads: int) -> list[Path]:
    """Per SoC: every graph compiled (CPU fallback disabled) into policy-qnn-<soc>-<precision>/,
    each against its fp32 graph on the held-out inputs, plan.qnn-<soc>-<precision>.json placing
    every graph on the NPU, and the whole chunk natively on the HTP against the reference."""
    from tqdm import tqdm

    from omni_edge.export.targets import qnn_target

    stage = plan["stages"][0]
    section = stage[p.section]
    cpu_identity = dict(section["identity"])
    build = out / ".build-qnn-policy"
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir(parents=True)
    plans: list[Path] = []
    for soc_key, soc, prec in tqdm(targets, desc=f"compile {p.name}", unit="SoC", leave=False):
        component = p.new_component(out / f"policy-qnn-{soc_key}-{precision}")
        refs, precisions = {}, {}
        for role, file in p.graphs.items():
            prepared = build / f"fp32_{file}"
            if not prepared.exists():
                qnn_target.prepare_graph(fp32_dir / file, prepared, fuse_norms=False)
            source, graph_precision = prepared, "fp16"
            if prec.weights != "fp16" and role in p.quantized:
                source, graph_precision = build / "qdq" / file, precision
                if not source.exists():
                    source.parent.mkdir(exist_ok=True)
                    # The attention bias (0 or -65504) would leave 16-bit activations a step of 1.0
                    # on the scores: its add, the softmax and the norms run in float on the HTP.
                    qnn_target.quantize_graph(prepared, source, p.samples[p.graph_keys[role]], prec,
                                              exclude_nodes=qnn_target.float_nodes(prepared))
            refs[role] = qnn_target.compile_context(source, component, soc,
                                                    qnn_target.PRECISIONS[graph_precision]).name
            precisions[role] = graph_precision
        sqnr = qnn_target.graph_sqnr(fp32_dir, component, {p.graph_keys[r]: f for r, f in p.graphs.items()}, p.samples,
                                     all_outputs=True)
        stage["artifact"] = component.name
        section["identity"] = {**cpu_identity, "artifact": component.name, "precision": precision}
        stage["graphs"] = {role: {"backend": "onnxruntime", "device": "npu", "graphs": {p.graph_keys[role]: refs[role]}}
                           for role in p.graph_keys}
        plan["name"] = f"{checkpoint.name} ({p.name} on the {soc_key} HTP, {precision})"
        plan_path = out / f"plan.qnn-{soc_key}-{precision}.json"
        write_text_atomic(plan_path, json.dumps(plan, indent=2) + "\n")
        identity = dict(checkpoint_id=checkpoint.name, checkpoint_revision="local", precision=precision,
                        shape_bucket=p.bucket, target_abi=f"qnn-htp-v{soc.htp_arch}")
        numerical = identity_report("numerical", identity, tuple(
            ReportCheck(f"{k}_sqnr_db", round(v, 2), HTP_GRAPH_SQNR_DB, ">=") for k, v in sqnr.items()))
        task = pending_task(identity)
        detail: dict[str, Any] = {}
        if p.reference is not None:
            qnn_target.write_component(component, identity, numerical, task, soc, prec, {})  # the session verifies it
            got, _ = native_actions(plan_path, p.observation, threads)
            _, detail = agreement_checks(got, p.reference)
            chunk_db = round(float(sqnr_db(p.reference, got)), 2)
            detail["chunk_sqnr_db"] = chunk_db
            task = identity_report("task", identity, (ReportCheck("action_agreement_sqnr_db", chunk_db,
                                                                  HTP_ACTION_SQNR_DB, ">="),))
        qnn_target.write_component(component, identity, numerical, task, soc, prec, {"policy": {
            "graphs": refs, "graph_precisions": precisions, "sqnr_db": {k: round(v, 2) for k, v in sqnr.items()},
            "agreement": detail}})
        plans.append(plan_path)
    shutil.rmtree(build)
    shutil.copy2(plans[0], out / "plan.json")
    return plans
