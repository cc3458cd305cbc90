"""`omni-edge export policy` on an InternVLA-A1 checkpoint (--target qnn-htp: qnn.py): one component (policy-onnx: the
vision, frame, context and action-expert graphs sharing one weights file, the tokenizer) and a
plan whose internvla stage runs preprocessing, the frame history and the denoising loop natively.

Reports: numerical: each graph against its module (SQNR); task: the whole chunk (its first
action_dim values per step) through the native session against reference.sample_actions on a
synthetic observation, max abs and relative error per step of the chunk."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from tqdm import tqdm

from omni_edge import __version__
from omni_edge.artifacts import new_component
from omni_edge.export.models.internvla_a1.checkpoint import DEFAULT_CAMERAS
from omni_edge.export.models.internvla_a1.graphs import PolicyShape, graph_examples
from omni_edge.export.models.internvla_a1.model import load, read_config
from omni_edge.export.models.internvla_a1.onnx import ONNX_GRAPHS
from omni_edge.export.models.internvla_a1.plan import COMPONENT, policy_stage
from omni_edge.export.models.internvla_a1.reference import sample_actions, task_ids
from omni_edge.export.models.internvla_a1.validation import synthetic_observation
from omni_edge.export.options import PolicyExportOptions
from omni_edge.export.policy import action_spec, export_onnx, validate_component
from omni_edge.files import write_text_atomic


def export(checkpoint: Path, out: Path, opts: PolicyExportOptions) -> list[Path]:
    """policy-onnx (and with --format pte|both policy-pte) and their plans: plan.json is the ONNX
    one (plan.pte.json the ExecuTorch one; with --format pte alone, plan.json)."""
    if opts.target == "qnn-htp":
        from omni_edge.export.models.internvla_a1.qnn import export_policy_qnn

        return export_policy_qnn(checkpoint, out, opts)
    config = read_config(checkpoint)
    model = load(checkpoint, config)
    cameras = tuple(opts.cameras) if opts.cameras else DEFAULT_CAMERAS
    shape = PolicyShape.of(config, cameras, opts.prompt_tokens)
    spec = action_spec(opts.action_spec, config.action_dim)
    tokenizer = checkpoint / "processor" / "tokenizer.json"
    out.mkdir(parents=True, exist_ok=True)
    examples = graph_examples(model, shape)
    identity = dict(checkpoint_id=checkpoint.name, checkpoint_revision="local", precision="fp32",
                    shape_bucket=shape.bucket, target_abi="x86_64-linux")
    plans = []
    with tempfile.TemporaryDirectory() as tmp, tqdm(total=5 * len(opts.formats), desc="export InternVLA-A1 policy",
                                                    unit="graph", leave=False) as bar:
        native_obs, ref_obs = synthetic_observation(Path(tmp), shape)
        ref, _ = sample_actions(model, ref_obs, task_ids(checkpoint / "processor", ref_obs.task))
        for fmt in ("onnx", "pte"):
            if fmt not in opts.formats:
                continue
            component = COMPONENT if fmt == "onnx" else "policy-pte"
            cdir = new_component(out / component, checkpoint, extra=[tokenizer], required=("config.json",))
            if fmt == "onnx":
                sqnrs, refs, backend = export_onnx(cdir, examples, bar), ONNX_GRAPHS, "onnxruntime"
            else:
                from omni_edge.export.models.internvla_a1.pte import export_pte

                sqnrs, refs, backend = (*export_pte(cdir, examples, bar), "executorch")
            name = "plan.json" if fmt == "onnx" or "onnx" not in opts.formats else "plan.pte.json"
            stage = policy_stage(shape, config, spec, {"checkpoint_id": identity["checkpoint_id"],
                                                       "checkpoint_revision": "local", "artifact": component,
                                                       "precision": "fp32", "exporter_version": __version__},
                                 opts.max_observation_age_ms, component, backend, refs)
            write_text_atomic(out / name, json.dumps({"plan_version": 1, "name": f"{checkpoint.name} (InternVLA-A1, {fmt})",
                                                      "stages": [stage]}, indent=2) + "\n")
            validate_component(cdir, component, backend, out / name, identity, sqnrs, native_obs, ref[:, :config.action_dim],
                      {"cameras": list(cameras), "graphs": refs, "actions": spec, "action_mode": config.action_mode},
                      opts.threads, bar)
            plans.append(out / name)
    return plans
