"""A π0 policy's plan stage and component, for every target: the policy section the controller
reads (cameras, image and prompt layout, rotary and time frequencies, the action spec) and the
graph roles."""

from __future__ import annotations

from typing import Any

from omni_edge.export.models.pi0.graphs import (
    MASK_VALUE,
    PolicyShape,
    rope_inv_freq,
    time_freq,
)
from omni_edge.export.models.pi0.onnx import ONNX_GRAPHS
from omni_edge.export.models.pi0.reference import (
    IMAGE_MEAN,
    IMAGE_STD,
    PROMPT_SUFFIX,
    Policy,
)

COMPONENT = "policy-onnx"


DEFAULT_CAMERAS = ("base_0_rgb", "left_wrist_0_rgb")


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
