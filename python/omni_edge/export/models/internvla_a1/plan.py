"""An InternVLA-A1 policy's plan stage (the "internvla" section the controller reads: cameras and
slots, the image and prompt layout, M-RoPE frequencies, the time embedding's scalings, the
action spec and mode) and its graph roles."""

from __future__ import annotations

from typing import Any

from omni_edge.export.models.internvla_a1.graphs import PolicyShape
from omni_edge.export.models.internvla_a1.model import (
    CAMERA_SLOTS,
    COSMOS_SIZE,
    HISTORY,
    IMAGE_TOKEN_ID,
    MROPE_SECTION,
    VISION_END_ID,
    VISION_START_ID,
    PolicyConfig,
)
from omni_edge.export.models.internvla_a1.onnx import ONNX_GRAPHS
from omni_edge.export.models.internvla_a1.reference import (
    IMAGE_MEAN,
    IMAGE_STD,
    MASK_VALUE,
    PAD_ID,
    inv_freq,
    time_scaling,
)

COMPONENT = "policy-onnx"
GRAPH_KEYS = {"vision": "image", "frame": "frame", "context": "context", "expert": "step"}
MAX_HISTORY_GAP_MS = 2000.0  # the previous frame of a camera at most this much older


def policy_stage(shape: PolicyShape, config: PolicyConfig, spec: dict[str, Any], identity: dict[str, Any],
                 max_age_ms: float, artifact: str = COMPONENT, backend: str = "onnxruntime",
                 refs: dict[str, Any] | None = None, device: str = "cpu") -> dict[str, Any]:
    refs = refs or ONNX_GRAPHS

    def group(role: str) -> dict[str, Any]:
        return {"backend": backend, "device": device, "graphs": {GRAPH_KEYS[role]: refs[role]}}

    return {"stage_id": 0, "model_stage": "policy", "execution_type": "llm_generation", "input_sources": [],
            "final_output": True, "final_output_type": "action", "engine_output_type": "action", "artifact": artifact,
            "internvla": {
                "tokenizer": "tokenizer.json", "cameras": list(shape.cameras), "camera_slots": CAMERA_SLOTS,
                "history": HISTORY, "image_resolution": list(shape.image_resolution), "patch": shape.patch,
                "merge": shape.merge, "temporal_patch": shape.temporal_patch, "image_mean": [IMAGE_MEAN] * 3,
                "image_std": [IMAGE_STD] * 3, "image_tokens": shape.image_tokens, "prompt_tokens": shape.prompt_tokens,
                "image_token_id": IMAGE_TOKEN_ID, "vision_start_id": VISION_START_ID, "vision_end_id": VISION_END_ID,
                "pad_id": PAD_ID, "cosmos_size": COSMOS_SIZE, "frame_rows": shape.frame_rows,
                "vlm_hidden": shape.vlm_hidden, "expert_hidden": shape.expert_hidden, "layers": shape.layers,
                "kv_heads": shape.kv_heads, "head_dim": shape.head_dim, "chunk_size": shape.chunk,
                "max_state_dim": shape.max_state_dim, "max_action_dim": shape.max_action_dim,
                "state_dim": shape.state_dim, "action_dim": shape.action_dim, "num_steps": shape.num_steps,
                "mask_value": MASK_VALUE, "rope_inv_freq": [float(v) for v in inv_freq(shape.head_dim)],
                "mrope_section": list(MROPE_SECTION),
                "time_scaling": [float(v) for v in time_scaling(shape.expert_hidden, config.min_period,
                                                                 config.max_period)],
                "max_observation_age_ms": max_age_ms, "max_history_gap_ms": MAX_HISTORY_GAP_MS,
                "action_mode": config.action_mode, "actions": spec, "identity": identity},
            "graphs": {role: group(role) for role in GRAPH_KEYS}}
