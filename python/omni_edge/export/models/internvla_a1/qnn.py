"""`omni-edge export policy --target qnn-htp` on an InternVLA-A1 checkpoint: its four graphs as
QNN HTP context binaries per SoC, at fp16, validated on the HTP backend (the emulator here).

The CPU export runs first (its fp32 graphs are what gets compiled; OUT/plan.cpu.json is its
plan). Per SoC, vision, frame, context and expert are compiled with CPU fallback disabled (an op
the HTP refuses is named) into `policy-qnn-<soc>-fp16/`, and `plan.qnn-<soc>-fp16.json` runs the
whole stage on the NPU (OUT/plan.json is the first SoC's). The rotary tables, biases and the time
embedding stay inputs computed by the controller in float32/float64.

Validation: each compiled graph against its fp32 graph on a held-out observation's own inputs
(SQNR per output), and the whole chunk through the native session on the HTP against
reference.sample_actions (the chunk's SQNR and max abs error per step)."""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from omni_edge.artifacts import new_component
from omni_edge.export.models.internvla_a1.graphs import PolicyShape
from omni_edge.export.models.internvla_a1.model import HISTORY, InternVLAA1, load, read_config
from omni_edge.export.models.internvla_a1.onnx import ONNX_GRAPHS
from omni_edge.export.models.internvla_a1.plan import COMPONENT, GRAPH_KEYS
from omni_edge.export.models.internvla_a1.reference import (
    Context,
    Observation,
    cosmos_input,
    patches,
    resize_with_pad,
    sample_actions,
    step_inputs,
    task_ids,
    time_embedding,
)
from omni_edge.export.models.internvla_a1.validation import synthetic_observation
from omni_edge.export.options import PolicyExportOptions
from omni_edge.export.policy import HtpPolicy, compile_for_socs
from omni_edge.export.targets import qnn_target

# w8a16: the decoders' weights (the context graph's understanding and generation experts, the
# action expert: 2.6 of 3.03 B) at 8 bits. The vision tower stays fp16 (the HTP runs neither a
# quantized nor a float Erf of its merger's GELU in a quantized graph), and so does Cosmos (its
# convolutions with one weight scale per tensor measured 30.3 dB, at the limit).
QUANTIZED = frozenset({"context", "expert"})


def _graph_inputs(model: InternVLAA1, obs: Observation, ctx: Context) -> dict[str, list[list[np.ndarray]]]:
    """Each graph's inputs (by graph key) for a held-out observation: its frames, and the context
    (keys and values included) sample_actions computed for it."""
    c = model.config
    v = c.sizes.vision
    vision, frames = [], []
    for views in obs.frames:
        if views is None:
            continue
        stack = resize_with_pad(torch.from_numpy(views).float(), c.image_resolution)
        vision.append([patches(stack[-1], v.patch, v.merge, v.temporal_patch).numpy()])
        frames += [[cosmos_input(stack[f]).numpy()] for f in range(HISTORY)]
    assert ctx.keys is not None and ctx.values is not None
    cos, sin, bias, state = (t.numpy() for t in step_inputs(c, ctx, obs))
    steps = [[ctx.keys.numpy(), ctx.values.numpy(), bias, obs.noise[None],
              time_embedding(t, c.sizes.expert.hidden, c.min_period, c.max_period).numpy(), state, cos, sin]
             for t in (1.0, 0.5, 0.1)]
    context = [ctx.ids.numpy(), ctx.image_rows.numpy(), ctx.history_rows.numpy(), ctx.bias.numpy(), ctx.cos.numpy(),
               ctx.sin.numpy()]
    return {"image": vision, "frame": frames, "context": [context], "step": steps}


def export_policy_qnn(checkpoint: Path, out: Path, opts: PolicyExportOptions) -> list[Path]:
    from omni_edge.export.models.internvla_a1.export import export

    precision = opts.precision
    if precision not in ("fp16", "w8a16"):
        raise ValueError(f"InternVLA-A1 compiles at fp16 or w8a16 for qnn-htp, not {precision!r}")
    targets = [(key, *qnn_target.check_target(key, precision)) for key in opts.socs]  # refuse before any work
    for key in opts.socs:  # w8a16 keeps vision and Cosmos at fp16: the SoC must run fp16 too
        qnn_target.check_target(key, "fp16")
    cpu_plan = export(checkpoint, out, replace(opts, target="cpu", precision=""))[0]
    cpu_copy = out / "plan.cpu.json"
    shutil.copy2(cpu_plan, cpu_copy)
    plan = json.loads(cpu_plan.read_text())
    section = plan["stages"][0]["internvla"]
    config = read_config(checkpoint)
    model = load(checkpoint, config)
    shape = PolicyShape.of(config, tuple(section["cameras"]))
    tokenizer = checkpoint / "processor" / "tokenizer.json"
    with tempfile.TemporaryDirectory() as tmp:
        native_obs, ref_obs = synthetic_observation(Path(tmp), shape, seed=11)  # held out: not the CPU export's
        chunk, ctx = sample_actions(model, ref_obs, task_ids(checkpoint / "processor", ref_obs.task))
        ref = chunk[:, :config.action_dim] if opts.validate else None
        policy = HtpPolicy("InternVLA-A1", "internvla", ONNX_GRAPHS, GRAPH_KEYS,
                           lambda path: new_component(path, checkpoint, extra=[tokenizer], required=("config.json",)),
                           _graph_inputs(model, ref_obs, ctx), ref, native_obs, shape.bucket, QUANTIZED)
        plans = compile_for_socs(out, checkpoint, plan, targets, precision, policy, out / COMPONENT, opts.threads)
    return [*plans, cpu_copy]
