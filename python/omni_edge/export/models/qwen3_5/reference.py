"""The reference of a Qwen3.5 hybrid checkpoint: transformers' own causal LM in float32 (its
chunked and recurrent gated delta rule in PyTorch), which every exported graph is checked against."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omni_edge.export.decoder import causal_lm

MODEL_TYPES = ("qwen3_5_text", "qwen3_5")


def load_causal_lm(checkpoint: Path) -> Any:
    """The checkpoint's causal LM (eval, float32), or a ValueError saying why it is not one."""
    return causal_lm.load_causal_lm(checkpoint, MODEL_TYPES)
