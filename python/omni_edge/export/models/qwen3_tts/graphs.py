"""The speech stages of a Qwen3-TTS-shaped checkpoint as static-shape graphs (torch modules that
the ONNX, ExecuTorch and QNN routes export alike).

Talker and code predictor are Qwen3 decoders: their bodies are the same graphs as the text
LLM's (`decoder.graphs.BodyGraph`: explicit KV cache in, new keys/values out, additive mask), so the
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

from typing import Any

import torch
from torch import nn

from omni_edge.export.decoder.graphs import BodyGraph, DecoderShape, RMSNorm, body_example, body_io_names
from omni_edge.export.models.qwen3_tts.codec import Qwen3TtsCodecDecoder
from omni_edge.export.models.qwen3_tts.reference import (
    CODE_GROUPS,
    Qwen3Tts,
)
from omni_edge.export.options import TtsExportOptions

MASK_VALUE = -100.0  # finite, survives 16-bit quantization (DESIGN.md)


PREDICTOR_SLOTS = CODE_GROUPS  # talker hidden + codes 0..14 are attended when predicting code 15


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
    def __init__(self, model: Qwen3Tts, s: DecoderShape, reduce: str = "mean") -> None:
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
    def __init__(self, model: Qwen3Tts, s: DecoderShape, reduce: str = "mean") -> None:
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


def talker_shape(config: Any) -> DecoderShape:
    return DecoderShape.from_config(config)


Job = tuple[str, nn.Module, tuple[torch.Tensor, ...], list[str], list[str]]


def graph_jobs(model: Qwen3Tts, opts: TtsExportOptions, reduce: str = "mean") -> list[Job]:
    """Every graph of the speech stages: (name, module, example inputs, input names, output
    names). `reduce="matmul"` writes the RMSNorms as XNNPACK runs them (ExecuTorch)."""
    talker_s, pred_s = talker_shape(model.talker.model.config), talker_shape(model.talker.code_predictor.config)
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
