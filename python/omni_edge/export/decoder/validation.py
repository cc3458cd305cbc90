"""Validation of exported text-model graphs against transformers, run through the native
engine (the code that runs on the device), written as manifest v2 validation reports.

Numerical report: logits of the exported graphs vs the PyTorch model on held-out prompts, at
the end of chunked prefill and over teacher-forced decode steps (which cross a context bucket
when the plan has more than one): SQNR, max |diff|, top-1 agreement.
Task report: greedy generation of 64 tokens vs transformers' generate (prefix agreement) and
the perplexity of held-out text under both.
Where transformers itself is undecided (its top-2 gap under `comparison.FP32_TIE_GAP`) either
pick agrees with it: a near tie is not a difference any precision can be held to."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from omni_edge.contracts import ReportCheck, ValidationReport
from omni_edge.export.comparison import FP32_TIE_GAP, sqnr_db

# fp32 graphs: only summation order differs from PyTorch.
FP32_LIMITS = {"logit_sqnr_db": 60.0, "top1_agreement": 0.99, "greedy_agreement_64": 0.95,
               "perplexity_rel_delta": 0.001}
def greedy_prompts() -> list[str]:
    """Starts of Python standard-library docstrings: text any code-literate model continues
    confidently, and the documents this project's local checkpoints were trained on, so the
    distributions along the greedy path are peaked (quantization noise then rarely flips a token)."""
    from omni_edge.export.corpus import stdlib_corpus

    docs = stdlib_corpus()
    return [docs[i][:64] for i in (5, 45, 95)]


HELD_OUT = (
    "The controller streams tokens to the consumer, which acknowledges each event before more credit is granted.",
    "Numbers such as 3.14159 and 2026 are split into digits; 東京 and emoji like 🚀 become byte-level tokens.",
    "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n",
)


def _agrees(ref: np.ndarray, token: int) -> bool:
    """Whether `token` is transformers' pick from its logits `ref`, or one of a near tie."""
    return int(np.argmax(ref)) == token or float(ref.max() - ref[token]) < FP32_TIE_GAP


class Engine:
    """The native engine on a plan (its manifest need not be qualified yet): logits per feed."""

    def __init__(self, plan: Path, threads: int) -> None:
        from omni_edge import _native

        self._e = _native.LlmEngine.open(str(plan), threads)
        self.cache_slots = int(self._e.cache_slots)

    def reset(self) -> None:
        self._e.reset()

    def feed(self, ids: list[int]) -> np.ndarray:
        return np.frombuffer(self._e.feed(ids), dtype=np.float32).copy()


def _prompt_ids(tokenizer: Any, text: str, length: int) -> list[int]:
    ids: list[int] = []
    while len(ids) < length:
        ids += tokenizer.encode(text).ids
    return ids[:length]


def teacher_forced(model: Any, engine: Engine, prompts: list[list[int]], decode_steps: int) -> dict[str, float]:
    """The engine's logits against transformers' at the end of each prompt and along
    transformers' greedy continuation (teacher-forced): SQNR (median, min), max |diff|, top-1
    agreement, and the reference logits' RMS."""
    refs, gots = [], []
    for ids in prompts:
        with torch.no_grad():
            greedy = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.int64),
                                    do_sample=False, max_new_tokens=decode_steps, eos_token_id=None,
                                    pad_token_id=0)[0].tolist()
            full = model(torch.tensor([greedy])).logits[0].numpy()
        engine.reset()
        got = engine.feed(ids)
        refs.append(full[len(ids) - 1])
        gots.append(got)
        for step in range(decode_steps - 1):
            pos = len(ids) + step
            got = engine.feed([greedy[pos]])
            refs.append(full[pos])
            gots.append(got)
    ref, got = np.stack(refs), np.stack(gots)
    return {
        "logit_sqnr_db": float(np.median([sqnr_db(r, g) for r, g in zip(ref, got, strict=True)])),
        "logit_sqnr_db_min": min(sqnr_db(r, g) for r, g in zip(ref, got, strict=True)),
        "logit_max_abs_diff": float(np.max(np.abs(ref - got))),
        "top1_agreement": float(np.mean([_agrees(r, int(np.argmax(g))) for r, g in zip(ref, got, strict=True)])),
        "logit_rms": float(np.sqrt(np.mean(ref.astype(np.float64) ** 2))),
        "positions_compared": float(len(refs)),
    }


def _greedy_agreement(model: Any, engine: Engine, prompt: list[int], n: int,
                      free_run: bool = True) -> tuple[float, float, float]:
    """(agreement along the reference's greedy path, agreement of a free run, free-run prefix).

    Along the path: at each of the n steps of transformers' greedy continuation, with the same
    prefix, does the artifact pick the same token? A free run diverges for good at the first
    flip, which a near-tie in the reference itself can cause, so it is reported, not gated
    (and skipped, as NaN, where steps are dear: `free_run=False`)."""
    with torch.no_grad():
        # The mask is explicit: generate would take every id equal to pad_token_id for padding.
        out = model.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.int64),
                             do_sample=False, max_new_tokens=n, eos_token_id=None, pad_token_id=0, output_logits=True,
                             return_dict_in_generate=True)
    ref = out.sequences[0, len(prompt):].tolist()
    engine.reset()
    logits = engine.feed(prompt)
    same = 0
    for token, ref_logits in zip(ref, out.logits, strict=True):
        same += _agrees(ref_logits[0].double().numpy(), int(np.argmax(logits)))
        logits = engine.feed([token])
    if not free_run:
        return same / n, math.nan, math.nan
    engine.reset()
    logits = engine.feed(prompt)
    run: list[int] = []
    for _ in range(n):
        token = int(np.argmax(logits))
        run.append(token)
        logits = engine.feed([token])
    matches = [a == b for a, b in zip(ref, run, strict=True)]
    prefix = matches.index(False) if False in matches else n
    return same / n, sum(matches) / n, prefix / n


def _task(model: Any, engine: Engine, prompts: list[list[int]], text_ids: list[int],
          free_run: bool = True) -> dict[str, float]:
    n = 64
    results = [_greedy_agreement(model, engine, prompt, n, free_run) for prompt in prompts]
    agree = [r[0] for r in results]
    run_agree = [r[1] for r in results]
    prefixes = [r[2] for r in results]
    # Perplexity of held-out text, teacher-forced through both.
    with torch.no_grad():
        ref_logits = model(torch.tensor([text_ids])).logits[0].double()
    ref_nll = torch.nn.functional.cross_entropy(ref_logits[:-1], torch.tensor(text_ids[1:])).item()
    engine.reset()
    nll = 0.0
    logits = engine.feed(text_ids[:1])
    for target in text_ids[1:]:
        lp = torch.log_softmax(torch.from_numpy(logits).double(), -1)
        nll -= float(lp[target])
        logits = engine.feed([target])
    got_nll = nll / (len(text_ids) - 1)
    ref_ppl, got_ppl = math.exp(ref_nll), math.exp(got_nll)
    return {"greedy_agreement_64": float(np.mean(agree)), "greedy_run_agreement_64": float(np.mean(run_agree)),
            "greedy_prefix_agreement_64": float(np.mean(prefixes)),
            "perplexity_reference": ref_ppl, "perplexity": got_ppl, "perplexity_rel_delta": abs(got_ppl - ref_ppl) / ref_ppl}


def _report(kind: str, identity: dict[str, str], checks: tuple[ReportCheck, ...]) -> ValidationReport:
    return ValidationReport(kind, identity["checkpoint_id"], identity["checkpoint_revision"], identity["precision"],
                            identity["shape_bucket"], identity["target_abi"], checks)


def _forced_prompts(tokenizer: Any, plan: Path, engine: Engine) -> list[list[int]]:
    """The teacher-forced prompts: 40 and 7 tokens of held-out text, and one that ends just before
    the first cache fills, so the forced decode crosses it (into the next bucket, or around the
    ring); with a single full bucket, it ends inside it."""
    prompts = [_prompt_ids(tokenizer, HELD_OUT[0], 40), _prompt_ids(tokenizer, HELD_OUT[1], 7)]
    kv = json.loads(plan.read_text())["stages"][0]["llm"]["kv"]
    crossing = kv["mode"] == "ring" or len(kv["buckets"]) > 1 or kv.get("overflow") == "ring"
    prompts.append(_prompt_ids(tokenizer, HELD_OUT[2], max(8, engine.cache_slots - (6 if crossing else 13))))
    return prompts


def measure_on_plan(model: Any, plan: Path, tokenizer_json: Path, threads: int = 0,
                    task: bool = True, free_run: bool = True) -> dict[str, float]:
    """The reports' measurements on a plan: the numerical report's 36 teacher-forced positions,
    then the task report's greedy agreement and perplexity (about 480 steps). Where steps are
    dear (the HTP emulator takes seconds per step of a real model; benchmarks/quality.py),
    `free_run=False` skips the reported-only free runs (about 290 steps) and `task=False`
    measures the teacher-forced positions alone."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_json))
    engine = Engine(plan, threads)
    got = teacher_forced(model, engine, _forced_prompts(tokenizer, plan, engine), 12)
    if task:
        got |= _task(model, engine, [tokenizer.encode(p).ids for p in greedy_prompts()],
                     _prompt_ids(tokenizer, HELD_OUT[2], 96), free_run)
    return got


def validate_llm(model: Any, plan: Path, tokenizer_json: Path, identity: dict[str, str], enabled: bool, threads: int = 0,
                 limits: dict[str, float] | None = None) -> tuple[ValidationReport, ValidationReport]:
    limits = limits or FP32_LIMITS
    if not enabled:
        skipped = (ReportCheck("validation_run", 0.0, 1.0, ">="),)
        return _report("numerical", identity, skipped), _report("task", identity, skipped)
    got = measure_on_plan(model, plan, tokenizer_json, threads)
    numerical = _report("numerical", identity, (
        ReportCheck("logit_sqnr_db", got["logit_sqnr_db"], limits["logit_sqnr_db"], ">="),  # median over positions
        ReportCheck("logit_sqnr_db_min", got["logit_sqnr_db_min"], -1e9, ">="),
        ReportCheck("top1_agreement", got["top1_agreement"], limits["top1_agreement"], ">="),
        ReportCheck("logit_max_abs_diff", got["logit_max_abs_diff"], 1e9, "<="),
        ReportCheck("positions_compared", got["positions_compared"], 1.0, ">="),
    ))
    task_report = _report("task", identity, (
        ReportCheck("greedy_agreement_64", got["greedy_agreement_64"], limits["greedy_agreement_64"], ">="),
        ReportCheck("greedy_run_agreement_64", got["greedy_run_agreement_64"], 0.0, ">="),  # reported
        ReportCheck("greedy_prefix_agreement_64", got["greedy_prefix_agreement_64"], 0.0, ">="),  # reported
        ReportCheck("perplexity_rel_delta", got["perplexity_rel_delta"], limits["perplexity_rel_delta"], "<="),
        ReportCheck("perplexity", got["perplexity"], 1e12, "<="),
    ))
    return numerical, task_report
