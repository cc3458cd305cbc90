"""Speech export: the talker, code predictor and vocoder of a Qwen3-TTS-shaped checkpoint as
static-shape ONNX graphs, validated against the PyTorch reference through ONNX Runtime.

Talker and code predictor are Qwen3 decoders: their bodies are the same graphs as the text
LLM's (`qwen3.BodyGraph`: explicit KV cache in, new keys/values out, additive mask), so the
native engine that runs a text model runs them. What differs is around the bodies:
  talker embed      (text_ids [1, N], codes [1, N, 16]) -> hidden: projected text embedding plus
                    the sum of the 16 codebook embeddings; codebook 0's vocabulary size, or the
                    codebook size for codebooks 1..15, means "absent" (a zero row): the prompt
                    sets codebook 0 only, or no codebook (text-only rows).
  talker embed from hidden  (text_hidden [1, 1, Ht], codes [1, 1, 16]) -> hidden: the omni
                    talker's input, a thinker hidden state through the text projection.
  talker head       hidden [1, 1, H] -> (normed [1, 1, Hp], codebook-0 logits [1, 1, V0]);
                    normed is the final-normed hidden through the predictor's input projection
                    (none when the predictor is as wide as the talker): its first input.
  predictor embed   ids [1, N] -> hidden [1, N, Hp] over one table: codebook 0 (V0 rows), then
                    codebooks 1..15 (V rows each), id = offset of the codebook + code; through
                    the predictor's input projection.
  predictor head    hidden [1, 1, Hp] -> logits [1, 15, V], all 15 heads (the runtime reads row g-1).
  vocoder           codes [1, 16, W] -> wav [1, 1, W x 1920 - tail]: one fixed window of W frames
                    (left context + chunk + 1), right-padded; causal, so padding never changes
                    the samples a chunk emits.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from omni_edge import __version__
from omni_edge.artifacts import new_component, write_manifest, write_report
from omni_edge.contracts import ArtifactMetadata, ReportCheck, ValidationRef, ValidationReport
from omni_edge.export import onnx_target
from omni_edge.export.comparison import FP32_TIE_GAP, Agreement, sqnr_db
from omni_edge.export.qwen3 import BodyGraph, Qwen3Shape, RMSNorm, body_example, body_io_names
from omni_edge.export.qwen3_tts import (
    ABSENT,
    CODE_GROUPS,
    SAMPLE_RATE,
    SAMPLES_PER_FRAME,
    Qwen3Tts,
    Sampling,
    StreamShape,
    Voice,
    compare_codes,
    decode_streaming,
    generate_codes,
    penalized,
    suppressed,
)
from omni_edge.export.qwen3_tts_codec import Qwen3TtsCodecDecoder
from omni_edge.files import write_text_atomic

MASK_VALUE = -100.0  # finite, survives 16-bit quantization (DESIGN.md)
PREDICTOR_SLOTS = CODE_GROUPS  # talker hidden + codes 0..14 are attended when predicting code 15
RECORD_BUDGET_BYTES = 256 << 20  # calibration: recorded inputs kept per graph while one sentence runs


@dataclass(frozen=True)
class TtsExportOptions:
    prefill_chunk: int = 32
    buckets: tuple[int, ...] = (512, 1024)  # talker context: text prefix + frames
    stream: StreamShape = field(default_factory=StreamShape)
    validate: bool = True
    validation_frames: int = 48
    threads: int = 0
    formats: tuple[str, ...] = ("onnx",)  # onnx (ONNX Runtime) and/or pte (ExecuTorch, XNNPACK)
    voice: Voice = field(default_factory=Voice)  # a release's speaker, language and instruction
    precision: str = "fp32"  # cpu: fp32 | int8 | int4 (the talker's and code predictor's projections)
    block_size: int = 32     # int8/int4: weights per quantization block along K


class TalkerEmbedGraph(nn.Module):
    offsets: torch.Tensor

    def __init__(self, model: Qwen3Tts) -> None:
        super().__init__()
        t, ids = model.talker, model.ids
        self.text_embedding = nn.Parameter(t.text_embedding.weight.detach().clone(), requires_grad=False)
        self.text_projection = t.text_projection
        rows = [torch.cat([e.weight.detach(), torch.zeros(1, e.weight.shape[1])])  # + the "absent" row
                for e in t.code_predictor.model.codec_embedding]
        table0 = t.model.embed_tokens.weight.detach()
        self.codebook0 = nn.Parameter(torch.cat([table0, torch.zeros(1, table0.shape[1])]),  # + the "absent" row
                                      requires_grad=False)
        self.codebooks = nn.Parameter(torch.cat(rows), requires_grad=False)       # [15 * (V + 1), H]
        offsets = torch.arange(CODE_GROUPS - 1) * (ids.codebook_size + 1)
        self.register_buffer("offsets", offsets, persistent=False)

    def forward(self, text_ids: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
        text: torch.Tensor = self.text_projection(self.text_embedding[text_ids])
        rest = self.codebooks[codes[..., 1:] + self.offsets].sum(-2)
        return text + self.codebook0[codes[..., 0]] + rest


class TalkerHiddenEmbedGraph(nn.Module):
    """The omni talker's input: a thinker hidden state through the text projection, plus the
    codebook embeddings (as TalkerEmbedGraph, which takes text ids instead)."""

    def __init__(self, embed: TalkerEmbedGraph) -> None:
        super().__init__()
        self.embed = embed

    def forward(self, text_hidden: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
        e = self.embed
        rest = e.codebooks[codes[..., 1:] + e.offsets].sum(-2)
        out: torch.Tensor = e.text_projection(text_hidden) + e.codebook0[codes[..., 0]] + rest
        return out


class TalkerHeadGraph(nn.Module):
    def __init__(self, model: Qwen3Tts, s: Qwen3Shape, reduce: str = "mean") -> None:
        super().__init__()
        t = model.talker
        self.norm = RMSNorm(t.model.norm.weight, s.eps, reduce)
        self.weight = nn.Parameter(t.codec_head.weight.detach().t().contiguous(), requires_grad=False)
        self.projection = t.code_predictor.small_to_mtp_projection
        self.s = s

    def forward(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        normed = self.norm(hidden)
        logits = (normed.reshape(1, self.s.hidden) @ self.weight).reshape(1, 1, -1)
        out: torch.Tensor = self.projection(normed)
        return out, logits


class PredictorEmbedGraph(nn.Module):
    def __init__(self, model: Qwen3Tts) -> None:
        super().__init__()
        p = model.talker.code_predictor
        tables = [model.talker.model.embed_tokens.weight.detach()] + [e.weight.detach() for e in p.model.codec_embedding]
        self.table = nn.Parameter(torch.cat(tables), requires_grad=False)
        self.projection = p.small_to_mtp_projection

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.projection(self.table[ids])
        return out


def predictor_id(model: Qwen3Tts, group: int, code: int) -> int:
    """Row of the predictor embed table for `code` of codebook `group`."""
    return code if group == 0 else model.ids.vocab + (group - 1) * model.ids.codebook_size + code


class PredictorHeadGraph(nn.Module):
    def __init__(self, model: Qwen3Tts, s: Qwen3Shape, reduce: str = "mean") -> None:
        super().__init__()
        p = model.talker.code_predictor
        self.norm = RMSNorm(p.model.norm.weight, s.eps, reduce)
        self.weight = nn.Parameter(torch.cat([h.weight.detach() for h in p.lm_head]).t().contiguous(),
                                   requires_grad=False)                                   # [H, 15 * V]
        self.s = s

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = (self.norm(hidden).reshape(1, self.s.hidden) @ self.weight).reshape(1, CODE_GROUPS - 1, -1)
        return logits


class VocoderGraph(nn.Module):
    """The vocoder over a fixed window, with its sliding-window causal mask as a constant."""

    mask: torch.Tensor
    positions: torch.Tensor

    def __init__(self, model: Qwen3Tts, frames: int) -> None:
        super().__init__()
        self.v: Any = model.vocoder
        i = torch.arange(frames)
        window = int(self.v.config.sliding_window)
        allowed = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < window)
        self.register_buffer("mask", torch.where(allowed, 0.0, MASK_VALUE)[None, None], persistent=False)
        self.register_buffer("positions", i[None], persistent=False)

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        v = self.v
        masks = {"sliding_attention": self.mask, "full_attention": self.mask}
        if isinstance(v, Qwen3TtsCodecDecoder):
            out: torch.Tensor = v(codes, masks, self.positions)
            return out
        hidden = v.code_embedding(codes + v.code_offset).mean(1)
        hidden = v.pre_transformer(inputs_embeds=hidden, attention_mask=masks, position_ids=self.positions).last_hidden_state
        hidden = hidden.permute(0, 2, 1)
        for blocks in v.upsample:
            for block in blocks:
                hidden = block(hidden)
        for block in v.decoder:
            hidden = block(hidden)
        wav: torch.Tensor = hidden.clamp(min=-1, max=1)
        return wav


def check_options(opts: TtsExportOptions) -> None:
    """Refuse options no export can honour, before any work."""
    if opts.prefill_chunk < 1 or not opts.buckets or min(opts.buckets) < opts.prefill_chunk:
        raise ValueError("every talker bucket must hold at least one prefill chunk")
    if opts.validation_frames < 1:
        raise ValueError("validation needs at least one frame")
    if opts.precision not in ("fp32", *SPEECH_CPU_LIMITS):
        raise ValueError(f"--target cpu takes --precision fp32, {', '.join(SPEECH_CPU_LIMITS)}, not {opts.precision!r}")
    if opts.precision != "fp32":
        from omni_edge.export.cpu_quant import check_block_size

        if set(opts.formats) != {"onnx"}:
            raise ValueError(f"--precision {opts.precision} is built for ONNX Runtime only (--format onnx): an "
                             "ExecuTorch speech program has no teacher-forced check to qualify it yet")
        check_block_size(opts.block_size)


def _shape(config: Any) -> Qwen3Shape:
    return Qwen3Shape.from_config(config)


Job = tuple[str, nn.Module, tuple[torch.Tensor, ...], list[str], list[str]]


def graph_jobs(model: Qwen3Tts, opts: TtsExportOptions, reduce: str = "mean") -> list[Job]:
    """Every graph of the speech stages: (name, module, example inputs, input names, output
    names). `reduce="matmul"` writes the RMSNorms as XNNPACK runs them (ExecuTorch)."""
    talker_s, pred_s = _shape(model.talker.model.config), _shape(model.talker.code_predictor.config)
    C = opts.prefill_chunk
    jobs: list[Job] = []
    t_embed = TalkerEmbedGraph(model).eval()
    for n in (C, 1):
        jobs.append((f"talker_embed_n{n}", t_embed, (torch.zeros(1, n, dtype=torch.int64),
                     torch.zeros(1, n, CODE_GROUPS, dtype=torch.int64)), ["text_ids", "codes"], ["hidden"]))
    text_hidden = int(model.config["talker_config"]["text_hidden_size"])
    jobs.append(("talker_embed_hidden_n1", TalkerHiddenEmbedGraph(t_embed).eval(),
                 (torch.zeros(1, 1, text_hidden), torch.zeros(1, 1, CODE_GROUPS, dtype=torch.int64)),
                 ["text_hidden", "codes"], ["hidden"]))
    t_body, (b_in, b_out) = BodyGraph(model.talker, talker_s, reduce).eval(), body_io_names(talker_s.layers)
    for cache in sorted(set(opts.buckets)):
        jobs.append((f"talker_prefill_s{cache}", t_body, body_example(talker_s, C, cache), b_in, b_out))
        jobs.append((f"talker_decode_s{cache}", t_body, body_example(talker_s, 1, cache), b_in, b_out))
    jobs.append(("talker_head", TalkerHeadGraph(model, talker_s, reduce).eval(), (torch.zeros(1, 1, talker_s.hidden),),
                 ["hidden"], ["normed", "logits"]))
    p_embed = PredictorEmbedGraph(model).eval()
    jobs.append(("predictor_embed_n1", p_embed, (torch.zeros(1, 1, dtype=torch.int64),), ["input_ids"], ["hidden"]))
    p_body, (p_in, p_out) = BodyGraph(model.talker.code_predictor, pred_s, reduce).eval(), body_io_names(pred_s.layers)
    jobs.append((f"predictor_decode_s{PREDICTOR_SLOTS}", p_body, body_example(pred_s, 1, PREDICTOR_SLOTS), p_in, p_out))
    jobs.append(("predictor_head", PredictorHeadGraph(model, pred_s, reduce).eval(), (torch.zeros(1, 1, pred_s.hidden),),
                 ["hidden"], ["logits"]))
    for w in opts.stream.windows:
        jobs.append((f"vocoder_w{w}", VocoderGraph(model, w).eval(),
                     (torch.zeros(1, CODE_GROUPS, w, dtype=torch.int64),), ["codes"], ["wav"]))
    return jobs


def export_graphs(model: Qwen3Tts, out: Path, opts: TtsExportOptions) -> dict[str, str]:
    """Every graph as ONNX into `out`, weights shared in one file; graph name -> file. At int8 /
    int4 the talker's and the code predictor's projections (bodies and heads) read blocks
    (`cpu_quant`); embeddings and the vocoder stay float32."""
    files: dict[str, str] = {}
    for name, module, example, ins, outs in tqdm(graph_jobs(model, opts), desc="export speech graphs", unit="graph",
                                                 leave=False):
        onnx_target.export_graph(module, example, ins, outs, out / f"{name}.onnx")
        files[name] = f"{name}.onnx"
    if opts.precision != "fp32":
        from omni_edge.export.cpu_quant import CPU_PRECISIONS, quantize_graph

        done: dict[bytes, Any] = {}
        for name, file in files.items():
            if name.startswith(QUANTIZED_GRAPHS):
                quantize_graph(out / file, CPU_PRECISIONS[opts.precision], opts.block_size, done)
    onnx_target.share_weights(out, list(files.values()))
    return files


def export_program(model: Qwen3Tts, out: Path, opts: TtsExportOptions) -> dict[str, str]:
    """Every graph as a method of one ExecuTorch program `out/model.pte` (XNNPACK); graph name ->
    method."""
    from omni_edge.export import executorch_target

    jobs = graph_jobs(model, opts, reduce="matmul")
    with tqdm(total=len(jobs), desc="export speech methods", unit="graph", leave=False) as progress:
        executorch_target.export_program({name: (module, example) for name, module, example, _, _ in jobs},
                                         out / "model.pte", progress)
    return {name: name for name, *_ in jobs}


# ---- validation: the graphs through ONNX Runtime against the PyTorch reference ----------------

class GraphRunner:
    """The exported graphs driven the way the controller will drive them, in Python: one KV
    cache per decoder, slots in place, the additive mask built per step.

    `sessions` may open a graph its own way (the QNN route: HTP sessions) or return None for the
    default, a CPU fp32 session. The talker runs in the largest bucket until `use_bucket` picks
    another, opening only that bucket's graphs (a large talker's buckets are never all loaded at
    once). After `start_recording(cap)`, graph inputs are kept in `recorded` (graph -> runs, each
    the inputs in the graph's order): a uniform choice of at most `cap` runs per graph (fewer for
    inputs so large that `cap` of them would pass RECORD_BUDGET_BYTES): calibration."""

    def __init__(self, model: Qwen3Tts, directory: Path, files: dict[str, str], opts: TtsExportOptions,
                 sessions: Callable[[str, Path], Any | None] | None = None) -> None:
        import onnxruntime as ort

        so = ort.SessionOptions()
        if opts.threads:
            so.intra_op_num_threads = opts.threads

        def open_graph(name: str) -> Any:
            path = directory / files[name]
            session = sessions(name, path) if sessions is not None else None
            return session or ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])

        self._open = open_graph
        self._bucket_graphs = {b: [f"talker_{kind}_s{b}" for kind in ("prefill", "decode")] for b in opts.buckets}
        bucket_graphs = {n for names in self._bucket_graphs.values() for n in names}
        self.s = {k: self._open(k) for k in files if k not in bucket_graphs}
        self.cache = 0
        self.use_bucket(max(opts.buckets))
        self.recorded: dict[str, list[list[np.ndarray]]] | None = None
        self._cap = 0
        self._seen: dict[str, int] = {}
        self._rng = np.random.default_rng(0)
        self.model, self.opts = model, opts
        self.talker_s = _shape(model.talker.model.config)
        self.pred_s = _shape(model.talker.code_predictor.config)

    def use_bucket(self, cache: int) -> None:
        """Run the talker in bucket `cache` from now on (its graphs replace the last bucket's)."""
        if cache == self.cache:
            return
        for name in self._bucket_graphs.get(self.cache, []):
            del self.s[name]
        self.cache = cache
        for name in self._bucket_graphs[cache]:
            self.s[name] = self._open(name)
        self.inputs = {k: [i.name for i in s.get_inputs()] for k, s in self.s.items()}

    def start_recording(self, cap: int) -> None:
        self.recorded, self._cap, self._seen = {}, cap, {}
        self._rng = np.random.default_rng(0)

    def _record(self, name: str, feeds: dict[str, np.ndarray]) -> None:
        """Reservoir sampling: a uniform choice of the graph's runs so far, in bounded memory and
        without aliasing the runs' periodic structure (the predictor's 16 steps per frame)."""
        assert self.recorded is not None
        seen = self._seen[name] = self._seen.get(name, 0) + 1
        size = sum(feeds[n].nbytes for n in self.inputs[name])
        cap = max(1, min(self._cap, RECORD_BUDGET_BYTES // max(1, size)))
        runs = self.recorded.setdefault(name, [])
        slot = len(runs) if len(runs) < cap else int(self._rng.integers(0, seen))
        if slot < cap:
            sample = [np.array(feeds[n], copy=True) for n in self.inputs[name]]
            if slot == len(runs):
                runs.append(sample)
            else:
                runs[slot] = sample

    def _run(self, name: str, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        if self.recorded is not None:
            self._record(name, feeds)
        out: list[np.ndarray] = self.s[name].run(None, feeds)
        return out

    def _body(self, name: str, s: Qwen3Shape, kv: list[np.ndarray], hidden: np.ndarray, start: int,
              n_valid: int) -> np.ndarray:
        """Run a body over positions [start, start + n); write new keys/values into their slots."""
        n = hidden.shape[1]
        slots = kv[0].shape[-1]
        mask = np.full((1, 1, n, slots + n), MASK_VALUE, np.float32)
        mask[..., :start] = 0.0
        for i in range(n):
            mask[0, 0, i, slots:slots + i + 1] = 0.0
        feeds = {"hidden": hidden, "position_ids": np.arange(start, start + n, dtype=np.int64)[None],
                 "attention_mask": mask}
        for i in range(s.layers):
            feeds[f"past_key_{i}"], feeds[f"past_value_{i}"] = kv[i], kv[s.layers + i]
        out = self._run(name, feeds)
        for i in range(s.layers):
            kv[i][..., start:start + n_valid] = out[1 + i][0].transpose(0, 2, 1)[None, :, :, :n_valid]
            kv[s.layers + i][:, :, start:start + n_valid] = out[1 + s.layers + i][:, :, :n_valid]
        hidden_out: np.ndarray = out[0]
        return hidden_out

    def _empty(self, s: Qwen3Shape, slots: int) -> list[np.ndarray]:
        return ([np.zeros((1, s.kv_heads, s.head_dim, slots), np.float32) for _ in range(s.layers)]
                + [np.zeros((1, s.kv_heads, slots, s.head_dim), np.float32) for _ in range(s.layers)])

    def codes(self, text_ids: list[int], max_frames: int, forced: np.ndarray | None = None) -> np.ndarray:
        """Greedy codes [T, 16] (T <= max_frames: codebook 0 may end speech). With `forced`
        [T, 16], teacher forcing: each frame's prediction is made from the forced codes before
        it (its codebook 0 and earlier codebooks included), and all T predictions are returned."""
        m, ids, C = self.model, self.model.ids, self.opts.prefill_chunk
        kv = self._empty(self.talker_s, self.cache)
        rows = m.prompt.rows(text_ids)
        frames_needed = max_frames if forced is None else len(forced)
        if len(rows) + frames_needed > self.cache:
            raise ValueError(f"the prompt ({len(rows)} positions) and {frames_needed} frames do not fit the talker "
                             f"bucket of {self.cache}")
        frame_texts = m.prompt.frame_inputs(text_ids, frames_needed)
        pos = 0
        hidden_last = None
        for start in range(0, len(rows), C):
            n_valid = min(C, len(rows) - start)
            text = np.zeros((1, C), np.int64)
            codes = np.zeros((1, C, CODE_GROUPS), np.int64)
            for i, (text_id, codec_id) in enumerate(rows[start:start + n_valid]):
                text[0, i] = text_id
                codes[0, i] = [ids.vocab if codec_id == ABSENT else codec_id] + [ids.codebook_size] * (CODE_GROUPS - 1)
            emb = self._run(f"talker_embed_n{C}", {"text_ids": text, "codes": codes})[0]
            h = self._body(f"talker_prefill_s{self.cache}", self.talker_s, kv, emb, pos, n_valid)
            hidden_last = h[:, n_valid - 1:n_valid]
            pos += n_valid
        frames: list[list[int]] = []
        history: set[int] = set()  # codebook-0 codes said so far (forced ones when forcing)
        penalty = validation_sampling(m).repetition_penalty
        for t in range(frames_needed):
            assert hidden_last is not None
            normed, logits = self._run("talker_head", {"hidden": hidden_last})
            logits = penalized(torch.from_numpy(logits[0, 0].copy()), history, penalty).numpy()
            logits[suppressed(ids, t, m.min_frames).numpy()] = -np.inf
            c0 = int(np.argmax(logits))
            if c0 == ids.eos and forced is None:
                break
            truth = None if forced is None else [int(c) for c in forced[t]]
            frame = [c0, *self._predict(normed, c0 if truth is None else truth[0], truth)]
            frames.append(frame)
            history.add(c0 if truth is None else truth[0])
            emb = self._run("talker_embed_n1", {"text_ids": np.array([[frame_texts[t]]], np.int64),
                                                "codes": np.array([[truth or frame]], np.int64)})[0]
            hidden_last = self._body(f"talker_decode_s{self.cache}", self.talker_s, kv, emb, pos, 1)
            pos += 1
        return np.array(frames, np.int64).reshape(-1, CODE_GROUPS)

    def _predict(self, normed: np.ndarray, c0: int, truth: list[int] | None = None) -> list[int]:
        """Codebooks 1..15 of a frame; with `truth` (the frame's 16 forced codes) each codebook
        is fed the forced code before it instead of the predicted one."""
        kv = self._empty(self.pred_s, PREDICTOR_SLOTS)
        body = f"predictor_decode_s{PREDICTOR_SLOTS}"
        self._body(body, self.pred_s, kv, normed, 0, 1)
        hidden = self._run("predictor_embed_n1", {"input_ids": np.array([[c0]], np.int64)})[0]
        codes: list[int] = []
        for g in range(1, CODE_GROUPS):
            h = self._body(body, self.pred_s, kv, hidden, g, 1)
            logits = self._run("predictor_head", {"hidden": h})[0][0, g - 1]
            code = int(np.argmax(logits))
            codes.append(code)
            if g < CODE_GROUPS - 1:
                row = predictor_id(self.model, g, code if truth is None else truth[g])
                hidden = self._run("predictor_embed_n1", {"input_ids": np.array([[row]], np.int64)})[0]
        return codes

    @torch.no_grad()
    def window_sqnr(self) -> dict[str, float]:
        """Every vocoder window graph on random codes against PyTorch, so the windows a short
        validation stream never reaches (an adaptive schedule's larger ones) are checked too."""
        generator = torch.Generator().manual_seed(0)
        out: dict[str, float] = {}
        for w in self.opts.stream.windows:
            codes = torch.randint(0, self.model.ids.codebook_size, (1, CODE_GROUPS, w), generator=generator)
            ref = VocoderGraph(self.model, w).eval()(codes)[0, 0].numpy()
            got = self._run(f"vocoder_w{w}", {"codes": codes.numpy()})[0][0, 0]
            out[f"graph_sqnr_db.vocoder_w{w}"] = round(sqnr_db(ref, got), 2)
        return out

    def pcm(self, codes: np.ndarray) -> list[np.ndarray]:
        """The streamed chunks of `codes`, each decoded in the smallest window it fits (as the
        controller picks it)."""
        shape, tail = self.opts.stream, self.model.tail_samples
        chunks = []
        for start, end, final in shape.chunks(codes.shape[0]):
            ctx, a, b = shape.emitted(start, end, tail, final)
            w = min(w for w in shape.windows if w >= ctx + end - start + 1)
            window = np.zeros((1, CODE_GROUPS, w), np.int64)
            window[0, :, :end - start + ctx] = codes[start - ctx:end].T
            chunks.append(self._run(f"vocoder_w{w}", {"codes": window})[0][0, 0, a:b])
        return chunks


def _compare(model: Qwen3Tts, got: np.ndarray, ref: np.ndarray, agreement: Agreement, pcm: np.ndarray,
             opts: TtsExportOptions, ends: list[int] | None = None) -> dict[str, float]:
    """Codes `got` against the reference's `ref` (`agreement`: by the near-tie rule of
    `comparison`); `pcm` (streamed from `got`, in the chunks ending at `ends` or the ones the
    stream shape cuts) against the PyTorch streaming decode of the same codes and chunks."""
    n = min(len(got), len(ref))
    agree = float((got[:n] == ref[:n]).all(axis=1).mean()) if n else 0.0
    codes = torch.from_numpy(got)
    ref_pcm = torch.cat(decode_streaming(model, codes, opts.stream, ends)).numpy() if len(got) else pcm
    err = pcm - ref_pcm if pcm.shape == ref_pcm.shape else np.full(1, np.inf, np.float32)
    return {"frames": float(len(got)), "reference_frames": float(len(ref)), "frame_agreement": agree,
            "codes_agree_to_near_tie": float(agreement.passed), "codes_verified": float(agreement.checked),
            "pcm_sqnr_db": sqnr_db(ref_pcm, pcm) if pcm.shape == ref_pcm.shape else -math.inf,
            "pcm_max_abs_diff": float(np.abs(err).max()),
            "samples_match": float(pcm.shape[0] == got.shape[0] * SAMPLES_PER_FRAME)}


def _reference_codes(model: Qwen3Tts, text_ids: list[int], got: np.ndarray, frames: int,
                     expected: np.ndarray | None = None) -> tuple[Agreement, np.ndarray]:
    """The validation run's codes `got` against the PyTorch reference (greedy, as validation
    decodes), by the near-tie rule for fp32 graphs."""
    greedy = validation_sampling(model)
    return compare_codes(lambda trace: generate_codes(model, text_ids, frames, greedy, trace), got, frames,
                         model.ids.eos, FP32_TIE_GAP, expected)


def forced_agreement(runner: GraphRunner, text_ids: list[int], ref: np.ndarray) -> dict[str, float]:
    """Teacher-forced agreement of `runner`'s graphs with the reference codes `ref` [T, 16]."""
    if not len(ref):
        return {k: 0.0 for k in FORCED_AGREEMENTS}
    pred = runner.codes(text_ids, 0, forced=ref)
    return {"forced_codebook0_agreement": float((pred[:, 0] == ref[:, 0]).mean()),
            "forced_predictor_agreement": float((pred[:, 1:] == ref[:, 1:]).mean())}


def validate_graphs(model: Qwen3Tts, directory: Path, files: dict[str, str], opts: TtsExportOptions,
                    text_ids: list[int]) -> dict[str, float]:
    """Greedy codes of `validation_frames` frames through the ONNX graphs (driven from Python)
    vs PyTorch, and the streamed PCM of those codes."""
    runner = GraphRunner(model, directory, files, opts)
    got = runner.codes(text_ids, opts.validation_frames)
    agreement, ref = _reference_codes(model, text_ids, got, opts.validation_frames)
    pcm = np.concatenate(runner.pcm(got)) if len(got) else np.zeros(0, np.float32)
    return {**_compare(model, got, ref, agreement, pcm, opts), **runner.window_sqnr()}


def validate_native(model: Qwen3Tts, plan: Path, opts: TtsExportOptions, text_ids: list[int],
                    reference: np.ndarray | None = None) -> dict[str, float]:
    """The same checks through the native speech chain on `plan` (its artifact's manifest may
    not be qualified yet), against `reference` codes (PyTorch's greedy codes by default)."""
    from omni_edge.runtime import SpeechSession

    session = SpeechSession.open(plan, allow_unqualified=True, threads=opts.threads)
    greedy = validation_sampling(model)
    utterance = session.speak(text_ids=text_ids, max_frames=opts.validation_frames, sampling=greedy)
    got = np.array(session.codes(), np.int64).reshape(-1, CODE_GROUPS)
    agreement, ref = _reference_codes(model, text_ids, got, opts.validation_frames, reference)
    ends = [int(e["frames_final"]) for e in utterance.events if e["kind"] == "pcm"]  # where its schedule cut
    return _compare(model, got, ref, agreement, utterance.pcm, opts, ends)


# Limits of the fp32 graphs against PyTorch: the greedy codes are PyTorch's up to near ties
# (`comparison`: equal until a near tie, then each code within the tie gap of PyTorch's best
# along the run's own path); PCM equal to float32 rounding (measured 126 dB, max 3e-7 on the
# tiny checkpoint).
LIMITS = {"codes_agree_to_near_tie": 1.0, "pcm_sqnr_db": 80.0, "pcm_max_abs_diff": 1e-4, "graph_sqnr_db": 80.0}
# int8 / int4 weights on the CPU: like the NPU's quantized precisions, the free run is not held to
# the reference (a random talker's logits are close; one flipped code changes every later one);
# the teacher-forced agreements say whether the quantized talker and predictor compute the same
# function, and the vocoder (float32) keeps the PCM exact for the codes it is given.
SPEECH_CPU_LIMITS: dict[str, dict[str, float]] = {
    "int8": {"forced_codebook0_agreement": 0.8, "forced_predictor_agreement": 0.8,
             "graph_sqnr_db": 80.0, "pcm_sqnr_db": 80.0, "pcm_max_abs_diff": 1e-4},
    "int4": {"forced_codebook0_agreement": 0.5, "forced_predictor_agreement": 0.5,
             "graph_sqnr_db": 80.0, "pcm_sqnr_db": 80.0, "pcm_max_abs_diff": 1e-4},
}
QUANTIZED_GRAPHS = ("talker_prefill", "talker_decode", "talker_head", "predictor_decode", "predictor_head")
# Teacher-forced agreement with the reference codes: codebook 0 (the talker) and codebooks 1..15
# (the code predictor), each predicted from the reference's codes before it.
FORCED_AGREEMENTS = ("forced_codebook0_agreement", "forced_predictor_agreement")
VALIDATION_TEXT = "Hello from the speech pipeline."


def validation_ids(model: Qwen3Tts) -> list[int]:
    """The validation sentence in the checkpoint's tokens."""
    ids: list[int] = model.tokenizer.encode(VALIDATION_TEXT).ids
    return ids


def validation_sampling(model: Qwen3Tts) -> Sampling:
    """What validation decodes with: greedy, with the checkpoint's repetition penalty (so that a
    release's codes are the ones its greedy generate() makes)."""
    return Sampling(repetition_penalty=model.sampling.repetition_penalty)


def speech_component(directory: Path, model: Qwen3Tts, checkpoint: Path, extra: tuple[Path, ...] = ()) -> Path:
    """`new_component` for a speech checkpoint, with its text tokenizer as tokenizer.json (a
    release's is converted from vocab.json + merges.txt)."""
    out = new_component(directory, checkpoint, extra, required=("config.json",))
    if not (out / "tokenizer.json").is_file():
        model.tokenizer.save(str(out / "tokenizer.json"))
    return out


def reports(identity: dict[str, str], got: dict[str, float] | None,
             limits: dict[str, float] = LIMITS) -> tuple[ValidationReport, ValidationReport]:
    """The numerical report (PCM, and each graph's SQNR where measured) and the task report
    (codes: the free run against the reference where `limits` holds it, and the teacher-forced
    agreements where measured)."""
    def report(kind: str, checks: tuple[ReportCheck, ...]) -> ValidationReport:
        return ValidationReport(kind, identity["checkpoint_id"], identity["checkpoint_revision"], identity["precision"],
                                identity["shape_bucket"], identity["target_abi"], checks)

    if got is None:  # --no-validate: reports that say so and fail
        skipped = (ReportCheck("validation_run", 0.0, 1.0, ">="),)
        return report("numerical", skipped), report("task", skipped)
    graphs = tuple(ReportCheck(k, v, limits["graph_sqnr_db"], ">=") for k, v in sorted(got.items())
                   if k.startswith("graph_sqnr_db."))
    forced = tuple(ReportCheck(k, got[k], limits[k], ">=") for k in FORCED_AGREEMENTS if k in got)
    numerical = report("numerical", (
        ReportCheck("pcm_sqnr_db", got["pcm_sqnr_db"], limits["pcm_sqnr_db"], ">="),
        ReportCheck("pcm_max_abs_diff", got["pcm_max_abs_diff"], limits["pcm_max_abs_diff"], "<="), *graphs))
    # The free run is held to the reference only where the limits say so (fp32); the share of
    # frames equal and the decisions verified are reported beside it.
    free = ((ReportCheck("codes_agree_to_near_tie", got["codes_agree_to_near_tie"], limits["codes_agree_to_near_tie"], ">="),
             ReportCheck("codes_verified", got["codes_verified"], 0.0, ">="),
             ReportCheck("frame_agreement", got["frame_agreement"], 0.0, ">="))
            if "codes_agree_to_near_tie" in limits else ())
    task = report("task", (*free, ReportCheck("samples_exact", got["samples_match"], 1.0, ">="), *forced))
    return numerical, task


def _decoder(s: Qwen3Shape, vocab: int, chunk: int, buckets: list[int]) -> dict[str, Any]:
    return {"hidden_size": s.hidden, "num_layers": s.layers, "num_kv_heads": s.kv_heads, "head_dim": s.head_dim,
            "vocab_size": vocab, "prefill_chunk": chunk, "mask_value": MASK_VALUE,
            "kv": {"mode": "full", "buckets": buckets, "overflow": "refuse"}}


def speech_plan(model: Qwen3Tts, component: str, files: dict[str, Any], opts: TtsExportOptions,
                backend: str = "onnxruntime", device: str = "cpu", devices: dict[str, str] | None = None) -> dict[str, Any]:
    """The two-stage plan: talker (with its code predictor) -> vocoder, in the Omni stage
    vocabulary; `files` maps each graph name to its plan reference (a file, or file + method).
    Every graph group runs on `device` but those `devices` names (group role -> device)."""
    C, buckets, windows = opts.prefill_chunk, sorted(set(opts.buckets)), opts.stream.windows

    def group(graphs: dict[str, Any], role: str) -> dict[str, Any]:
        return {"backend": backend, "device": (devices or {}).get(role, device), "graphs": graphs}

    ids, s, sampling = model.ids, opts.stream, model.sampling
    talker = {
        "stage_id": 0, "model_stage": "talker", "execution_type": "llm_ar", "input_sources": [],
        "engine_output_type": "codes", "artifact": component,
        "talker": {"tokenizer": "tokenizer.json", "text_pad_id": model.text_pad_id, "code_groups": CODE_GROUPS,
                   "codebook_size": ids.codebook_size, "codec_ids": {"pad": ids.pad, "bos": ids.bos, "eos": ids.eos},
                   "max_frames": 1500, "min_frames": model.min_frames, "prompt": model.prompt.to_json(),
                   "sampling": sampling.to_json(),
                   "decoder": _decoder(_shape(model.talker.model.config), ids.vocab, C, buckets),
                   "predictor": _decoder(_shape(model.talker.code_predictor.config), ids.codebook_size, 1,
                                         [PREDICTOR_SLOTS])},
        "graphs": {
            "embed": group({"chunk": files[f"talker_embed_n{C}"], "step": files["talker_embed_n1"]}, "embed"),
            "prefill": group({str(b): files[f"talker_prefill_s{b}"] for b in buckets}, "prefill"),
            "decode": group({str(b): files[f"talker_decode_s{b}"] for b in buckets}, "decode"),
            "embed_hidden": group({"step": files["talker_embed_hidden_n1"]}, "embed_hidden"),
            "head": group({"step": files["talker_head"]}, "head"),
            "predictor_embed": group({"step": files["predictor_embed_n1"]}, "predictor_embed"),
            "predictor_decode": group({str(PREDICTOR_SLOTS): files[f"predictor_decode_s{PREDICTOR_SLOTS}"]}, "predictor_decode"),
            "predictor_head": group({"step": files["predictor_head"]}, "predictor_head"),
        },
    }
    vocoder = {
        "stage_id": 1, "model_stage": "code2wav", "execution_type": "llm_generation", "input_sources": [0],
        "final_output": True, "final_output_type": "audio", "engine_output_type": "audio", "artifact": component,
        "vocoder": {"code_groups": CODE_GROUPS, "samples_per_frame": SAMPLES_PER_FRAME, "sample_rate": SAMPLE_RATE,
                    "tail_samples": model.tail_samples, "first_chunk": s.first, "chunk": s.chunk,
                    "left_context": s.left_context, "windows": list(windows), "pcm_dtype": "float32",
                    "schedule": s.schedule()},
        "graphs": {"vocoder": group({str(w): files[f"vocoder_w{w}"] for w in windows}, "vocoder")},
    }
    return {"plan_version": 1, "name": f"speech ({component})", "stages": [talker, vocoder],
            "stream_limits": {"max_events": 64, "max_bytes": 16 << 20}}


def _runtime(fmt: str) -> tuple[str, str]:
    name = "onnxruntime" if fmt == "onnx" else "executorch"
    return name, importlib.metadata.version(name)


def export_tts(checkpoint: Path, out: Path, opts: TtsExportOptions) -> list[tuple[Path, dict[str, float]]]:
    """Per format a speech component `speech-<fmt>/` (graphs, tokenizer, config, manifest v2 with
    the validation reports) and OUT/plan.<fmt>.json; OUT/plan.json is the first format's plan.
    Returns each component with its validation numbers (empty when validation is off)."""
    check_options(opts)
    model = Qwen3Tts.from_pretrained(checkpoint, opts.voice)
    if not opts.formats or any(f not in ("onnx", "pte") for f in opts.formats):
        raise ValueError(f"formats: onnx and/or pte, got {', '.join(opts.formats) or 'none'}")
    text = validation_ids(model)
    quantized = opts.precision != "fp32"
    identity = dict(checkpoint_id=checkpoint.name, checkpoint_revision="local",
                    precision=f"{opts.precision}-b{opts.block_size}" if quantized else "fp32",
                    shape_bucket=f"ctx{'-'.join(map(str, sorted(opts.buckets)))}-n{opts.prefill_chunk}"
                                 f"-w{opts.stream.window}", target_abi="x86_64-linux")
    s = opts.stream
    speech_metadata = {"code_groups": CODE_GROUPS, "codebook_size": model.ids.codebook_size,
                       "voice": dataclasses.asdict(opts.voice), "prompt": model.prompt.to_json(),
                       "codec_ids": {"pad": model.ids.pad, "bos": model.ids.bos, "eos": model.ids.eos},
                       "samples_per_frame": SAMPLES_PER_FRAME, "sample_rate": SAMPLE_RATE,
                       "tail_samples": model.tail_samples, "mask_value": MASK_VALUE,
                       "stream": {"first": s.first, "chunk": s.chunk, "left_context": s.left_context,
                                  "window": s.window, "windows": list(s.windows), "schedule": s.schedule()}}
    results: list[tuple[Path, dict[str, float]]] = []
    suffix = f"-{opts.precision}" if quantized else ""
    for fmt in opts.formats:
        component = speech_component(out / f"speech-{fmt}{suffix}", model, checkpoint)
        backend, version = _runtime(fmt)
        if fmt == "onnx":
            files = export_graphs(model, component, opts)
            refs: dict[str, Any] = dict(files)
        else:
            files = export_program(model, component, opts)
            refs = {name: {"file": "model.pte", "method": method} for name, method in files.items()}
        plan_path = out / f"plan.{fmt}{suffix}.json"
        write_text_atomic(plan_path, json.dumps(speech_plan(model, component.name, refs, opts, backend), indent=2) + "\n")

        def manifest(got: dict[str, float] | None, fmt: str = fmt, component: Path = component,
                     files: dict[str, str] = files, backend: str = backend, version: str = version) -> None:
            numerical, task = reports(identity, got, SPEECH_CPU_LIMITS[opts.precision] if quantized else LIMITS)
            write_report(component / "reports" / "numerical.json", numerical)
            write_report(component / "reports" / "task.json", task)
            write_manifest(component, component.name, ArtifactMetadata(
                **identity, runtime=backend, runtime_version=version, adapter_version="1", exporter_version=__version__,
                compiler_version=f"torch-{torch.__version__}", state_layout_version=1,
                numerical_validation=ValidationRef("reports/numerical.json", numerical.passed),
                task_validation=ValidationRef("reports/task.json", task.passed)),
                extra_metadata={"speech": {**speech_metadata, "graphs": files, "format": fmt,
                                           "validation": got or {}, **_quantization(opts)}})

        got = None
        if opts.validate and quantized:
            manifest(None)  # the native chain verifies the artifact before it runs it
            got = validate_quantized(model, plan_path, component, files, opts, text)
        elif opts.validate and fmt == "onnx":
            got = validate_graphs(model, component, files, opts, text)
        elif opts.validate:
            manifest(None)  # the native chain verifies the artifact before it runs it
            got = validate_native(model, plan_path, opts, text)
        manifest(got)
        results.append((component, got or {}))
    shutil.copy2(out / f"plan.{opts.formats[0]}{suffix}.json", out / "plan.json")
    return results


def _quantization(opts: TtsExportOptions) -> dict[str, Any]:
    from omni_edge.export.cpu_quant import manifest_block

    return manifest_block(opts.precision, opts.block_size,
                          "talker and code predictor bodies and heads (embeddings and vocoder float32)")


def validate_quantized(model: Qwen3Tts, plan: Path, directory: Path, files: dict[str, str], opts: TtsExportOptions,
                       text_ids: list[int]) -> dict[str, float]:
    """The native speech chain's free run against PyTorch (its agreement reported, not held) and
    its PCM, each vocoder window, and the teacher-forced agreements of the quantized graphs with
    PyTorch's greedy codes."""
    runner = GraphRunner(model, directory, files, opts)
    reference = generate_codes(model, text_ids, opts.validation_frames, validation_sampling(model)).numpy()
    got = validate_native(model, plan, opts, text_ids, reference)
    return {**got, **runner.window_sqnr(), **forced_agreement(runner, text_ids, reference)}
