"""The π0 checkpoint of sizes no preset has, its two cameras, task and action spec: the policy
tests' and the OpenPI server tests' shared scene (their fixtures are in conftest.py)."""

from __future__ import annotations

from omni_edge.export.models.pi0.checkpoint import Pi0Preset

CAMERAS = ("front", "wrist")
# Sizes no preset has: 128-pixel images in 16-pixel patches (64 rows per camera), 3 layers of
# 2 heads of 24, a 12-step chunk of 7-dim actions, a 6-dim state.
UNSEEN = Pi0Preset(vocab=768, vision_hidden=48, vision_layers=1, vision_heads=2, patch=16, image_size=128, hidden=96,
                   expert_hidden=48, layers=3, heads=2, head_dim=24, chunk=12, state_dim=6, action_dim=7)
TASK = "stack the green cube"
ACTION_SPEC = {"names": ["x", "y", "z", "roll", "pitch", "yaw", "gripper"],
               "units": ["m", "m", "m", "rad", "rad", "rad", "normalized"], "dt_ms": 33.3}
