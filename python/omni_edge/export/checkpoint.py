"""Local checkpoints of real architectures: config.json + model.safetensors + tokenizer.json,
in the standard Hugging Face layout, so every loader that takes them also takes a real one.

Weights are random, and the small presets are briefly trained on offline text so that their
next-token distributions are peaked (like a real model's) rather than flat."""

from __future__ import annotations

import dataclasses
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from omni_edge.export.corpus import stdlib_corpus

QWEN2_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


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


def train_tokenizer(texts: list[str], vocab_size: int, specials: tuple[str, ...] = SPECIAL_TOKENS) -> Any:
    """A Qwen2-style byte-level BPE: NFC, the Qwen2 split regex, ByteLevel; `specials` (ChatML's)
    take the last ids."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - len(specials), special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_special_tokens(list(specials))
    return tok


def save_random_checkpoint(out: Path, model: Any, tokenizer: Any, record: dict[str, Any], **tokens: str) -> None:
    """A model with random weights in save_pretrained's layout, its tokenizer as a fast tokenizer
    (`tokens`: its bos/eos/pad token names), and what made it (omni_edge_checkpoint.json)."""
    from transformers import PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    fast_class: Any = PreTrainedTokenizerFast
    fast_class(tokenizer_object=tokenizer, model_max_length=8192, **tokens).save_pretrained(out)
    (out / "omni_edge_checkpoint.json").write_text(json.dumps({**record, "train_steps": 0}, indent=2) + "\n")


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


def train_causal_lm(model: Any, tokenizer: Any, texts: list[str], steps: int, seed: int) -> list[float]:
    """A few hundred AdamW steps on the corpus: enough to make next-token distributions peaked."""
    import torch

    ids: list[int] = []
    for t in texts:
        ids.extend(tokenizer.encode(t).ids)
        ids.append(tokenizer.token_to_id("<|endoftext|>"))
    data = torch.tensor(ids, dtype=torch.long)
    seq, batch = 128, 16
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps, pct_start=0.1)
    losses = []
    model.train()
    for _ in tqdm(range(steps), desc="training checkpoint", unit="step", leave=False):
        starts = torch.randint(0, len(data) - seq - 1, (batch,), generator=gen)
        x = torch.stack([data[s:s + seq] for s in starts])
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


def make_checkpoint(out: Path, arch: str = "qwen3", preset: str = "tiny", seed: int = 0,
                    sliding_window: int | None = None, train_steps: int | None = None,
                    thinker: Path | None = None) -> Path:
    """Write a checkpoint directory: config.json, model.safetensors, tokenizer.json, tokenizer_config.json."""
    import torch
    from transformers import PreTrainedTokenizerFast, Qwen3ForCausalLM

    if arch == "qwen3-tts":
        if sliding_window is not None or train_steps:
            raise ValueError("qwen3-tts checkpoints take neither --sliding-window nor --train-steps")
        return make_tts_checkpoint(out, preset, seed, thinker)
    if arch == "qwen2.5-omni":
        if sliding_window is not None or train_steps or thinker is not None:
            raise ValueError("qwen2.5-omni checkpoints take none of --sliding-window, --train-steps, --thinker")
        from omni_edge.export.qwen25_omni import make_omni_checkpoint

        return make_omni_checkpoint(out, preset, seed)
    if arch == "pi0":
        if sliding_window is not None or train_steps or thinker is not None:
            raise ValueError("pi0 checkpoints take none of --sliding-window, --train-steps, --thinker")
        from omni_edge.export.pi0 import make_pi0_checkpoint

        return make_pi0_checkpoint(out, preset, seed)
    if thinker is not None:
        raise ValueError("--thinker makes an omni talker: it needs --arch qwen3-tts")
    if arch != "qwen3":
        raise ValueError(f"unknown architecture {arch!r} (available: {', '.join(ARCHS)})")
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r} (available: {', '.join(PRESETS)})")
    p = PRESETS[preset]
    steps = p.train_steps if train_steps is None else train_steps
    random.seed(seed)
    torch.manual_seed(seed)
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
    (out / "omni_edge_checkpoint.json").write_text(json.dumps({
        "arch": arch, "preset": preset, "seed": seed, "sliding_window": sliding_window,
        "train_steps": steps, "final_loss": losses[-1] if losses else None,
    }, indent=2) + "\n")
    return out


# ---- Qwen3-TTS-shaped speech checkpoints ----------------------------------------------------

ARCHS = ("qwen3", "qwen3-tts", "qwen2.5-omni", "pi0")


@dataclass(frozen=True)
class TtsPreset:
    text_vocab: int
    text_hidden: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    predictor_layers: int
    codebook: int
    vocoder_hidden: int
    vocoder_layers: int
    vocoder_decoder_dim: int
    head_gain: float = 10.0  # random heads scaled up: peaked code distributions, like a trained model's


TTS_PRESETS: dict[str, TtsPreset] = {
    # Qwen3-TTS-12Hz-0.6B has a 1024-wide 28-layer talker, a 5-layer predictor, 2048 codes per
    # codebook and a 1536-wide decoder; tiny keeps every structure at a fraction of the width.
    "tiny": TtsPreset(1024, 64, 128, 2, 4, 2, 32, 384, 2, 256, 64, 2, 96),
    "small": TtsPreset(4096, 256, 256, 4, 8, 4, 32, 768, 3, 1024, 128, 4, 192),
}


def tts_configs(p: TtsPreset, text_pad_id: int) -> tuple[dict[str, Any], dict[str, Any]]:
    decoder = {"vocab_size": p.codebook + 3, "hidden_size": p.hidden, "intermediate_size": p.intermediate,
               "num_hidden_layers": p.layers, "num_attention_heads": p.heads, "num_key_value_heads": p.kv_heads,
               "head_dim": p.head_dim, "max_position_embeddings": 8192, "rope_theta": 1_000_000.0,
               "rms_norm_eps": 1e-6, "tie_word_embeddings": False}
    predictor = {**decoder, "vocab_size": p.codebook, "num_hidden_layers": p.predictor_layers,
                 "num_code_groups": 16, "max_position_embeddings": 64}
    config = {"model_type": "qwen3_tts", "architectures": ["Qwen3TTSForConditionalGeneration"],
              "text_pad_token_id": text_pad_id,
              "talker_config": {"codebook_size": p.codebook, "text_vocab_size": p.text_vocab,
                                "text_hidden_size": p.text_hidden, "decoder": decoder, "code_predictor": predictor},
              "frame_rate": 12.5, "sample_rate": 24000}
    vocoder = {"codebook_size": p.codebook, "hidden_size": p.vocoder_hidden, "num_attention_heads": 4,
               "num_key_value_heads": 4, "intermediate_size": 2 * p.vocoder_hidden,
               "num_hidden_layers": p.vocoder_layers, "decoder_dim": p.vocoder_decoder_dim, "sliding_window": 72,
               "num_quantizers": 16, "upsample_rates": [8, 5, 4, 3], "upsampling_ratios": [2, 2]}
    return config, vocoder


def make_tts_checkpoint(out: Path, preset: str = "tiny", seed: int = 0, thinker: Path | None = None) -> Path:
    """config.json + model.safetensors + tokenizer.json + speech_tokenizer/ (the vocoder).

    With `thinker` (a Qwen3 checkpoint directory) the talker is an omni one: its text side is
    the thinker's (tokenizer, vocabulary, hidden width), so it can read the thinker's hidden
    states through its text projection."""
    import torch
    from transformers import PreTrainedTokenizerFast

    from omni_edge.export.qwen3_tts import Qwen3Tts

    if preset not in TTS_PRESETS:
        raise ValueError(f"unknown preset {preset!r} for qwen3-tts (available: {', '.join(TTS_PRESETS)})")
    p = TTS_PRESETS[preset]
    random.seed(seed)
    torch.manual_seed(seed)
    if thinker is not None:
        from tokenizers import Tokenizer

        if not (thinker / "config.json").is_file() or not (thinker / "tokenizer.json").is_file():
            raise ValueError(f"{thinker}: not a checkpoint directory (config.json and tokenizer.json)")
        text = json.loads((thinker / "config.json").read_text())
        # A multimodal thinker keeps its decoder's sizes under text_config (a release: under thinker_config).
        text = text.get("thinker_config", text)
        text = text.get("text_config", text)
        tokenizer = Tokenizer.from_file(str(thinker / "tokenizer.json"))
        p = dataclasses.replace(p, text_vocab=int(text["vocab_size"]), text_hidden=int(text["hidden_size"]))
    else:
        tokenizer = train_tokenizer(stdlib_corpus(), p.text_vocab)
    pad = tokenizer.token_to_id("<|endoftext|>")
    if pad is None:
        raise ValueError("the text tokenizer has no <|endoftext|> token for the text pad")
    config, vocoder = tts_configs(p, pad)
    model = Qwen3Tts(config, vocoder)
    with torch.no_grad():
        model.talker.codec_head.weight.mul_(p.head_gain)
        for head in model.talker.code_predictor.lm_head:
            head.weight.mul_(p.head_gain)
        # A random decoder whispers (RMS ~1e-6): scale its output conv so that random codes come
        # out at speech level (RMS 0.1, -20 dBFS), which is what the PCM path must carry.
        probe = torch.randint(0, p.codebook, (1, 16, 50), generator=torch.Generator().manual_seed(seed))
        rms = float(model.vocoder(probe).pow(2).mean().sqrt())
        out_conv = model.vocoder.decoder[-1].conv
        out_conv.weight.mul_(0.1 / max(rms, 1e-12))
        out_conv.bias.mul_(0.1 / max(rms, 1e-12))
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    fast_class: Any = PreTrainedTokenizerFast
    fast_class(tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>").save_pretrained(out)
    (out / "omni_edge_checkpoint.json").write_text(json.dumps(
        {"arch": "qwen3-tts", "preset": preset, "seed": seed, "head_gain": p.head_gain,
         "thinker": str(thinker) if thinker is not None else None}, indent=2) + "\n")
    return out
