"""What every architecture's `make-checkpoint` shares: a Qwen2-style byte-level BPE trained on
offline text, the Hugging Face layout (config.json + model.safetensors + tokenizer.json, so
every loader that takes these also takes a real checkpoint), and a short training run that makes
next-token distributions peaked (like a real model's) rather than flat."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, TypeVar

from tqdm import tqdm

_P = TypeVar("_P")
QWEN2_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# What made a checkpoint (recipe, or the file it was converted from); written last, so its
# presence marks the checkpoint complete.
CHECKPOINT_RECORD = "omni_edge_checkpoint.json"
CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


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


def write_record(out: Path, record: dict[str, Any]) -> None:
    """OUT/omni_edge_checkpoint.json: call it last, after every other file of the checkpoint."""
    (out / CHECKPOINT_RECORD).write_text(json.dumps(record, indent=2) + "\n")


def read_record(checkpoint: Path) -> dict[str, Any]:
    """A checkpoint's record (OSError when it has none, ValueError when it is not JSON)."""
    record: dict[str, Any] = json.loads((checkpoint / CHECKPOINT_RECORD).read_text())
    return record


def save_random_checkpoint(out: Path, model: Any, tokenizer: Any, record: dict[str, Any], **tokens: str) -> None:
    """A model with random weights in save_pretrained's layout, its tokenizer as a fast tokenizer
    (`tokens`: its bos/eos/pad token names), and what made it (omni_edge_checkpoint.json)."""
    from transformers import PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    fast_class: Any = PreTrainedTokenizerFast
    fast_class(tokenizer_object=tokenizer, model_max_length=8192, **tokens).save_pretrained(out)
    write_record(out, {**record, "train_steps": 0})


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


def preset_of(presets: dict[str, _P], name: str, arch: str) -> _P:
    """The architecture's preset by name, or a ValueError naming the ones it has."""
    if name not in presets:
        raise ValueError(f"unknown preset {name!r} for {arch} (available: {', '.join(presets)})")
    return presets[name]


def seed_everything(seed: int) -> None:
    """Python's and torch's generators: the same seed makes the same checkpoint."""
    import torch

    random.seed(seed)
    torch.manual_seed(seed)
