"""The reference of a Llama checkpoint: transformers' own causal LM in float32, which every
exported graph and artifact is checked against."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omni_edge.export.decoder import causal_lm

MODEL_TYPES = ("llama",)


def load_causal_lm(checkpoint: Path) -> Any:
    """The checkpoint's causal LM (eval, float32), or a ValueError saying why it is not one."""
    return causal_lm.load_causal_lm(checkpoint, MODEL_TYPES)
