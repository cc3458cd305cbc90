"""π0 checkpoints made here (random weights, initialized wide enough that images, state and task
all move the actions), at two sizes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omni_edge.export.checkpoint import preset_of, save_random_checkpoint, seed_everything, train_tokenizer
from omni_edge.export.corpus import stdlib_corpus
from omni_edge.export.models.pi0.reference import SPECIAL_TOKENS


@dataclass(frozen=True)
class Pi0Preset:
    vocab: int
    vision_hidden: int
    vision_layers: int
    vision_heads: int
    patch: int
    image_size: int
    hidden: int          # the VLM decoder's
    expert_hidden: int
    layers: int          # both decoders'
    heads: int
    head_dim: int
    chunk: int
    state_dim: int
    action_dim: int


PI0_PRESETS: dict[str, Pi0Preset] = {
    # π0 (lerobot/pi0_base): SigLIP 1152 x 27 at 224 / 14 (256 rows per camera), Gemma 2048 and an
    # expert of 1024, 18 layers each, 8 heads of 256 with one KV head, chunk 50, 32-dim state/action.
    "tiny": Pi0Preset(1024, 32, 2, 2, 14, 224, 64, 32, 2, 4, 16, 10, 8, 8),
    "small": Pi0Preset(2048, 64, 3, 4, 14, 224, 128, 64, 3, 4, 32, 50, 32, 32),
}


def pi0_config(p: Pi0Preset, image_token_id: int, init_range: float = 0.1) -> Any:
    from transformers import PI0Config

    text = {"model_type": "gemma", "hidden_size": p.hidden, "num_hidden_layers": p.layers,
            "intermediate_size": 2 * p.hidden, "num_attention_heads": p.heads, "num_key_value_heads": 1,
            "head_dim": p.head_dim, "vocab_size": p.vocab, "initializer_range": init_range}
    vision = {"model_type": "siglip_vision_model", "hidden_size": p.vision_hidden, "intermediate_size": 2 * p.vision_hidden,
              "patch_size": p.patch, "image_size": p.image_size, "num_hidden_layers": p.vision_layers,
              "num_attention_heads": p.vision_heads, "vision_use_head": False}
    expert = {"model_type": "gemma", "hidden_size": p.expert_hidden, "num_hidden_layers": p.layers,
              "intermediate_size": 2 * p.expert_hidden, "num_attention_heads": p.heads, "num_key_value_heads": 1,
              "head_dim": p.head_dim, "initializer_range": init_range}
    config_class: Any = PI0Config
    return config_class(vlm_config={"text_config": text, "vision_config": vision, "projection_dim": p.hidden,
                                 "image_token_id": image_token_id, "initializer_range": init_range},
                     dit_config=expert, chunk_size=p.chunk, max_state_dim=p.state_dim, max_action_dim=p.action_dim,
                     initializer_range=init_range)


def make_checkpoint(out: Path, preset: str = "tiny", seed: int = 0, p: Pi0Preset | None = None) -> Path:
    """config.json + model.safetensors (random weights, initialized wide enough that the images,
    the state and the task all move the actions) + tokenizer.json with <bos> and <image>."""
    from transformers import PI0ForConditionalGeneration

    if p is None:
        p = preset_of(PI0_PRESETS, preset, "pi0")
    seed_everything(seed)
    tokenizer = train_tokenizer(stdlib_corpus(), p.vocab, SPECIAL_TOKENS)
    model_class: Any = PI0ForConditionalGeneration
    model: Any = model_class(pi0_config(p, tokenizer.token_to_id("<image>"))).float().eval()
    save_random_checkpoint(out, model, tokenizer, {"arch": "pi0", "preset": preset, "seed": seed},
                           bos_token="<bos>", eos_token="<eos>", pad_token="<pad>")
    return out
