"""A checkpoint the project never made: a plain transformers Qwen3Config with random,
untrained weights (flat distributions, untied embeddings, head_dim != hidden/heads, another
rope theta) and a GPT-2-style tokenizer. Exported with the default 512/1024 buckets, greedy
ids from `omni-edge run --json` are transformers' for 400 tokens across 512 (tests/numeric.py,
rule 3), on both backends; and the same in ring mode for its sliding-window twin."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch
from numeric import assert_greedy

CLI = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "omni-edge"


def _checkpoint(out: Path, sliding_window: int | None) -> Path:
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


def _run_ids(plan: Path, prompt: list[int], n: int) -> tuple[list[int], dict]:
    out = subprocess.run([str(CLI), "run", "--plan", str(plan), "--prompt-ids", ",".join(map(str, prompt)),
                          "--max-new-tokens", str(n), "--ignore-stop-tokens", "--json"],
                         capture_output=True, text=True, check=True, timeout=600)
    events = [json.loads(line) for line in out.stdout.splitlines()]
    return [t for e in events if e["kind"] == "token" for t in e["token_ids"]], events[-1]


@pytest.mark.parametrize("kv", ["full", "ring"])
def test_unseen_checkpoint_400_tokens(tmp_path: Path, kv: str) -> None:
    from tokenizers import Tokenizer

    checkpoint = _checkpoint(tmp_path / "ckpt", 64 if kv == "ring" else None)
    artifact = tmp_path / "artifact"
    subprocess.run([str(CLI), "export", "llm", "--checkpoint", str(checkpoint), "--out", str(artifact), "--format", "both",
                    "--kv", kv], check=True, capture_output=True, timeout=900)
    tok = Tokenizer.from_file(str(checkpoint / "tokenizer.json"))
    prompt = tok.encode(" ".join(f"line {i}: the value of x is {i * i}" for i in range(40))).ids[:150]
    for plan in ("plan.onnx.json", "plan.pte.json"):
        got, done = _run_ids(artifact / plan, prompt, 400)
        assert len(got) == 400 and done["context_tokens"] == 549 and done["kind"] == "done"
        assert_greedy(got, checkpoint, prompt, plan)
