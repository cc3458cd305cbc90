"""`omni-edge export policy`: a π0 checkpoint into one component (policy-onnx: the vision,
prefix and action-expert graphs sharing one weights file, the tokenizer, the action spec) and a
plan whose policy stage runs the denoising loop natively.

Reports, against transformers on a synthetic two-image observation with fixed noise:
numerical: each graph against its module (SQNR); task: the whole chunk through the native
session against sample_actions, max abs and max relative error per step of the chunk."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from tqdm import tqdm

from omni_edge import __version__
from omni_edge.artifacts import new_component
from omni_edge.export.models.pi0.graphs import (
    PolicyShape,
    graph_examples,
)
from omni_edge.export.models.pi0.onnx import ONNX_GRAPHS
from omni_edge.export.models.pi0.plan import COMPONENT, DEFAULT_CAMERAS, policy_stage
from omni_edge.export.models.pi0.reference import (
    PROMPT_TOKENS,
    load_policy,
    observation_pixels,
    reference_actions,
)
from omni_edge.export.models.pi0.validation import synthetic_observation
from omni_edge.export.options import PolicyExportOptions
from omni_edge.export.policy import action_spec, export_onnx, validate_component
from omni_edge.files import write_text_atomic


def export(checkpoint: Path, out: Path, opts: PolicyExportOptions) -> list[Path]:
    """policy-onnx (and with --format pte|both policy-pte) and their plans: plan.json is the
    ONNX one (plan.pte.json the ExecuTorch one; with --format pte alone, plan.json)."""
    if opts.target == "qnn-htp":
        from omni_edge.export.models.pi0.qnn import export_policy_qnn

        return export_policy_qnn(checkpoint, out, opts)
    policy = load_policy(checkpoint)
    cameras = tuple(opts.cameras) if opts.cameras else DEFAULT_CAMERAS
    shape = PolicyShape.of(policy, cameras, opts.prompt_tokens or PROMPT_TOKENS)
    spec = action_spec(opts.action_spec, shape.action_dim)
    out.mkdir(parents=True, exist_ok=True)
    examples = graph_examples(policy, shape)
    revision = json.loads((checkpoint / "config.json").read_text()).get("_name_or_path", "") or "local"
    identity = dict(checkpoint_id=checkpoint.name, checkpoint_revision=revision, precision="fp32",
                    shape_bucket=shape.bucket, target_abi="x86_64-linux")
    plans = []
    with tempfile.TemporaryDirectory() as tmp, tqdm(total=4 * len(opts.formats), desc="export π0 policy", unit="graph",
                                                    leave=False) as bar:
        obs = synthetic_observation(Path(tmp), shape)
        ref = reference_actions(policy, observation_pixels(obs["images"].values(), shape.image_size), obs["prompt"],
                                obs["state"], obs["noise"])
        for fmt in ("onnx", "pte"):
            if fmt not in opts.formats:
                continue
            component = COMPONENT if fmt == "onnx" else "policy-pte"
            cdir = new_component(out / component, checkpoint)
            if fmt == "onnx":
                sqnrs, refs, backend = export_onnx(cdir, examples, bar), ONNX_GRAPHS, "onnxruntime"
            else:
                from omni_edge.export.models.pi0.pte import export_pte

                sqnrs, refs, backend = (*export_pte(cdir, examples, bar), "executorch")
            name = "plan.json" if fmt == "onnx" or "onnx" not in opts.formats else "plan.pte.json"
            stage = policy_stage(shape, policy, spec, {"checkpoint_id": identity["checkpoint_id"],
                                                       "checkpoint_revision": revision, "artifact": component,
                                                       "precision": "fp32", "exporter_version": __version__},
                                 opts.max_observation_age_ms, component, backend, refs)
            write_text_atomic(out / name, json.dumps({"plan_version": 1, "name": f"{checkpoint.name} (π0 policy, {fmt})",
                                                      "stages": [stage]}, indent=2) + "\n")
            validate_component(cdir, component, backend, out / name, identity, sqnrs, obs, ref,
                      {"cameras": list(cameras), "graphs": refs, "actions": spec}, opts.threads, bar)
            plans.append(out / name)
    return plans
