"""A checkpoint the project never made: a plain transformers Qwen3Config with random,
untrained weights (flat distributions, untied embeddings, head_dim != hidden/heads, another
rope theta) and a GPT-2-style tokenizer. Exported with the default 512/1024 buckets, greedy
ids from `omni-edge run --json` are transformers' for 400 tokens across 512 (tests/numeric.py,
rule 3), on both backends; and the same in ring mode for its sliding-window twin (through ONNX
Runtime: the ring's ExecuTorch program is test_llm_pipeline's, and its lowering cost CI a minute
here)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from llm_reference import random_qwen3_checkpoint, run_greedy_ids
from numeric import assert_greedy
from paths import CLI


@pytest.mark.parametrize("kv", ["full", "ring"])
def test_unseen_checkpoint_400_tokens(request: pytest.FixtureRequest, tmp_path: Path, kv: str) -> None:
    from tokenizers import Tokenizer

    plans = ["plan.onnx.json", "plan.pte.json"]
    if kv == "full":  # the session's export (the device tests run it under qemu too)
        checkpoint, artifact = request.getfixturevalue("random_artifact")
    else:
        checkpoint, artifact, plans = random_qwen3_checkpoint(tmp_path / "ckpt", 64), tmp_path / "artifact", plans[:1]
        subprocess.run([str(CLI), "export", "llm", "--checkpoint", str(checkpoint), "--out", str(artifact), "--format",
                        "onnx", "--kv", kv], check=True, capture_output=True, timeout=1800)
    tok = Tokenizer.from_file(str(checkpoint / "tokenizer.json"))
    prompt = tok.encode(" ".join(f"line {i}: the value of x is {i * i}" for i in range(40))).ids[:150]
    for plan in plans:
        got, done = run_greedy_ids(artifact / plan, prompt, 400)
        assert len(got) == 400 and done["context_tokens"] == 549 and done["kind"] == "done"
        assert_greedy(got, checkpoint, prompt, plan)
