"""transformers as the reference for generated token ids; checkpoints and the CLI for tests."""

from __future__ import annotations

import functools
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omni_edge.export.comparison import top2_gap
from paths import CLI as CLI

QNN_SOCS = ("sm8750", "x-elite")


@functools.lru_cache(maxsize=4)
def causal_lm(checkpoint: Path) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(checkpoint), dtype=torch.float32).eval()


@dataclass(frozen=True)
class Greedy:
    """transformers' greedy continuation and the top-2 logit gap of each of its steps."""

    ids: list[int]
    gaps: list[float]


@torch.no_grad()
def greedy_reference(model: Path | Any, prompt_ids: list[int], new_tokens: int) -> Greedy:
    """`model`: a checkpoint directory or a loaded transformers model."""
    lm = causal_lm(model) if isinstance(model, Path) else model
    # The mask is explicit: without it generate takes every id equal to pad_token_id for padding
    # (found: a generated 0 inside a second turn's context was masked out of the reference).
    out = lm.generate(torch.tensor([prompt_ids]), attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.int64),
                      do_sample=False, max_new_tokens=new_tokens, eos_token_id=None, pad_token_id=0,
                      output_logits=True, return_dict_in_generate=True)
    return Greedy(out.sequences[0, len(prompt_ids):].tolist(), [top2_gap(step[0].numpy()) for step in out.logits])


@torch.no_grad()
def deficits_along(model: Path | Any, prompt_ids: list[int], got: list[int]) -> list[float]:
    """For each token of a run `got` that followed `prompt_ids`: the reference's best logit minus
    its logit for that token, with the run's own tokens before it as the context."""
    if not got:
        return []
    lm = causal_lm(model) if isinstance(model, Path) else model
    logits = lm(torch.tensor([prompt_ids + got])).logits[0, len(prompt_ids) - 1:-1].double()
    return (logits.max(-1).values - logits[torch.arange(len(got)), torch.tensor(got)]).tolist()


def corpus_ids(checkpoint: Path, length: int, offset: int = 0) -> list[int]:
    """Token ids of held-out-style text (not the training order), `length` long."""
    from omni_edge.export.corpus import MULTILINGUAL, stdlib_corpus
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(checkpoint / "tokenizer.json"))
    docs = list(MULTILINGUAL) + stdlib_corpus()[offset::37]
    ids: list[int] = []
    for doc in docs:
        ids += tok.encode(doc).ids
        if len(ids) >= length:
            break
    return ids[:length]


def cli(*args: str, timeout: int = 1800) -> subprocess.CompletedProcess[str]:
    # timeout: a hang guard, not a speed check (two pytest workers share the two cores with the
    # background device builds: the QNN fixture's setup, training and export, took 886 s that way)
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=timeout)


def unseen_peaked_checkpoint(out: Path, hidden: int = 96, intermediate: int = 256) -> Path:
    """Its own shape, tokenizer and seed; trained briefly so that its distributions are peaked."""
    from omni_edge.export.checkpoint import train_causal_lm
    from omni_edge.export.corpus import stdlib_corpus
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    texts = stdlib_corpus()[:200]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=900, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                       show_progress=False))
    tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    torch.manual_seed(7)
    model = Qwen3ForCausalLM(Qwen3Config(
        vocab_size=1000, hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=3, num_attention_heads=6,
        num_key_value_heads=2, head_dim=32, max_position_embeddings=2048, rope_theta=500000.0, tie_word_embeddings=False))
    train_causal_lm(model, tok, texts, 600, seed=7)
    model.save_pretrained(out)
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>").save_pretrained(out)
    return out


def random_qwen3_checkpoint(out: Path, sliding_window: int | None = None) -> Path:
    """A plain transformers Qwen3 with random, untrained weights and its own GPT-2-style tokenizer:
    a checkpoint the project never made (see tests/export/test_unseen_checkpoint.py)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    texts = [f"line {i}: the value of x is {i * i} and y is {i ** 3 % 97}" for i in range(3000)]
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=900, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                       show_progress=False))
    tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    torch.manual_seed(123)
    config = dict(vocab_size=1000, hidden_size=96, intermediate_size=256, num_hidden_layers=3, num_attention_heads=6,
                  num_key_value_heads=2, head_dim=32, max_position_embeddings=2048, rope_theta=500000.0,
                  tie_word_embeddings=False)
    if sliding_window:
        config.update(use_sliding_window=True, sliding_window=sliding_window, max_window_layers=0)
    Qwen3ForCausalLM(Qwen3Config(**config)).save_pretrained(out)
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>").save_pretrained(out)
    return out


def run_greedy_ids(plan: Path, prompt: list[int], n: int, *extra: str) -> tuple[list[int], dict]:
    """`omni-edge run --json` (plus `extra` options, e.g. --device): the ids and the last event."""
    out = subprocess.run([str(CLI), "run", "--plan", str(plan), "--prompt-ids", ",".join(map(str, prompt)),
                          "--max-new-tokens", str(n), "--ignore-stop-tokens", "--json", *extra],
                         capture_output=True, text=True, check=True, timeout=1800)
    events = [json.loads(line) for line in out.stdout.splitlines()]
    return [t for e in events if e["kind"] == "token" for t in e["token_ids"]], events[-1]
