"""`omni-edge export policy --target qnn-htp`: a π0 policy's three graphs as QNN HTP context
binaries, per SoC, validated on the HTP backend (the emulator here).

The CPU export runs first (its fp32 graphs are what gets compiled; OUT/plan.cpu.json is its
plan). Per SoC, vision, prefix and expert are compiled at fp16 with CPU fallback disabled (an op
the HTP refuses is named) into `policy-qnn-<soc>-fp16/`, and `plan.qnn-<soc>-fp16.json` runs the
whole policy stage on the NPU (OUT/plan.json is the first SoC's).

Validation: each compiled graph against its fp32 graph on the synthetic observation's own inputs
(SQNR), and the whole chunk through the native session on the HTP against sample_actions (SQNR
of the chunk and its max abs error, reported per step of the chunk)."""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from omni_edge import __version__
from omni_edge.artifacts import new_component, write_manifest, write_report
from omni_edge.contracts import ArtifactMetadata, ReportCheck, ValidationRef, ValidationReport
from omni_edge.export import qnn_target
from omni_edge.export.comparison import sqnr_db
from omni_edge.export.pi0 import camera_pixels, load_policy, reference_actions
from omni_edge.export.pi0_export import (
    COMPONENT,
    agreement_checks,
    native_actions,
    prefix_positions,
    synthetic_observation,
)
from omni_edge.export.pi0_graphs import expert_bias, rope_tables, time_embedding
from omni_edge.files import write_text_atomic
from tqdm import tqdm

GRAPHS = {"vision": ("image", "vision.onnx"), "prefix": ("prefix", "prefix.onnx"), "expert": ("step", "expert.onnx")}
# fp16 on the HTP against fp32 (the tiny checkpoint on the sm8750 emulator measured 50-70 dB per graph).
GRAPH_SQNR_DB = 30.0
ACTION_SQNR_DB = 25.0  # the whole chunk after ten flow steps at fp16


def _graph_inputs(fp32_dir: Path, plan: dict[str, Any], obs: dict[str, Any], policy: Any) -> dict[str, list[list[np.ndarray]]]:
    """Each graph's inputs for the synthetic observation, computed by the fp32 graphs before it."""
    import onnxruntime as ort
    from omni_edge.export.pi0 import prompt_ids
    from PIL import Image

    section = plan["stages"][0]["policy"]
    session = {g: ort.InferenceSession(str(fp32_dir / f), providers=["CPUExecutionProvider"])
               for g, (_, f) in GRAPHS.items()}
    pixels = [camera_pixels(Image.open(p), int(section["image_size"]))[None] for p in obs["images"].values()]
    rows = np.concatenate([session["vision"].run(None, {"pixel_values": p})[0] for p in pixels], axis=1)
    ids = prompt_ids(policy, obs["prompt"])
    prompt = np.zeros((1, int(section["prompt_tokens"])), np.int64)
    prompt[0, :len(ids)] = ids
    mask = np.zeros((1, rows.shape[1] + prompt.shape[1]), np.int64)
    mask[0, :rows.shape[1] + len(ids)] = 1
    cos, sin = (t.numpy() for t in rope_tables(section["rope_inv_freq"], prefix_positions(mask[0].tolist())))
    keys, values = session["prefix"].run(None, {"image_rows": rows, "prompt_ids": prompt, "mask": mask, "rope_cos": cos,
                                                "rope_sin": sin})
    state = np.zeros((1, int(section["state_dim"])), np.float32)
    state[0, :len(obs["state"])] = obs["state"]
    valid = int(mask.sum())
    e_cos, e_sin = (t.numpy() for t in rope_tables(section["expert_rope_inv_freq"],
                                                   range(valid, valid + int(section["chunk_size"]) + 1)))
    steps = [time_embedding(section["time_freq"], t).numpy() for t in (1.0, 0.5, 0.1)]
    bias = expert_bias(mask[0].tolist(), int(section["chunk_size"])).numpy()
    return {"image": [[p] for p in pixels], "prefix": [[rows, prompt, mask, cos, sin]],
            "step": [[keys, values, bias, obs["noise"][None], t, state, e_cos, e_sin] for t in steps]}


def export_policy_qnn(checkpoint: Path, out: Path, opts: Any) -> list[Path]:
    from omni_edge.export.pi0_export import export_policy

    precision = opts.precision or "fp16"
    if precision != "fp16":
        raise ValueError(f"a policy compiles at fp16 for qnn-htp so far, not {precision!r}")
    targets = [(key, *qnn_target.check_target(key, precision)) for key in opts.socs]  # refuse before any work
    cpu_plan = export_policy(checkpoint, out, replace(opts, target="cpu"))[0]
    cpu_copy = out / "plan.cpu.json"
    shutil.copy2(cpu_plan, cpu_copy)
    plan = json.loads(cpu_plan.read_text())
    policy = load_policy(checkpoint)
    fp32_dir = out / COMPONENT
    build = out / ".build-qnn-policy"
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir(parents=True)
    plans: list[Path] = []
    with tempfile.TemporaryDirectory() as tmp:
        from omni_edge.export.pi0_export import PolicyShape

        section = plan["stages"][0]["policy"]
        shape = PolicyShape(tuple(section["cameras"]), section["image_size"], section["image_tokens"], section["hidden_size"],
                            section["prompt_tokens"], section["layers"], section["kv_heads"], section["head_dim"],
                            section["chunk_size"], section["state_dim"], section["action_dim"], section["num_steps"])
        obs = synthetic_observation(Path(tmp), shape, seed=11)  # held out: not the CPU export's observation
        samples = _graph_inputs(fp32_dir, plan, obs, policy)
        ref = None
        if opts.validate:
            from PIL import Image

            ref = reference_actions(policy, [camera_pixels(Image.open(p), shape.image_size) for p in obs["images"].values()],
                                    obs["prompt"], obs["state"], obs["noise"])
        for soc_key, soc, prec in tqdm(targets, desc="compile policy", unit="SoC", leave=False):
            component = new_component(out / f"policy-qnn-{soc_key}-{precision}", checkpoint)
            refs = {}
            for role, (_, file) in GRAPHS.items():
                prepared = build / f"fp32_{file}"
                if not prepared.exists():
                    qnn_target.prepare_graph(fp32_dir / file, prepared, fuse_norms=False)
                refs[role] = qnn_target.compile_context(prepared, component, soc, prec).name
            sqnr = qnn_target.graph_sqnr(fp32_dir, component, {key: file for key, file in GRAPHS.values()}, samples,
                                         all_outputs=True)
            stage = plan["stages"][0]
            stage["artifact"] = component.name
            stage["policy"]["identity"] = {**section["identity"], "artifact": component.name, "precision": precision}
            stage["graphs"] = {role: {"backend": "onnxruntime", "device": "npu", "graphs": {GRAPHS[role][0]: refs[role]}}
                               for role in GRAPHS}
            plan["name"] = f"{checkpoint.name} (π0 policy on the {soc_key} HTP, {precision})"
            plan_path = out / f"plan.qnn-{soc_key}-{precision}.json"
            write_text_atomic(plan_path, json.dumps(plan, indent=2) + "\n")
            identity = dict(checkpoint_id=checkpoint.name, checkpoint_revision="local", precision=precision,
                            shape_bucket=section["identity"].get("shape_bucket", "") or
                            f"cams{len(shape.cameras)}-img{shape.image_size}-txt{shape.prompt_tokens}-chunk{shape.chunk}",
                            target_abi=f"qnn-htp-v{soc.htp_arch}")
            numerical = _report("numerical", identity, tuple(ReportCheck(f"{k}_sqnr_db", round(v, 2), GRAPH_SQNR_DB, ">=")
                                                             for k, v in sqnr.items()))
            task = _report("task", identity, (ReportCheck("validation_run", 0.0, 1.0, ">="),))
            detail: dict[str, Any] = {}
            if ref is not None:
                _manifest(component, identity, numerical, task, soc, prec, {})  # the session verifies it first
                got, event = native_actions(plan_path, obs, opts.threads)
                _, detail = agreement_checks(got, ref)
                chunk_db = float(sqnr_db(ref, got))
                detail.update(chunk_sqnr_db=round(chunk_db, 2), placement=event.get("model"))
                task = _report("task", identity, (ReportCheck("action_agreement_sqnr_db", round(chunk_db, 2),
                                                              ACTION_SQNR_DB, ">="),))
            _manifest(component, identity, numerical, task, soc, prec,
                      {"policy": {"graphs": refs, "sqnr_db": {k: round(v, 2) for k, v in sqnr.items()}, "agreement": detail}})
            plans.append(plan_path)
    shutil.rmtree(build)
    shutil.copy2(plans[0], out / "plan.json")
    return [*plans, cpu_copy]


def _report(kind: str, identity: dict[str, str], checks: tuple[ReportCheck, ...]) -> ValidationReport:
    return ValidationReport(kind, identity["checkpoint_id"], identity["checkpoint_revision"], identity["precision"],
                            identity["shape_bucket"], identity["target_abi"], checks)


def _manifest(component: Path, identity: dict[str, str], numerical: ValidationReport, task: ValidationReport,
              soc: qnn_target.Soc, prec: qnn_target.Precision, extra: dict[str, Any]) -> None:
    versions = qnn_target.versions()
    write_report(component / "reports" / "numerical.json", numerical)
    write_report(component / "reports" / "task.json", task)
    write_manifest(component, component.name, ArtifactMetadata(
        **identity, runtime="onnxruntime-qnn", runtime_version=versions["onnxruntime_qnn"], adapter_version="1",
        exporter_version=__version__, compiler_version=f"qnn-{versions['qnn_sdk']}", state_layout_version=1,
        numerical_validation=ValidationRef("reports/numerical.json", numerical.passed),
        task_validation=ValidationRef("reports/task.json", task.passed)),
        extra_metadata={"qnn": {**qnn_target.describe(soc, identity["precision"], prec), "versions": versions}, **extra})
