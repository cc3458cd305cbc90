"""MiniCPM-o 4.5's talker as ONNX graphs (component talker-onnx): the Llama backbone through the
shared text decoder's graphs, as a causal LM over codes (its token table `emb_code`, its head the
restored weight-norm `head_code`), so the native decoder engine runs it; and two graphs for the
prefill rows, which the engine splices in place of the prefill's ids:

    condition.onnx   (thinker id [1, 1], thinker hidden [1, 1, llm_dim]) -> row [1, 1, hidden]
    text_embed.onnx  id [1, 1] -> row [1, 1, hidden] (the text_eos and audio_bos rows)

Its check (the task report): the thinker reference's spoken reply to the roadmap's request
through these graphs and the engine, greedy, the end masked for the first 50 codes, against the
PyTorch talker, to the near-tie rule; numerical: each prefill row against the reference's.

Not yet: the talker as a native stage fed by the thinker's stage (its plan is for the engine).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from omni_edge.artifacts import identity_report, new_component, write_validated
from omni_edge.contracts import ReportCheck
from omni_edge.export.comparison import sqnr_db
from omni_edge.export.decoder.graphs import DecoderShape
from omni_edge.export.decoder.onnx import export_onnx
from omni_edge.export.decoder.plan import FP32_MASK_VALUE, kv_caches, shape_bucket, thinker_stage, write_plan
from omni_edge.export.models.minicpmo45.talker import MIN_CODES, Talker, generate_codes
from omni_edge.export.models.minicpmo45.validation import path_agreement
from omni_edge.export.options import LlmExportOptions
from omni_edge.export.targets import onnx_target

Span = tuple[list[int], torch.Tensor, torch.Tensor]  # thinker ids, their states after and before the final norm
CONDITION_SQNR_DB = 60.0  # fp32 graphs vs the reference modules (measured 130+ dB)
CHECK_CODES = 64


def talker_lm(talker: Talker) -> Any:
    """transformers' LlamaForCausalLM holding the talker: codes in (emb_code), code logits out."""
    from transformers import LlamaForCausalLM

    config = talker.config.llama()
    config.vocab_size = talker.config.audio_tokens
    lm: Any = LlamaForCausalLM(config)
    state = {f"model.{k}": v for k, v in talker.model.state_dict().items() if k != "embed_tokens.weight"}
    own = talker.state_dict()
    state["model.embed_tokens.weight"], state["lm_head.weight"] = own["emb_code.0.weight"], own["head_code.0.weight"]
    lm.load_state_dict(state)
    return lm.eval()


class ConditionGraph(nn.Module):
    """The thinker's state as its stage hands it on (before the final norm: `norm` is the thinker's)."""

    def __init__(self, talker: Talker, norm: nn.Module) -> None:
        super().__init__()
        self.talker, self.norm = talker, norm

    def forward(self, ids: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        t = self.talker
        projected = t.projector_semantic(self.norm(hidden))
        if t.config.normalize:
            projected = projected / torch.clamp(projected.norm(dim=-1, keepdim=True), min=1e-12)
        out: torch.Tensor = t.emb_text(ids) + projected
        return out


class TextEmbedGraph(nn.Module):
    def __init__(self, talker: Talker) -> None:
        super().__init__()
        self.talker = talker

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.talker.emb_text(ids)
        return out


def prefill_rows(cdir: Path, talker: Talker, ids: list[int], hidden: torch.Tensor) -> np.ndarray:
    """The prefill [len(ids) + 2, hidden] through the condition and text_embed graphs; `hidden`:
    the thinker's states before its final norm."""
    condition = onnx_target.cpu_session(cdir / "condition.onnx")
    text = onnx_target.cpu_session(cdir / "text_embed.onnx")
    rows = [condition.run(None, {"ids": np.array([[i]], np.int64), "hidden": hidden[k][None, None].numpy()})[0][0, 0]
            for k, i in enumerate(ids)]
    rows += [text.run(None, {"ids": np.array([[i]], np.int64)})[0][0, 0]
             for i in (talker.config.text_eos, talker.config.audio_bos)]
    return np.stack(rows).astype(np.float32)


def engine_codes(plan: Path, rows: np.ndarray, eos: int, max_codes: int, threads: int = 0) -> list[int]:
    """Greedy codes of the exported talker on the native engine, the prefill rows spliced in."""
    from omni_edge import _native

    engine = _native.LlmEngine.open(str(plan), threads)
    n = rows.shape[0]
    logits = np.frombuffer(engine.feed([0] * n, rows.tobytes(), list(range(n))), np.float32).copy()
    codes: list[int] = []
    for step in range(max_codes):
        if step < MIN_CODES:
            logits[eos] = -np.inf
        code = int(np.argmax(logits))
        if code == eos:
            break
        codes.append(code)
        logits = np.frombuffer(engine.feed([code]), np.float32).copy()
    return codes


def export_talker(checkpoint: Path, out: Path, talker: Talker, norm: nn.Module, opts: LlmExportOptions,
                  span: Span | None) -> Path:
    """talker-onnx and its engine plan (OUT/plan.talker-onnx.json); `norm`: the thinker's final
    norm; `span`: the spoken reply to check it on (the thinker's ids and hidden states after and
    before its final norm), None without validation."""
    lm = talker_lm(talker)
    shape = DecoderShape.from_config(lm.config)
    caches = kv_caches(shape, opts)
    cdir = new_component(out / "talker-onnx", checkpoint)
    d = talker.config.llm_dim
    with tqdm(total=5 + 2 * len(caches), desc="export minicpm-o 4.5 talker", unit="graph", leave=False) as bar:
        graphs = export_onnx(cdir, lm, shape, opts, caches, bar)
        onnx_target.export_graph(ConditionGraph(talker, norm).eval(), (torch.zeros(1, 1, dtype=torch.int64), torch.zeros(1, 1, d)),
                                 ["ids", "hidden"], ["rows"], cdir / "condition.onnx")
        onnx_target.export_graph(TextEmbedGraph(talker).eval(), (torch.zeros(1, 1, dtype=torch.int64),), ["ids"], ["rows"],
                                 cdir / "text_embed.onnx")
        bar.update(2)
    llm = {"tokenizer": "tokenizer.json", "chat_format": "none", "stop_tokens": [], "hidden_size": shape.hidden,
           "num_layers": shape.layers, "num_kv_heads": shape.kv_heads, "head_dim": shape.head_dim,
           "vocab_size": shape.vocab, "prefill_chunk": opts.prefill_chunk, "mask_value": FP32_MASK_VALUE,
           "kv": {"mode": "full", "buckets": caches, "overflow": "refuse"}, "max_new_tokens": 4096,
           "sampling": {"temperature": 0.0}}
    plan = write_plan(out, f"{checkpoint.name} talker (onnx)", {**thinker_stage("talker-onnx", llm, graphs),
                                                                   "final_output_type": "codes"},
                      "plan.talker-onnx.json")
    revision = json.loads((checkpoint / "config.json").read_text()).get("_name_or_path", "") or "local"
    identity = dict(checkpoint_id=checkpoint.name, checkpoint_revision=revision, precision="fp32",
                    shape_bucket=shape_bucket(opts, caches), target_abi="x86_64-linux")
    numerical, task = _reports(cdir, plan, talker, span, identity, opts.threads)
    from onnxruntime import __version__ as ort_version

    write_validated(cdir, "talker-onnx", identity, numerical, task, runtime="onnxruntime", runtime_version=ort_version,
                    compiler_version=f"torch-{torch.__version__}",
                    extra_metadata={"talker": {"caches": caches, "codes": talker.config.audio_tokens,
                                               "end": talker.config.eos, "min_codes": MIN_CODES,
                                               "graphs": {"condition": "condition.onnx", "text_embed": "text_embed.onnx"}}})
    return plan


def _reports(cdir: Path, plan: Path, talker: Talker, span: Span | None,
             identity: dict[str, str], threads: int) -> tuple[Any, Any]:
    skipped = (ReportCheck("validation_run", 0.0, 1.0, ">="),)
    if span is None:
        return identity_report("numerical", identity, skipped), identity_report("task", identity, skipped)
    ids, hidden, prenorm = span
    rows = prefill_rows(cdir, talker, ids, prenorm)
    with torch.no_grad():
        reference_rows = talker.condition(ids, hidden).numpy()
    ref = generate_codes(talker, ids, hidden, CHECK_CODES)
    got = engine_codes(plan, rows, talker.config.eos, CHECK_CODES, threads)
    numerical = identity_report("numerical", identity, (
        ReportCheck("condition_sqnr_db", sqnr_db(reference_rows, rows), CONDITION_SQNR_DB, ">="),))
    task = identity_report("task", identity, (ReportCheck("code_agreement", path_agreement(got, ref.codes, ref.logits), 1.0, ">="),
                                              ReportCheck("codes_compared", float(len(ref.codes)), 1.0, ">=")))
    return numerical, task
