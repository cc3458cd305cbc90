"""The reference of a Qwen3 checkpoint: transformers' own causal LM in float32, which every
exported graph and artifact is checked against."""

from __future__ import annotations

from pathlib import Path
from typing import Any

MODEL_TYPES = ("qwen3",)


def load_causal_lm(checkpoint: Path) -> Any:
    """The checkpoint's causal LM (eval, float32), or a ValueError saying why it is not one."""
    import torch
    from transformers import AutoModelForCausalLM

    for name in ("config.json", "tokenizer.json"):  # before transformers mistakes a missing path for a hub id
        if not (checkpoint / name).is_file():
            raise ValueError(f"{checkpoint}: not a checkpoint directory (no {name})")
    model: Any = AutoModelForCausalLM.from_pretrained(str(checkpoint), dtype=torch.float32)
    if model.config.model_type not in MODEL_TYPES:
        raise ValueError(f"{checkpoint}: model_type {model.config.model_type!r} is not supported ({', '.join(MODEL_TYPES)})")
    return model.eval()
