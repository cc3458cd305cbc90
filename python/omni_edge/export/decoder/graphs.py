"""A decoder-only transformer (Qwen3's layout: the text LLM, the speech talker and code
predictor, the omni thinker) as per-stage graphs with static shapes, built from a transformers
model's weights.

Stages: embedding (ids -> hidden), body (hidden -> hidden, all decoder layers) and LM head
(final norm + lm_head, one position). The body reads the KV cache as explicit inputs, keys
transposed `past_key_i` [1, kv_heads, head_dim, S] and values `past_value_i` [1, kv_heads, S,
head_dim], so both attention products are plain batched matmuls over the cache as it lies (no
runtime transposes or copies it); it returns only the keys/values of its N new tokens
[1, kv_heads, N, head_dim], which the runtime writes into their slots in place. Attention is
split into a past part and a current part whose scores share one softmax, with an additive
mask [1, 1, N, S + N] that the runtime builds (finite negative values only). RoPE positions
are absolute inputs, so a ring of width W gives exactly the model's sliding-window attention
of width W.

`FusedBodyGraph` is the CPU form for ONNX Runtime: its fused GroupQueryAttention reads the valid
slots only (the valid length is an input, not a mask), over keys and values both
[1, kv_heads, S, head_dim], and writes the new entries into the cache it is given as both past
input and present output.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from omni_edge.export.decoder.linear_attention import GatedDeltaNetLayer, LinearShape


@dataclass(frozen=True)
class DecoderShape:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    rope_theta: float
    eps: float
    sliding_window: int | None
    # Multimodal RoPE (Qwen2-VL / Qwen2.5-Omni): how many of the head's rotary frequencies follow
    # each of the three position rows (temporal, height, width); empty for plain RoPE.
    mrope_section: tuple[int, ...] = ()
    # Scaled RoPE (Llama 3.x, linear, YaRN): the inverse frequencies transformers computes for the
    # checkpoint, and the factor its cos/sin are multiplied by; empty and 1.0 for plain RoPE.
    rope_inv_freq: tuple[float, ...] = ()
    rope_scale: float = 1.0
    # Hybrid checkpoints (Qwen3.5): which layers are Gated DeltaNet ("linear") and which attend
    # ("attention"), empty when all attend; the linear layers' geometry; attention whose output is
    # gated by a sigmoid of a second query projection; RoPE over the first `rotary_dim` dims of a
    # head only (0: all); RMSNorm weights stored zero-centred (the norm multiplies by 1 + w).
    layer_kinds: tuple[str, ...] = ()
    linear: LinearShape | None = None
    gated_attention: bool = False
    rotary_dim: int = 0
    norm_offset: float = 0.0
    # M-RoPE of Qwen3.5 (Qwen3-VL): the rows interleave over the frequencies (T H W T H W ...:
    # frequency i follows H when i % 3 == 1 and i < 3 * section[1], W likewise for 2, else T)
    # instead of each row taking one contiguous block.
    mrope_interleaved: bool = False

    @property
    def attention_layers(self) -> int:
        """Layers with a KV cache."""
        return self.layers - self.linear_layers

    @property
    def linear_layers(self) -> int:
        """Layers with a conv and a recurrent state instead."""
        return sum(kind == "linear" for kind in self.layer_kinds)

    @property
    def rotated(self) -> int:
        return self.rotary_dim or self.head_dim

    @classmethod
    def from_config(cls, config: Any) -> DecoderShape:
        config = config.get_text_config() if hasattr(config, "get_text_config") else config
        rope = getattr(config, "rope_parameters", None) or {}
        theta = float(rope.get("rope_theta", getattr(config, "rope_theta", 10000.0)))
        layer_types = getattr(config, "layer_types", None) or ["full_attention"] * config.num_hidden_layers
        if "linear_attention" in layer_types:
            return _hybrid_shape(config, layer_types, theta)
        sliding = {t == "sliding_attention" for t in layer_types}
        if sliding == {True, False}:
            raise ValueError("checkpoints mixing sliding and full attention layers are not supported yet")
        activation = getattr(config, "hidden_act", "silu")
        if activation != "silu":
            raise ValueError(f"MLP activation {activation!r} is not supported (silu)")
        window = config.sliding_window if sliding == {True} else None
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        mrope = tuple(int(n) for n in rope.get("mrope_section") or ())
        if mrope and 2 * sum(mrope) != head_dim:
            raise ValueError(f"mrope_section {list(mrope)} does not cover half the head dim {head_dim}")
        inv_freq, scale = _scaled_rope(config, str(rope.get("rope_type", "default")))
        return cls(config.hidden_size, config.num_hidden_layers, config.num_attention_heads, config.num_key_value_heads,
                   head_dim, config.vocab_size, theta, config.rms_norm_eps, window, mrope, inv_freq, scale)


def _hybrid_shape(config: Any, layer_types: list[str], theta: float) -> DecoderShape:
    """A Qwen3.5-style hybrid: Gated DeltaNet layers and gated attention layers with partial
    RoPE. Its M-RoPE rows are equal for text, so text positions rotate as plain RoPE (an image's
    rows, interleaved over the rotary dims, are not supported yet: refused where asked)."""
    unknown = set(layer_types) - {"linear_attention", "full_attention"}
    if unknown:
        raise ValueError(f"layer types {sorted(unknown)} are not supported in a hybrid (linear_attention, full_attention)")
    if getattr(config, "hidden_act", "silu") != "silu":
        raise ValueError(f"MLP activation {config.hidden_act!r} is not supported (silu)")
    rope = getattr(config, "rope_parameters", None) or {}
    if str(rope.get("rope_type", "default")) != "default":
        raise ValueError(f"RoPE type {rope.get('rope_type')!r} is not supported in a hybrid (default)")
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    rotary = int(head_dim * float(rope.get("partial_rotary_factor", 1.0)))
    kinds = tuple("linear" if t == "linear_attention" else "attention" for t in layer_types)
    return DecoderShape(config.hidden_size, config.num_hidden_layers, config.num_attention_heads,
                        config.num_key_value_heads, head_dim, config.vocab_size, theta, config.rms_norm_eps, None,
                        layer_kinds=kinds, linear=LinearShape.from_config(config), gated_attention=True,
                        rotary_dim=rotary, norm_offset=1.0)


# RoPE variants whose frequencies do not depend on the sequence length: baked into the graphs.
STATIC_ROPE_SCALINGS = ("linear", "llama3", "yarn")


def _scaled_rope(config: Any, rope_type: str) -> tuple[tuple[float, ...], float]:
    """transformers' own inverse frequencies and cos/sin factor for a scaled RoPE; a RoPE that
    changes with the sequence length (dynamic NTK, LongRoPE) is refused by name."""
    if rope_type in ("default", "mrope"):
        return (), 1.0
    if rope_type not in STATIC_ROPE_SCALINGS:
        raise ValueError(f"RoPE type {rope_type!r} is not supported (plain, {', '.join(STATIC_ROPE_SCALINGS)}): "
                         "its frequencies change with the sequence length, which static graphs cannot follow")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    inv_freq, scale = ROPE_INIT_FUNCTIONS[rope_type](config)
    return tuple(float(f) for f in inv_freq.to(torch.float32)), float(scale)


class RMSNorm(nn.Module):
    mean_vector: torch.Tensor

    """`reduce="mean"` exports ReduceMean, which the HTP fuses into one norm op;
    `reduce="matmul"` computes the mean of squares as a product with a constant 1/n vector,
    which XNNPACK runs (it does not take a last-axis mean), keeping ExecuTorch bodies in one
    delegate instead of splitting them at every norm. `reduce="fused"` writes the pattern ONNX
    Runtime's CPU optimizer fuses into one SimplifiedLayerNormalization kernel (and, after a
    residual add, SkipSimplifiedLayerNormalization): x / sqrt(mean(x^2) + eps) * w.
    `reduce="scaled"` divides each row by its largest magnitude (at least 1) before squaring, the
    same value in real arithmetic: in fp16, a residual row of a real model (SmolLM2's reach |x|
    22,500 from layer 13 on) squares past 65,504, and the plain form then zeroes the row (measured
    on SmolLM2 in torch fp16: logits -0.2 dB; scaled: 49.8 dB, as with the norm in fp32)."""

    def __init__(self, weight: torch.Tensor, eps: float, reduce: str = "mean") -> None:
        super().__init__()
        self.weight = nn.Parameter(weight.detach().clone(), requires_grad=False)
        self.eps = eps
        self.reduce = reduce
        if reduce == "matmul":
            n = weight.shape[0]
            self.register_buffer("mean_vector", torch.full((n, 1), 1.0 / n), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.reduce == "fused":
            return self.weight * (x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))
        if self.reduce == "scaled":
            peak = torch.clamp(x.abs().amax(-1, keepdim=True), min=1.0)
            unit = x / peak
            return self.weight * (unit * torch.rsqrt((unit * unit).mean(-1, keepdim=True) + self.eps / (peak * peak)))
        squares = x * x
        variance = squares @ self.mean_vector if self.reduce == "matmul" else squares.mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


def _linear(*sources: nn.Linear) -> nn.Linear:
    """One projection computing the given ones side by side (fused QKV, fused gate/up)."""
    weight = torch.cat([src.weight.detach() for src in sources], dim=0)
    out = nn.Linear(weight.shape[1], weight.shape[0], bias=sources[0].bias is not None)
    out.weight = nn.Parameter(weight.clone(), requires_grad=False)
    if sources[0].bias is not None:
        out.bias = nn.Parameter(torch.cat([src.bias.detach() for src in sources]).clone(), requires_grad=False)
    return out


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE over the first cos.shape[-1] dims of the last axis (all of them unless partial)."""
    d = cos.shape[-1]
    if d == x.shape[-1]:
        return x * cos + rotate_half(x) * sin
    head = x[..., :d]
    return torch.cat((head * cos + rotate_half(head) * sin, x[..., d:]), dim=-1)


class _GroupQueryAttention(torch.autograd.Function):
    """ONNX Runtime's fused `com.microsoft.GroupQueryAttention` over a cache that is both its past
    input and its present output ([1, kv_heads, S, head_dim] each; the runtime binds one buffer to
    both, and the kernel writes the N new entries at slots [total - N, total) in place). It attends
    causally over the `total` valid slots only: the cost of a step follows the position, not the
    bucket. The attention scale is already folded into the queries (scale 1). With `cos`/`sin`
    tables ([S, D/2]) the kernel rotates q and k itself, at their slots' positions; with `k` and `v`
    None, `q` is the packed projection [q | k | v]. The forward is the same arithmetic in torch,
    for tracing."""

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor | None, v: torch.Tensor | None, past_k: torch.Tensor,
                past_v: torch.Tensor, seqlens_k: torch.Tensor, total: torch.Tensor, cos: torch.Tensor | None,
                sin: torch.Tensor | None, heads: int, kv_heads: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n, slots, d = q.shape[1], past_k.shape[2], past_k.shape[3]
        first = total.to(torch.int64).reshape(()) - n
        index = first + torch.arange(n)
        if k is None or v is None:
            q, k, v = q[..., :heads * d], q[..., heads * d:(heads + kv_heads) * d], q[..., (heads + kv_heads) * d:]
        if cos is not None and sin is not None:
            c, s_ = torch.cat((cos[index], cos[index]), -1)[None, :, None], torch.cat((sin[index], sin[index]), -1)[None, :, None]
            q = (q.reshape(1, n, heads, d) * c + rotate_half(q.reshape(1, n, heads, d)) * s_).reshape(1, n, heads * d)
            k = (k.reshape(1, n, kv_heads, d) * c + rotate_half(k.reshape(1, n, kv_heads, d)) * s_).reshape(1, n, -1)
        present_k = past_k.index_copy(2, index, k.reshape(1, n, kv_heads, d).transpose(1, 2))
        present_v = past_v.index_copy(2, index, v.reshape(1, n, kv_heads, d).transpose(1, 2))
        group = heads // kv_heads
        qg = q.reshape(n, kv_heads, group, d).permute(1, 2, 0, 3).reshape(kv_heads, group * n, d)
        scores = torch.bmm(qg, present_k[0].transpose(1, 2))                                   # [kv, G*N, S]
        visible = torch.arange(slots)[None, :] <= index[:, None]                                # [N, S]
        scores = scores.masked_fill(~visible.repeat(group, 1)[None], float("-inf"))
        out = torch.bmm(torch.softmax(scores, dim=-1), present_v[0])                           # [kv, G*N, D]
        return out.reshape(kv_heads, group, n, d).permute(2, 0, 1, 3).reshape(1, n, heads * d), present_k, present_v

    @staticmethod
    def symbolic(g: Any, q: Any, k: Any, v: Any, past_k: Any, past_v: Any, seqlens_k: Any, total: Any, cos: Any, sin: Any,
                 heads: int, kv_heads: int) -> Any:
        from torch.onnx.symbolic_helper import _is_none, _optional_input_placeholder_tensor

        k, v = (_optional_input_placeholder_tensor(g) if _is_none(x) else x for x in (k, v))  # type: ignore[no-untyped-call]
        rotary = not _is_none(cos)
        tables = (cos, sin) if rotary else ()
        out, present_k, present_v = g.op("com.microsoft::GroupQueryAttention", q, k, v, past_k, past_v, seqlens_k, total,
                                         *tables, num_heads_i=heads, kv_num_heads_i=kv_heads, scale_f=1.0,
                                         do_rotary_i=int(rotary), outputs=3)
        out.setType(q.type())
        present_k.setType(past_k.type())
        present_v.setType(past_v.type())
        return out, present_k, present_v


def _gqa(*args: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    result: tuple[torch.Tensor, torch.Tensor, torch.Tensor] = _GroupQueryAttention.apply(*args)  # type: ignore[no-untyped-call]
    return result


class DecoderLayer(nn.Module):
    def __init__(self, layer: Any, s: DecoderShape, reduce: str) -> None:
        super().__init__()
        att = layer.self_attn
        offset = s.norm_offset
        if s.gated_attention:  # q_proj rows per head: [query (D), gate (D)]; as [q | k | v | gate]
            rows = att.q_proj.weight.detach().reshape(s.heads, 2, s.head_dim, -1)
            self.qkv = nn.Linear(s.hidden, (2 * s.heads + 2 * s.kv_heads) * s.head_dim, bias=False)
            self.qkv.weight = nn.Parameter(torch.cat([rows[:, 0].reshape(-1, s.hidden), att.k_proj.weight.detach(),
                                                      att.v_proj.weight.detach(), rows[:, 1].reshape(-1, s.hidden)]),
                                           requires_grad=False)
            if att.q_proj.bias is not None:
                raise ValueError("gated attention with projection biases is not supported")
        else:
            self.qkv = _linear(att.q_proj, att.k_proj, att.v_proj)
        self.o_proj = _linear(att.o_proj)
        # The attention scale 1/sqrt(head_dim) is folded into q_norm's weight (RoPE is linear), or
        # into the query rows of the projection where there is no q_norm (Qwen2 layers).
        self.q_norm: RMSNorm | None = None
        self.k_norm: RMSNorm | None = None
        if getattr(att, "q_norm", None) is not None:
            self.q_norm = RMSNorm((att.q_norm.weight + offset) * s.head_dim ** -0.5, s.eps, reduce)
            self.k_norm = RMSNorm(att.k_norm.weight + offset, s.eps, reduce)
        else:
            rows = s.heads * s.head_dim
            self.qkv.weight.data[:rows] *= s.head_dim ** -0.5
            if self.qkv.bias is not None:
                self.qkv.bias.data[:rows] *= s.head_dim ** -0.5
        self.input_norm = RMSNorm(layer.input_layernorm.weight + offset, s.eps, reduce)
        self.post_norm = RMSNorm(layer.post_attention_layernorm.weight + offset, s.eps, reduce)
        mlp = layer.mlp
        self.gate_up, self.down = _linear(mlp.gate_proj, mlp.up_proj), _linear(mlp.down_proj)
        self.intermediate = mlp.gate_proj.out_features
        self.s = s

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor,
                past_k: torch.Tensor, past_v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """`mask` is already grouped: [1, G*N, S+N]."""
        s = self.s
        n = x.shape[1]
        group = s.heads // s.kv_heads
        kv, d = s.kv_heads, s.head_dim
        h = self.input_norm(x)
        qkv = self.qkv(h)  # static slices (not split): XNNPACK takes them without a copy op
        q, k = qkv[..., :s.heads * d], qkv[..., s.heads * d:(s.heads + kv) * d]
        v = qkv[..., (s.heads + kv) * d:(s.heads + 2 * kv) * d]
        q, k = q.view(1, n, s.heads, d), k.view(1, n, kv, d)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)                    # [1, Hq, N, D], [1, Hkv, N, D]
        v = v.view(1, n, kv, d).transpose(1, 2)
        q, k = _rotary(q, cos, sin), _rotary(k, cos, sin)
        # Query heads grouped under their KV head, batched over KV heads: [Hkv, G*N, D]; no KV
        # head is repeated and every product is a 3-D bmm over the cache as stored.
        past_len = past_v.shape[2]
        qg = q.reshape(kv, group * n, d)
        scores = torch.cat([torch.bmm(qg, past_k.reshape(kv, d, past_len)),
                            torch.bmm(qg, k.reshape(kv, n, d).transpose(1, 2))], dim=-1)       # [Hkv, G*N, S+N]
        probs = torch.softmax(scores + mask, dim=-1)
        out = (torch.bmm(probs[..., :past_len], past_v.reshape(kv, past_len, d))
               + torch.bmm(probs[..., past_len:], v.reshape(kv, n, d)))                        # [Hkv, G*N, D]
        out = out.reshape(1, s.heads, n, d).transpose(1, 2).reshape(1, n, s.heads * d)
        return self._mlp(x + self.o_proj(self._gated(out, qkv))), k, v

    def _gated(self, out: torch.Tensor, qkv: torch.Tensor) -> torch.Tensor:
        """Gated attention (Qwen3.5): the output scaled by the sigmoid of its gate projection."""
        if not self.s.gated_attention:
            return out
        return out * torch.sigmoid(qkv[..., (self.s.heads + 2 * self.s.kv_heads) * self.s.head_dim:])

    def forward_fused(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, seqlens_k: torch.Tensor,
                      total: torch.Tensor, past_k: torch.Tensor,
                      past_v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The same layer with ONNX Runtime's fused attention; cos/sin [1, 1, N, D]. Returns the
        hidden state and the present cache (the past with the N new entries in their slots)."""
        s = self.s
        n, kv, d = x.shape[1], s.kv_heads, s.head_dim
        qkv = self.qkv(self.input_norm(x))
        tables = (cos, sin) if cos.dim() == 2 else (None, None)  # [S, D/2] tables: the kernel rotates
        if self.q_norm is None and tables[0] is not None:  # nothing between the projection and the kernel
            out, present_k, present_v = _gqa(qkv, None, None, past_k, past_v, seqlens_k, total, *tables, s.heads, kv)
            return self._mlp(x + self.o_proj(out)), present_k, present_v
        q, k = qkv[..., :s.heads * d], qkv[..., s.heads * d:(s.heads + kv) * d]
        v = qkv[..., (s.heads + kv) * d:(s.heads + 2 * kv) * d]
        q, k = q.view(1, n, s.heads, d), k.view(1, n, kv, d)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if tables[0] is None:
            cos, sin = cos.transpose(1, 2), sin.transpose(1, 2)                   # [1, N, 1, D]: the heads' layout
            q, k = _rotary(q, cos, sin), _rotary(k, cos, sin)
        out, present_k, present_v = _gqa(q.reshape(1, n, s.heads * d), k.reshape(1, n, kv * d), v, past_k, past_v,
                                         seqlens_k, total, *tables, s.heads, kv)
        return self._mlp(x + self.o_proj(self._gated(out, qkv))), present_k, present_v

    def _mlp(self, x: torch.Tensor) -> torch.Tensor:
        h = self.post_norm(x)
        gate_up = self.gate_up(h)
        gate, up = gate_up[..., :self.intermediate], gate_up[..., self.intermediate:]
        out: torch.Tensor = x + self.down(torch.nn.functional.silu(gate) * up)
        return out


def tied_embeddings(model: Any) -> bool:
    return bool(model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr())


def head_weight(model: Any) -> torch.Tensor:
    """The LM head as [hidden, vocab]: a matrix-vector product streams it once, in order (the
    fastest decode head we measured); a tied embedding table is stored only in this layout."""
    weight: torch.Tensor = model.lm_head.weight.detach().t().contiguous()
    return weight


class EmbedGraph(nn.Module):
    """input_ids [1, N] int64 -> hidden [1, N, hidden]. With tied embeddings the rows are
    gathered from the columns of the LM head's [hidden, vocab] table, so one copy serves both."""

    def __init__(self, model: Any, rows: bool = False) -> None:
        """rows: gather rows of a [vocab, hidden] table even when tied (a quantized head reads its
        own blocks, so no copy is shared; a row is 4 KiB read in order, a column `hidden` cache lines)."""
        super().__init__()
        self.tied = tied_embeddings(model) and not rows
        table = head_weight(model) if self.tied else model.model.embed_tokens.weight.detach().clone()
        self.table = nn.Parameter(table, requires_grad=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        if self.tied:
            return self.table[:, input_ids[0]].t()[None]
        return torch.nn.functional.embedding(input_ids, self.table)


class BodyGraph(nn.Module):
    """(hidden, position_ids, attention_mask, past_key_i..., past_value_i...) -> (hidden, new_key_i..., new_value_i...)."""

    inv_freq: torch.Tensor
    rope_cos: torch.Tensor
    rope_sin: torch.Tensor
    mrope_rows: torch.Tensor

    def __init__(self, model: Any, s: DecoderShape, reduce: str = "mean", rope_table: int = 0,
                 htp: bool = False) -> None:
        """rope_table > 0: cos/sin come from tables of that many positions (a gather) instead of
        being computed from the position; a quantized graph then never quantizes an angle that
        grows with the position, and the values are the ones computed here in float32.
        htp: a hybrid's linear layers in the HTP's form (GatedDeltaNetLayer)."""
        super().__init__()
        self.s = s
        self.layers = nn.ModuleList(_layer(layer, s, reduce, kind, htp)
                                    for layer, kind in zip(model.model.layers, s.layer_kinds or ["attention"] * s.layers,
                                                               strict=True))
        r = s.rotated
        inv_freq = (torch.tensor(s.rope_inv_freq, dtype=torch.float32) if s.rope_inv_freq
                    else 1.0 / (s.rope_theta ** (torch.arange(0, r, 2, dtype=torch.float32) / r)))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        if s.mrope_section:
            # Which position row each rotary dim follows, as a one-hot [3, 1, 1, D] mask: a
            # product and a sum select it exactly (x * 1 + 0 + 0), with no gather over dims.
            row = _mrope_row_of_frequency(s.mrope_section, s.mrope_interleaved)
            rows = torch.nn.functional.one_hot(torch.cat((row, row)), 3).t().to(torch.float32)
            self.register_buffer("mrope_rows", rows[:, None, None, :].contiguous(), persistent=False)
        self.rope_table = rope_table
        if rope_table:
            emb = self._angles(torch.arange(rope_table, dtype=torch.int64)[None])[0, 0]  # [P, D]
            self.register_buffer("rope_cos", emb.cos() * s.rope_scale, persistent=False)
            self.register_buffer("rope_sin", emb.sin() * s.rope_scale, persistent=False)

    def _angles(self, position_ids: torch.Tensor) -> torch.Tensor:
        freqs = position_ids[..., None].to(torch.float32) * self.inv_freq       # [1, N, D/2]
        return torch.cat((freqs, freqs), dim=-1)[:, None]                        # [1, 1, N, D]

    def _mrope(self, per_row: torch.Tensor) -> torch.Tensor:
        """[3, 1, N, D] values of the three position rows -> [1, 1, N, D], each dim from its row."""
        return (per_row * self.mrope_rows).sum(0)[:, None]

    def forward(self, hidden: torch.Tensor, position_ids: torch.Tensor, attention_mask: torch.Tensor,
                *past: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """position_ids: [1, N], or [3, 1, N] (temporal, height, width) with M-RoPE. `past`: the
        keys and values of the attention layers, then a hybrid's conv and recurrent states, then
        (a hybrid's prefill chunk) the chunk's valid rows."""
        cos, sin = self._rope(position_ids)
        # [1, 1, N, S+N] -> [1, G*N, S+N], once per step; a reshape, not mask[0]: that Gather reads
        # the float input before it is quantized, which HTP v68 (no float units) cannot run.
        grouped_mask = attention_mask.flatten(0, 1).repeat(1, self.s.heads // self.s.kv_heads, 1)
        return self._layers(hidden, past, lambda layer, h, k, v: layer(h, cos, sin, grouped_mask, k, v))

    def _layers(self, hidden: torch.Tensor, past: tuple[torch.Tensor, ...], attend: Any) -> tuple[torch.Tensor, ...]:
        """Every layer in order: `attend(layer, hidden, past_k, past_v)` runs an attention layer;
        a Gated DeltaNet layer reads and returns its two states."""
        a, r = self.s.attention_layers, self.s.linear_layers
        states = past[2 * a:2 * a + 2 * r]
        valid = past[2 * a + 2 * r] if len(past) > 2 * a + 2 * r else None
        keys: list[torch.Tensor] = []
        values: list[torch.Tensor] = []
        convs: list[torch.Tensor] = []
        recurrent: list[torch.Tensor] = []
        for layer in self.layers:
            if isinstance(layer, GatedDeltaNetLayer):
                j = len(convs)
                hidden, conv, state = layer(hidden, states[j], states[r + j], valid)
                convs.append(conv)
                recurrent.append(state)
            else:
                i = len(keys)
                hidden, k, v = attend(layer, hidden, past[i], past[a + i])
                keys.append(k)
                values.append(v)
        return (hidden, *keys, *values, *convs, *recurrent)

    def _rope(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [1, 1, N, D] of the positions."""
        if self.s.mrope_section:
            if self.rope_table:
                cos, sin = self._mrope(self.rope_cos[position_ids]), self._mrope(self.rope_sin[position_ids])
            else:
                emb = self._mrope(self._angles(position_ids)[:, 0])
                cos, sin = emb.cos(), emb.sin()
        elif self.rope_table:
            cos, sin = self.rope_cos[position_ids][:, None], self.rope_sin[position_ids][:, None]
        else:
            emb = self._angles(position_ids)
            cos, sin = emb.cos(), emb.sin()
            if self.s.rope_scale != 1.0:  # YaRN's attention factor, as transformers applies it
                cos, sin = cos * self.s.rope_scale, sin * self.s.rope_scale
        return cos, sin


class FusedBodyGraph(BodyGraph):
    """The body for ONNX Runtime's CPU kernels: (hidden, position_ids, seqlens_k, total_sequence_length,
    past_key_i..., past_value_i...) -> (hidden, present_key_i..., present_value_i...), keys and
    values both [1, kv_heads, S, head_dim], attention by the fused GroupQueryAttention over the
    valid slots only (`total_sequence_length` of them; `seqlens_k` = total - 1). No mask: the
    kernel is causal, so a full cache only (a ring's slots are not in position order)."""

    slot_cos: torch.Tensor
    slot_sin: torch.Tensor

    def __init__(self, model: Any, s: DecoderShape, reduce: str = "mean", cache: int = 0) -> None:
        """cache > 0 (plain RoPE only): the kernel rotates q and k at their slots' positions from
        cos/sin tables of `cache` positions (slot p holds position p in a full cache), and the graph
        takes no position input."""
        super().__init__(model, s, reduce)
        self.rotary_inside = cache > 0
        if self.rotary_inside:
            if s.mrope_section:
                raise ValueError("multimodal RoPE positions are not slot positions: rotate outside the kernel")
            self.set_slots(cache)

    def set_slots(self, cache: int) -> None:
        """The cos/sin tables [cache, D/2] of a graph for a cache of `cache` slots (same layers)."""
        half = self._angles(torch.arange(cache, dtype=torch.int64)[None])[0, 0, :, : self.s.head_dim // 2]
        self.register_buffer("slot_cos", (half.cos() * self.s.rope_scale).contiguous(), persistent=False)
        self.register_buffer("slot_sin", (half.sin() * self.s.rope_scale).contiguous(), persistent=False)

    def forward(self, hidden: torch.Tensor, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:  # type: ignore[override]
        """(hidden, [position_ids,] seqlens_k, total_sequence_length, past...): no positions when
        the kernel rotates."""
        if self.rotary_inside:
            cos, sin = self.slot_cos, self.slot_sin
        else:
            cos, sin = self._rope(inputs[0])
            inputs = inputs[1:]
        seqlens_k, total_sequence_length, past = inputs[0], inputs[1], inputs[2:]
        return self._layers(hidden, past, lambda layer, h, k, v: layer.forward_fused(
            h, cos, sin, seqlens_k, total_sequence_length, k, v))


class HeadGraph(nn.Module):
    """hidden [1, 1, hidden] -> logits [1, 1, vocab] (final RMSNorm + lm_head over [hidden, vocab])."""

    def __init__(self, model: Any, s: DecoderShape, reduce: str = "mean", linear: bool = False) -> None:
        """linear: the head as an nn.Linear ([vocab, hidden], the layout weight quantizers take)."""
        super().__init__()
        self.norm = RMSNorm(model.model.norm.weight + s.norm_offset, s.eps, reduce)
        self.s = s
        self.proj: nn.Linear | None = None
        if linear:
            self.proj = nn.Linear(s.hidden, s.vocab, bias=False)
            self.proj.weight = nn.Parameter(model.lm_head.weight.detach().clone(), requires_grad=False)
        else:
            self.weight = nn.Parameter(head_weight(model), requires_grad=False)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        h = self.norm(hidden).reshape(1, self.s.hidden)
        logits: torch.Tensor = (self.proj(h) if self.proj is not None else h @ self.weight).reshape(1, 1, -1)
        return logits


def _mrope_row_of_frequency(section: tuple[int, ...], interleaved: bool) -> torch.Tensor:
    """Which position row (0 T, 1 H, 2 W) each rotary frequency follows."""
    if not interleaved:
        return torch.cat([torch.full((n,), i % 3) for i, n in enumerate(section)])
    row = torch.zeros(sum(section), dtype=torch.int64)
    for axis in (1, 2):
        row[axis:3 * section[axis]:3] = axis
    return row


def image_rope(shape: DecoderShape, config: Any) -> DecoderShape:
    """A hybrid's shape whose body takes the three M-RoPE rows of an image prompt (its text-only
    export rotates plain positions: the rows are equal for text)."""
    config = config.get_text_config() if hasattr(config, "get_text_config") else config
    rope = getattr(config, "rope_parameters", None) or {}
    section = tuple(int(n) for n in rope.get("mrope_section") or ())
    if 2 * sum(section) != shape.rotated or len(section) != 3:
        raise ValueError(f"mrope_section {list(section)} does not cover half the {shape.rotated} rotary dims")
    return replace(shape, mrope_section=section, mrope_interleaved=bool(rope.get("mrope_interleaved", False)))


def _layer(layer: Any, s: DecoderShape, reduce: str, kind: str, htp: bool = False) -> nn.Module:
    if kind == "attention":
        return DecoderLayer(layer, s, reduce)
    assert s.linear is not None

    def norm(weight: torch.Tensor, offset: float = s.norm_offset) -> RMSNorm:
        return RMSNorm(weight + offset, s.eps, reduce)

    return GatedDeltaNetLayer(layer, s.linear, norm, _linear, htp)


def state_io_names(linear: int, chunk: bool) -> tuple[list[str], list[str]]:
    """A hybrid body's recurrent inputs and outputs after its keys and values (none without
    linear layers): each layer's conv state then each one's recurrent state, and a prefill chunk's
    count of valid rows."""
    if not linear:
        return [], []
    names = [f"conv_state_{j}" for j in range(linear)] + [f"recurrent_state_{j}" for j in range(linear)]
    return names + (["valid_tokens"] if chunk else []), [f"{name}_out" for name in names]


def body_io_names(layers: int, linear: int = 0, chunk: bool = False) -> tuple[list[str], list[str]]:
    """`layers`: the attention layers (with a KV cache); `linear`: a hybrid's Gated DeltaNet layers."""
    inputs = ["hidden", "position_ids", "attention_mask"]
    inputs += [f"past_key_{i}" for i in range(layers)] + [f"past_value_{i}" for i in range(layers)]
    outputs = ["hidden_out"] + [f"new_key_{i}" for i in range(layers)] + [f"new_value_{i}" for i in range(layers)]
    state_in, state_out = state_io_names(linear, chunk)
    return inputs + state_in, outputs + state_out


def fused_body_io_names(layers: int, rotary_inside: bool, linear: int = 0,
                        chunk: bool = False) -> tuple[list[str], list[str]]:
    inputs = ["hidden"] + ([] if rotary_inside else ["position_ids"]) + ["seqlens_k", "total_sequence_length"]
    inputs += [f"past_key_{i}" for i in range(layers)] + [f"past_value_{i}" for i in range(layers)]
    outputs = ["hidden_out"] + [f"present_key_{i}" for i in range(layers)] + [f"present_value_{i}" for i in range(layers)]
    state_in, state_out = state_io_names(linear, chunk)
    return inputs + state_in, outputs + state_out


def body_example(s: DecoderShape, n: int, cache: int, fused: bool = False,
                 rotary_inside: bool = False) -> tuple[torch.Tensor, ...]:
    """Example inputs of a body graph with N new tokens over a cache of `cache` slots (`fused`:
    FusedBodyGraph's, the first N slots being written; `rotary_inside`: without positions)."""
    a = s.attention_layers
    keys = [torch.zeros(1, s.kv_heads, *((cache, s.head_dim) if fused else (s.head_dim, cache))) for _ in range(a)]
    values = [torch.zeros(1, s.kv_heads, cache, s.head_dim) for _ in range(a)]
    past = keys + values
    if s.linear is not None:
        conv, state = s.linear.state_shapes()
        past += [torch.zeros(conv) for _ in range(s.linear_layers)] + [torch.zeros(state) for _ in range(s.linear_layers)]
        if n > 1:
            past.append(torch.tensor([n], dtype=torch.int64))
    positions = torch.arange(n, dtype=torch.int64)[None]
    if s.mrope_section:
        positions = positions[None].expand(3, 1, n).contiguous()
    if fused:
        lengths = (torch.tensor([n - 1], dtype=torch.int32), torch.tensor([n], dtype=torch.int32))
        return (torch.zeros(1, n, s.hidden), *(() if rotary_inside else (positions,)), *lengths, *past)
    return (torch.zeros(1, n, s.hidden), positions, torch.zeros(1, 1, n, cache + n), *past)
