"""The exported speech graphs driven as the controller drives them, in Python: the reference
route of the graphs (validation, QNN calibration and its per-graph checks)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from omni_edge.export.comparison import sqnr_db
from omni_edge.export.decoder.graphs import DecoderShape
from omni_edge.export.models.qwen3_tts.graphs import (
    MASK_VALUE,
    PREDICTOR_SLOTS,
    VocoderGraph,
    predictor_id,
    talker_shape,
)
from omni_edge.export.models.qwen3_tts.reference import (
    ABSENT,
    CODE_GROUPS,
    SAMPLES_PER_FRAME,
    Qwen3Tts,
    Sampling,
    penalized,
    suppressed,
)
from omni_edge.export.options import TtsExportOptions

RECORD_BUDGET_BYTES = 256 << 20  # calibration: recorded inputs kept per graph while one sentence runs


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
        self.talker_s = talker_shape(model.talker.model.config)
        self.pred_s = talker_shape(model.talker.code_predictor.config)

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

    def _body(self, name: str, s: DecoderShape, kv: list[np.ndarray], hidden: np.ndarray, start: int,
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

    def _empty(self, s: DecoderShape, slots: int) -> list[np.ndarray]:
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
            ctx, a, b = shape.emitted(start, end, tail, final, SAMPLES_PER_FRAME)
            w = min(w for w in shape.windows if w >= ctx + end - start + 1)
            window = np.zeros((1, CODE_GROUPS, w), np.int64)
            window[0, :, :end - start + ctx] = codes[start - ctx:end].T
            chunks.append(self._run(f"vocoder_w{w}", {"codes": window})[0][0, 0, a:b])
        return chunks


VALIDATION_TEXT = "Hello from the speech pipeline."


def validation_ids(model: Qwen3Tts) -> list[int]:
    """The validation sentence in the checkpoint's tokens."""
    ids: list[int] = model.tokenizer.encode(VALIDATION_TEXT).ids
    return ids


def validation_sampling(model: Qwen3Tts) -> Sampling:
    """What validation decodes with: greedy, with the checkpoint's repetition penalty (so that a
    release's codes are the ones its greedy generate() makes)."""
    return Sampling(repetition_penalty=model.sampling.repetition_penalty)
