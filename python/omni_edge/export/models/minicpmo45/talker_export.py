"""MiniCPM-o 4.5's talker as graphs (component talker-onnx, or talker-pte as an ExecuTorch
program): the Llama backbone through the shared text decoder's graphs, as a causal LM over codes
(its token table `emb_code`, its head the restored weight-norm `head_code`), so the native
decoder engine runs it; and two graphs for the prefill rows, which the engine splices in place
of the prefill's ids (rows.pte's methods on ExecuTorch):

    condition.onnx   (thinker id [1, 1], thinker state [1, 1, llm_dim] before its final norm)
                     -> row [1, 1, hidden] (the thinker's final norm is in the graph)
    text_embed.onnx  id [1, 1] -> row [1, 1, hidden] (the text_eos and audio_bos rows)

Its check (the task report): the thinker reference's spoken reply to the roadmap's request
through these graphs and the engine, greedy, the end masked for the first 50 codes, against the
PyTorch talker, to the near-tie rule; numerical: each prefill row against the reference's. The
omni plan runs it as a native stage (family codec_lm) after the thinker.
"""

from __future__ import annotations

import importlib.metadata
import json
from dataclasses import replace
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
from omni_edge.export.decoder.plan import FP32_MASK_VALUE, kv_caches, kv_section, shape_bucket, thinker_stage, write_plan
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


# The prefill rows' graphs of each format: (condition, text_embed) references for a plan.
ROW_GRAPHS: dict[str, tuple[Any, Any]] = {
    "onnx": ("condition.onnx", "text_embed.onnx"),
    "pte": ({"file": "rows.pte", "method": "condition"}, {"file": "rows.pte", "method": "text_embed"}),
}


def row_sessions(cdir: Path, fmt: str) -> tuple[Any, Any]:
    """The condition and text_embed graphs of a talker component, as sessions with ONNX Runtime's
    run(None, feeds)."""
    if fmt == "onnx":
        return onnx_target.cpu_session(cdir / "condition.onnx"), onnx_target.cpu_session(cdir / "text_embed.onnx")
    from omni_edge.export.targets.executorch_target import MethodSession

    return MethodSession(cdir / "rows.pte", "condition"), MethodSession(cdir / "rows.pte", "text_embed")


def prefill_rows(sessions: tuple[Any, Any], talker: Talker, ids: list[int], hidden: torch.Tensor) -> np.ndarray:
    """The prefill [len(ids) + 2, hidden] through the condition and text_embed graphs (`sessions`,
    row_sessions'); `hidden`: the thinker's states before its final norm."""
    condition, text = sessions
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
                  span: Span | None, fmt: str = "onnx") -> Path:
    """talker-<fmt> (onnx: ONNX Runtime graphs; pte: an ExecuTorch program, the rows' graphs in
    rows.pte) and its engine plan (OUT/plan.talker-<fmt>.json); `norm`: the thinker's final norm;
    `span`: the spoken reply to check it on (the thinker's ids and hidden states after and before
    its final norm), None without validation."""
    lm = talker_lm(talker)
    shape = DecoderShape.from_config(lm.config)
    caches = kv_caches(shape, opts)
    # The talker keeps the masked body: with the fused attention op, TorchScript's peephole pass
    # fails on its graph (IndexError in _jit_pass_peephole; not yet understood), and its contexts
    # are a reply's frames, short.
    opts = replace(opts, attention="masked")
    cdir = new_component(out / f"talker-{fmt}", checkpoint)
    d = talker.config.llm_dim
    examples = {"condition": (ConditionGraph(talker, norm).eval(), (torch.zeros(1, 1, dtype=torch.int64), torch.zeros(1, 1, d))),
                "text_embed": (TextEmbedGraph(talker).eval(), (torch.zeros(1, 1, dtype=torch.int64),))}
    with tqdm(total=5 + 2 * len(caches), desc=f"export minicpm-o 4.5 talker ({fmt})", unit="graph", leave=False) as bar:
        if fmt == "onnx":
            graphs = export_onnx(cdir, lm, shape, opts, caches, bar)
            for (module, example), file in zip(examples.values(), ROW_GRAPHS["onnx"], strict=True):
                onnx_target.export_graph(module, example, ["ids", "hidden"][: len(example)], ["rows"], cdir / file)
        else:
            from omni_edge.export.decoder.pte import export_pte
            from omni_edge.export.targets.executorch_target import export_program

            graphs = export_pte(cdir, lm, shape, opts, caches, bar)
            export_program(dict(examples), cdir / "rows.pte")
        bar.update(2)
    llm = {"tokenizer": "tokenizer.json", "chat_format": "none", "stop_tokens": [], "hidden_size": shape.hidden,
           "num_layers": shape.layers, "num_kv_heads": shape.kv_heads, "head_dim": shape.head_dim,
           "vocab_size": shape.vocab, "prefill_chunk": opts.prefill_chunk, "mask_value": FP32_MASK_VALUE,
           "kv": kv_section(opts, caches, fmt), "max_new_tokens": 4096,
           "sampling": {"temperature": 0.0}}
    plan = write_plan(out, f"{checkpoint.name} talker ({fmt})", {**thinker_stage(f"talker-{fmt}", llm, graphs),
                                                                 "final_output_type": "codes"},
                      f"plan.talker-{fmt}.json")
    revision = json.loads((checkpoint / "config.json").read_text()).get("_name_or_path", "") or "local"
    identity = dict(checkpoint_id=checkpoint.name, checkpoint_revision=revision, precision="fp32",
                    shape_bucket=shape_bucket(opts, caches), target_abi="x86_64-linux")
    numerical, task = _reports(row_sessions(cdir, fmt), plan, talker, span, identity, opts.threads)
    runtime = "onnxruntime" if fmt == "onnx" else "executorch"
    write_validated(cdir, f"talker-{fmt}", identity, numerical, task, runtime=runtime,
                    runtime_version=importlib.metadata.version(runtime), compiler_version=f"torch-{torch.__version__}",
                    extra_metadata={"talker": {"caches": caches, "codes": talker.config.audio_tokens,
                                               "end": talker.config.eos, "min_codes": MIN_CODES, "format": fmt,
                                               "graphs": dict(zip(examples, ROW_GRAPHS[fmt], strict=True))}})
    return plan


def _reports(sessions: tuple[Any, Any], plan: Path, talker: Talker, span: Span | None,
             identity: dict[str, str], threads: int) -> tuple[Any, Any]:
    skipped = (ReportCheck("validation_run", 0.0, 1.0, ">="),)
    if span is None:
        return identity_report("numerical", identity, skipped), identity_report("task", identity, skipped)
    ids, hidden, prenorm = span
    rows = prefill_rows(sessions, talker, ids, prenorm)
    with torch.no_grad():
        reference_rows = talker.condition(ids, hidden).numpy()
    ref = generate_codes(talker, ids, hidden, CHECK_CODES)
    got = engine_codes(plan, rows, talker.config.eos, CHECK_CODES, threads)
    numerical = identity_report("numerical", identity, (
        ReportCheck("condition_sqnr_db", sqnr_db(reference_rows, rows), CONDITION_SQNR_DB, ">="),))
    task = identity_report("task", identity, (ReportCheck("code_agreement", path_agreement(got, ref.codes, ref.logits), 1.0, ">="),
                                              ReportCheck("codes_compared", float(len(ref.codes)), 1.0, ">=")))
    return numerical, task
