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

from omni_edge.artifacts import new_component
from omni_edge.export.models.pi0.graphs import PolicyShape, expert_bias, prefix_positions, rope_tables, time_embedding
from omni_edge.export.models.pi0.onnx import ONNX_GRAPHS
from omni_edge.export.models.pi0.plan import COMPONENT, GRAPH_KEYS
from omni_edge.export.models.pi0.reference import Policy, load_policy, observation_pixels, prompt_ids, reference_actions
from omni_edge.export.models.pi0.validation import synthetic_observation
from omni_edge.export.options import PolicyExportOptions
from omni_edge.export.policy import HtpPolicy, compile_for_socs
from omni_edge.export.targets import qnn_target


def _graph_inputs(fp32_dir: Path, section: dict[str, Any], obs: dict[str, Any],
                  policy: Policy) -> dict[str, list[list[np.ndarray]]]:
    """Each graph's inputs (by graph key) for the synthetic observation, computed by the fp32 graphs before it."""
    import onnxruntime as ort

    session = {role: ort.InferenceSession(str(fp32_dir / file), providers=["CPUExecutionProvider"])
               for role, file in ONNX_GRAPHS.items()}
    pixels = [p[None] for p in observation_pixels(obs["images"].values(), int(section["image_size"]))]
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


def export_policy_qnn(checkpoint: Path, out: Path, opts: PolicyExportOptions) -> list[Path]:
    from omni_edge.export.models.pi0.export import export

    precision = opts.precision
    if precision != "fp16":
        raise ValueError(f"a policy compiles at fp16 for qnn-htp so far, not {precision!r}")
    targets = [(key, *qnn_target.check_target(key, precision)) for key in opts.socs]  # refuse before any work
    cpu_plan = export(checkpoint, out, replace(opts, target="cpu", precision=""))[0]
    cpu_copy = out / "plan.cpu.json"
    shutil.copy2(cpu_plan, cpu_copy)
    plan = json.loads(cpu_plan.read_text())
    stage = plan["stages"][0]
    section = stage["policy"]
    shape = PolicyShape.from_section(section)
    policy = load_policy(checkpoint)
    with tempfile.TemporaryDirectory() as tmp:
        obs = synthetic_observation(Path(tmp), shape, seed=11)  # held out: not the CPU export's observation
        ref = None
        if opts.validate:
            ref = reference_actions(policy, observation_pixels(obs["images"].values(), shape.image_size), obs["prompt"],
                                    obs["state"], obs["noise"])
        htp = HtpPolicy("π0 policy", "policy", ONNX_GRAPHS, GRAPH_KEYS, lambda path: new_component(path, checkpoint),
                        _graph_inputs(out / COMPONENT, section, obs, policy), ref, obs, shape.bucket)
        plans = compile_for_socs(out, checkpoint, plan, targets, precision, htp, out / COMPONENT, opts.threads)
    return [*plans, cpu_copy]
