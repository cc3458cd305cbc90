"""Qwen3 checkpoints made here: a locally trained tokenizer and a briefly trained model in the
Hugging Face layout (`transformers.Qwen3ForCausalLM`), at three sizes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omni_edge.export.checkpoint import (
    CHATML_TEMPLATE,
    preset_of,
    seed_everything,
    train_causal_lm,
    train_tokenizer,
    write_record,
)
from omni_edge.export.corpus import stdlib_corpus


@dataclass(frozen=True)
class Preset:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    tokenizer_vocab: int
    model_vocab: int
    train_steps: int
    max_positions: int = 4096
    train_documents: int = 200  # the first N corpus documents: learned well enough that predictions are peaked


PRESETS: dict[str, Preset] = {
    # Peaked: greedy generation survives 8-bit weights (measured: 94% of 64 tokens agree on the HTP).
    "tiny": Preset(128, 2, 4, 2, 32, 384, 1024, 1024, 1000),
    "small": Preset(256, 4, 8, 4, 32, 768, 4096, 4096, 1000, train_documents=400),
    # Qwen3-0.6B-shaped (hidden 1024, 16/8 heads of 128, vocab 151936) with fewer layers: for benchmarks.
    "bench": Preset(1024, 4, 16, 8, 128, 3072, 8192, 151936, 0, max_positions=40960),
}


def _config(p: Preset, tokenizer: Any, sliding_window: int | None) -> Any:
    from transformers import Qwen3Config

    kwargs: dict[str, Any] = dict(
        vocab_size=p.model_vocab, hidden_size=p.hidden, intermediate_size=p.intermediate, num_hidden_layers=p.layers,
        num_attention_heads=p.heads, num_key_value_heads=p.kv_heads, head_dim=p.head_dim,
        max_position_embeddings=p.max_positions, rope_theta=1_000_000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
        bos_token_id=tokenizer.token_to_id("<|endoftext|>"), eos_token_id=tokenizer.token_to_id("<|im_end|>"),
        torch_dtype="float32",
    )
    if sliding_window is not None:
        kwargs.update(use_sliding_window=True, sliding_window=sliding_window, max_window_layers=0,
                      layer_types=["sliding_attention"] * p.layers)
    return Qwen3Config(**kwargs)


def make_checkpoint(out: Path, preset: str = "tiny", seed: int = 0, sliding_window: int | None = None,
                    train_steps: int | None = None) -> Path:
    """Write a checkpoint directory: config.json, model.safetensors, tokenizer.json, tokenizer_config.json."""
    from transformers import PreTrainedTokenizerFast, Qwen3ForCausalLM

    p = preset_of(PRESETS, preset, "qwen3")
    steps = p.train_steps if train_steps is None else train_steps
    seed_everything(seed)
    texts = stdlib_corpus()
    tokenizer = train_tokenizer(texts, p.tokenizer_vocab)
    model: Any = Qwen3ForCausalLM(_config(p, tokenizer, sliding_window))
    model.float()
    losses = train_causal_lm(model, tokenizer, texts[:p.train_documents], steps, seed) if steps else []

    out.mkdir(parents=True, exist_ok=True)
    model.generation_config.do_sample = False
    model.save_pretrained(out, safe_serialization=True)
    fast_class: Any = PreTrainedTokenizerFast
    fast = fast_class(tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                      model_max_length=p.max_positions)
    fast.chat_template = CHATML_TEMPLATE
    fast.save_pretrained(out)
    record = {**recipe(preset, seed, sliding_window, train_steps), "final_loss": losses[-1] if losses else None}
    write_record(out, record)  # last: marks it complete
    return out


def recipe(preset: str = "tiny", seed: int = 0, sliding_window: int | None = None,
           train_steps: int | None = None) -> dict[str, Any]:
    """What makes a checkpoint of this folder, as its omni_edge_checkpoint.json records it: two
    checkpoints of one recipe are interchangeable."""
    p = PRESETS[preset]
    return {"arch": "qwen3", "preset": preset, "seed": seed, "sliding_window": sliding_window,
            "train_steps": p.train_steps if train_steps is None else train_steps}
