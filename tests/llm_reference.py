"""transformers as the reference for generated token ids."""

from __future__ import annotations

from pathlib import Path

import torch


def greedy_ids(checkpoint: Path, prompt_ids: list[int], new_tokens: int) -> list[int]:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(checkpoint), dtype=torch.float32).eval()
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt_ids]), do_sample=False, max_new_tokens=new_tokens,
                             eos_token_id=None, pad_token_id=0)
    return list(out[0, len(prompt_ids):].tolist())


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
