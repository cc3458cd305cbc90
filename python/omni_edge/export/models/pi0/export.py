"""`omni-edge export policy`: a π0 checkpoint into one component (policy-onnx: the vision,
prefix and action-expert graphs sharing one weights file, the tokenizer, the action spec) and a
plan whose policy stage runs the denoising loop natively.

Reports, against transformers on a synthetic two-image observation with fixed noise:
numerical: each graph against its module (SQNR); task: the whole chunk through the native
session against sample_actions, max abs and max relative error per step of the chunk."""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from omni_edge import __version__
from omni_edge.artifacts import identity_report, new_component, pending_task, write_validated
from omni_edge.contracts import ReportCheck, ValidationReport
from omni_edge.export import onnx_target
from omni_edge.export.comparison import sqnr_db
from omni_edge.export.pi0 import (
    IMAGE_MEAN,
    IMAGE_STD,
    PROMPT_SUFFIX,
    PROMPT_TOKENS,
    Policy,
    load_policy,
    observation_pixels,
    reference_actions,
)
from omni_edge.export.pi0_graphs import (
    MASK_VALUE,
    ExpertStepGraph,
    PrefixGraph,
    VisionGraph,
    expert_bias,
    rope_inv_freq,
    rope_tables,
    time_embedding,
    time_freq,
)
from omni_edge.files import write_text_atomic

COMPONENT = "policy-onnx"
ACTION_MAX_ABS = 1e-4   # fp32 graphs against transformers, the whole chunk after every step
# ExecuTorch's XNNPACK kernels approximate (its graphs measure 74-84 dB against the modules where
# ONNX Runtime's measure 125-137 dB); ten flow steps then end 1.5e-4 from the reference (tiny).
ACTION_MAX_ABS_BY_RUNTIME = {"onnxruntime": ACTION_MAX_ABS, "executorch": 1e-3}
GRAPH_SQNR_DB = 60.0    # each graph against its module: summation order only
DEFAULT_DT_MS = 20.0    # π0's 50 Hz control when the checkpoint does not say
DEFAULT_CAMERAS = ("base_0_rgb", "left_wrist_0_rgb")
TASK = "pick up the red block"


@dataclass(frozen=True)
class PolicyShape:
    cameras: tuple[str, ...]
    image_size: int
    image_tokens: int
    hidden: int
    prompt_tokens: int
    layers: int
    kv_heads: int
    head_dim: int
    chunk: int
    state_dim: int
    action_dim: int
    num_steps: int

    @classmethod
    def of(cls, policy: Policy, cameras: tuple[str, ...], prompt_tokens: int) -> PolicyShape:
        c, text = policy.config, policy.config.vlm_config.text_config
        return cls(cameras, policy.image_size, policy.image_tokens, int(text.hidden_size), prompt_tokens,
                   int(text.num_hidden_layers), int(text.num_key_value_heads), int(text.head_dim), int(c.chunk_size),
                   int(c.max_state_dim), int(c.max_action_dim), int(c.num_inference_steps))

    @classmethod
    def from_section(cls, section: dict[str, Any]) -> PolicyShape:
        """The shape a plan's policy section declares."""
        return cls(tuple(section["cameras"]), section["image_size"], section["image_tokens"], section["hidden_size"],
                   section["prompt_tokens"], section["layers"], section["kv_heads"], section["head_dim"],
                   section["chunk_size"], section["state_dim"], section["action_dim"], section["num_steps"])

    @property
    def prefix(self) -> int:
        return len(self.cameras) * self.image_tokens + self.prompt_tokens

    @property
    def bucket(self) -> str:
        """The manifest's shape bucket."""
        return f"cams{len(self.cameras)}-img{self.image_size}-txt{self.prompt_tokens}-chunk{self.chunk}"


@dataclass(frozen=True)
class PolicyExportOptions:
    formats: tuple[str, ...] = ("onnx",)
    target: str = "cpu"
    cameras: tuple[str, ...] = ()        # default: DEFAULT_CAMERAS
    prompt_tokens: int = 0               # default: PROMPT_TOKENS
    action_spec: Path | None = None
    max_observation_age_ms: float = 1000.0
    threads: int = 0
    socs: tuple[str, ...] = ("sm8750",)  # qnn-htp
    precision: str = ""                   # qnn-htp: fp16 (the default)
    validate: bool = True


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


def synthetic_observation(directory: Path, shape: PolicyShape, seed: int = 0) -> dict[str, Any]:
    """Two differently sized gradient images (one wider, one taller than square), a state
    shorter than the model's (zero-padded), fixed noise; written as PNGs."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    images = {}
    for k, camera in enumerate(shape.cameras):
        w, h = (320, 240) if k % 2 == 0 else (200, 260)
        yy, xx = np.mgrid[0:h, 0:w]
        rgb = np.stack([(xx * 255 // w), (yy * 255 // h), (rng.integers(0, 256, (h, w)))], -1).astype(np.uint8)
        path = directory / f"{camera}.png"
        Image.fromarray(rgb).save(path)
        images[camera] = path
    state = rng.standard_normal(max(1, shape.state_dim - 2)).astype(np.float32)
    noise = rng.standard_normal((shape.chunk, shape.action_dim)).astype(np.float32)
    return {"images": images, "state": state, "noise": noise, "prompt": TASK}


def _session(path: Path) -> Any:
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


Examples = dict[str, tuple[torch.nn.Module, tuple[torch.Tensor, ...], list[str], list[str]]]


def graph_examples(policy: Policy, shape: PolicyShape) -> Examples:
    """Each graph's module, example inputs (a prefix with masked text slots) and I/O names."""
    g = torch.Generator().manual_seed(0)
    P = shape.prefix
    pixels = torch.randn(1, 3, shape.image_size, shape.image_size, generator=g)
    rows = torch.randn(1, len(shape.cameras) * shape.image_tokens, shape.hidden, generator=g)
    ids = torch.randint(0, 100, (1, shape.prompt_tokens), generator=g)
    mask = torch.ones(1, P, dtype=torch.long)
    mask[0, P - shape.prompt_tokens // 2:] = 0
    prefix = PrefixGraph(policy.model).eval()
    valid = int(mask.sum())
    cos, sin = rope_tables(rope_inv_freq(policy.model, "vlm"), prefix_positions(mask[0].tolist()))
    with torch.no_grad():
        keys, values = prefix(rows, ids, mask, cos, sin)
    x = torch.randn(1, shape.chunk, shape.action_dim, generator=g)
    state = torch.randn(1, shape.state_dim, generator=g)
    t_emb = time_embedding(time_freq(policy.model), 0.7)
    e_cos, e_sin = rope_tables(rope_inv_freq(policy.model, "dit"), range(valid, valid + shape.chunk + 1))
    return {
        "vision": (VisionGraph(policy.model).eval(), (pixels,), ["pixel_values"], ["image_rows"]),
        "prefix": (prefix, (rows, ids, mask, cos, sin), ["image_rows", "prompt_ids", "mask", "rope_cos", "rope_sin"],
                   ["keys", "values"]),
        "expert": (ExpertStepGraph(policy.model).eval(),
                   (keys, values, expert_bias(mask[0].tolist(), shape.chunk), x, t_emb, state, e_cos, e_sin),
                   ["keys", "values", "attention_bias", "x", "time_embedding", "state", "rope_cos", "rope_sin"],
                   ["velocity"]),
    }


def graph_sqnr(examples: Examples, run: Any) -> dict[str, float]:
    """Each graph's worst output SQNR against its module; run(name, feeds) -> outputs."""
    out = {}
    for name, (module, args, inputs, _) in examples.items():
        with torch.no_grad():
            ref = module(*args)
        refs = [r.numpy() for r in (ref if isinstance(ref, tuple) else (ref,))]
        got = run(name, {n: a.numpy() for n, a in zip(inputs, args, strict=True)})
        out[name] = min(sqnr_db(r, o) for r, o in zip(refs, got, strict=True))
    return out


def _export_graphs(cdir: Path, examples: Examples, bar: tqdm) -> dict[str, float]:
    """The three ONNX graphs sharing one weights file, each checked against its module."""
    for name, (module, args, inputs, outputs) in examples.items():
        bar.set_postfix_str(name)
        onnx_target.export_graph(module, args, inputs, outputs, cdir / f"{name}.onnx")
        bar.update()
    sqnrs = graph_sqnr(examples, lambda name, feeds: _session(cdir / f"{name}.onnx").run(None, feeds))
    onnx_target.share_weights(cdir, [f"{name}.onnx" for name in examples])
    return sqnrs


def prefix_positions(mask: list[int]) -> list[int]:
    """The prefix's rotary positions: the mask's running count less one (padding repeats the last)."""
    out, count = [], 0
    for m in mask:
        count += int(m)
        out.append(max(count - 1, 0))
    return out


ONNX_GRAPHS: dict[str, Any] = {"vision": "vision.onnx", "prefix": "prefix.onnx", "expert": "expert.onnx"}
GRAPH_KEYS = {"vision": "image", "prefix": "prefix", "expert": "step"}


def policy_stage(shape: PolicyShape, policy: Policy, spec: dict[str, Any], identity: dict[str, Any],
                 max_age_ms: float, artifact: str = COMPONENT, backend: str = "onnxruntime",
                 refs: dict[str, Any] | None = None) -> dict[str, Any]:
    refs = refs or ONNX_GRAPHS

    def group(role: str) -> dict[str, Any]:
        return {"backend": backend, "device": "cpu", "graphs": {GRAPH_KEYS[role]: refs[role]}}

    return {"stage_id": 0, "model_stage": "policy", "execution_type": "llm_generation", "input_sources": [],
            "final_output": True, "final_output_type": "action", "engine_output_type": "action", "artifact": artifact,
            "policy": {"tokenizer": "tokenizer.json", "cameras": list(shape.cameras), "image_size": shape.image_size,
                       "image_tokens": shape.image_tokens, "hidden_size": shape.hidden,
                       "image_mean": list(IMAGE_MEAN), "image_std": list(IMAGE_STD),
                       "prompt_tokens": shape.prompt_tokens, "bos_id": policy.bos_id,
                       "image_token_id": policy.image_token_id, "prompt_suffix": PROMPT_SUFFIX,
                       "state_dim": shape.state_dim, "action_dim": shape.action_dim, "chunk_size": shape.chunk,
                       "num_steps": shape.num_steps, "layers": shape.layers, "kv_heads": shape.kv_heads,
                       "head_dim": shape.head_dim, "mask_value": MASK_VALUE,
                       "rope_inv_freq": rope_inv_freq(policy.model, "vlm"),
                       "expert_rope_inv_freq": rope_inv_freq(policy.model, "dit"), "time_freq": time_freq(policy.model),
                       "max_observation_age_ms": max_age_ms, "actions": spec,
                       "identity": identity},
            "graphs": {role: group(role) for role in GRAPH_KEYS}}


def native_actions(plan: Path, observation: dict[str, Any], threads: int = 0) -> tuple[np.ndarray, dict[str, Any]]:
    """The action chunk and its event from the native session on `plan`, captured now."""
    from omni_edge.runtime import Session
    from omni_edge.runtime.request import CameraImage, Observation, Request

    request = Request(prompt=observation["prompt"], observation=Observation(
        timestamp_ms=time.time() * 1000.0,
        images=tuple(CameraImage(cam, str(p)) for cam, p in observation["images"].items()),
        state=tuple(float(v) for v in observation["state"]),
        noise=tuple(tuple(float(v) for v in row) for row in observation["noise"])))
    events: list[dict[str, Any]] = []
    with Session.open(plan, allow_unqualified=True, threads=threads) as session:
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


def export_policy(checkpoint: Path, out: Path, opts: Any) -> list[Path]:
    """policy-onnx (and with --format pte|both policy-pte) and their plans: plan.json is the
    ONNX one (plan.pte.json the ExecuTorch one; with --format pte alone, plan.json)."""
    if opts.target == "qnn-htp":
        from omni_edge.export.pi0_qnn import export_policy_qnn

        return export_policy_qnn(checkpoint, out, opts)
    if not set(opts.formats) <= {"onnx", "pte"}:
        raise ValueError(f"export policy writes --format onnx, pte or both, not {opts.formats}")
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
                sqnrs, refs, backend = _export_graphs(cdir, examples, bar), ONNX_GRAPHS, "onnxruntime"
            else:
                from omni_edge.export.pi0_pte import export_pte

                sqnrs, refs, backend = (*export_pte(cdir, examples, bar), "executorch")
            name = "plan.json" if fmt == "onnx" or "onnx" not in opts.formats else "plan.pte.json"
            stage = policy_stage(shape, policy, spec, {"checkpoint_id": identity["checkpoint_id"],
                                                       "checkpoint_revision": revision, "artifact": component,
                                                       "precision": "fp32", "exporter_version": __version__},
                                 opts.max_observation_age_ms, component, backend, refs)
            write_text_atomic(out / name, json.dumps({"plan_version": 1, "name": f"{checkpoint.name} (π0 policy, {fmt})",
                                                      "stages": [stage]}, indent=2) + "\n")
            _validate(cdir, component, backend, out / name, identity, sqnrs, obs, ref,
                      {"cameras": list(cameras), "graphs": refs, "actions": spec}, opts.threads, bar)
            plans.append(out / name)
    return plans


def _validate(cdir: Path, component: str, runtime: str, plan: Path, identity: dict[str, str], sqnrs: dict[str, float],
              obs: dict[str, Any], ref: np.ndarray, extra: dict[str, Any], threads: int, bar: tqdm) -> None:
    """The component's reports: each graph's SQNR, and the whole chunk natively against sample_actions
    (a provisional manifest first: the session verifies the component before it runs it)."""
    numerical = identity_report("numerical", identity, tuple(ReportCheck(f"{n}_sqnr_db", v, GRAPH_SQNR_DB, ">=")
                                                             for n, v in sqnrs.items()))
    _manifest(cdir, component, runtime, identity, numerical, pending_task(identity), {})
    bar.set_postfix_str(f"{component}: native chunk vs sample_actions")
    got, _ = native_actions(plan, obs, threads)
    bar.update()
    checks, detail = agreement_checks(got, ref, ACTION_MAX_ABS_BY_RUNTIME[runtime])
    _manifest(cdir, component, runtime, identity, numerical, identity_report("task", identity, checks),
              {"policy": {**extra, "agreement": detail}})


def _manifest(cdir: Path, component: str, runtime: str, identity: dict[str, str], numerical: ValidationReport,
              task: ValidationReport, extra: dict[str, Any]) -> None:
    import importlib.metadata as md

    write_validated(cdir, component, identity, numerical, task, runtime=runtime, runtime_version=md.version(runtime),
                    compiler_version=f"torch-{torch.__version__}", extra_metadata=extra)
