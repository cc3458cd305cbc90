"""An InternVLA-A1 checkpoint as torch modules, and the policy's arithmetic over them.

The checkpoint is the layout vLLM-Omni's `InternVLAA1Policy.from_pretrained` loads: config.json
(`"type": "internvla_a1"`, the variant names that fix the sizes), model.safetensors (names under
`model.`), train_config.json (the action mode, the processor), Cosmos-Tokenizer-CI8x8/encoder.safetensors (the
Cosmos continuous image tokenizer CI8x8's encoder) and processor/ (Qwen3-VL's tokenizer and image
processor config). Checkpoints made here at sizes no variant has also carry
`omni_edge_sizes`; vLLM-Omni ignores unknown fields, so only its reference run reads them.

Three experts share attention layer by layer (all three have the same layers, KV heads and
head size):
- understanding: Qwen3-VL (its vision tower and text decoder) over the prefix: per camera
  `<|vision_start|>`, the current frame's merged patch rows, `<|vision_end|>`, then the task's
  ids padded to `tokenizer_max_length`; bidirectional over its valid tokens, M-RoPE positions.
- generation ("foresight"): a decoder without embeddings over each camera's frame history
  encoded by Cosmos and pooled to 4 x 4 rows per frame; it sees the valid prefix and itself.
- action: a decoder without embeddings over the state token and the noisy chunk, one flow
  step per call; it reads the prefix's and the history's keys and values.

The forwards below are this project's own (the HTP and ONNX export want static, explicit
attention): every rotary table and attention bias is an input, computed by the caller."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

TYPE = "internvla_a1"
CAMERA_SLOTS = 3            # sample_actions reads image0..image2, each with a mask
HISTORY = 2                 # frames per camera: the previous and the current
COSMOS_SIZE = 256           # Cosmos reads 256 x 256 images in [-1, 1]
COSMOS_COMPRESSION = 8      # CI8x8: a 32 x 32 latent
LATENT_CHANNELS = 16
IMAGE_TOKEN_ID, VISION_START_ID, VISION_END_ID = 151655, 151652, 151653  # Qwen3-VL's defaults
VOCAB = 151936
ROPE_THETA = 5_000_000.0
MROPE_SECTION = (24, 20, 20)
VISION_ROPE_THETA = 10_000.0
RMS_EPS = 1e-6
# The Cosmos tokenizer's folder in a checkpoint: named as its Hugging Face repository, which is
# also how vLLM-Omni tells CI8x8 from CI16x16 (by the path).
COSMOS_DIR = "Cosmos-Tokenizer-CI8x8"


@dataclass(frozen=True)
class DecoderSize:
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int


@dataclass(frozen=True)
class VisionSize:
    depth: int
    hidden: int
    intermediate: int
    heads: int
    patch: int
    num_position_embeddings: int
    temporal_patch: int = 2
    merge: int = 2


@dataclass(frozen=True)
class CosmosSize:
    channels: int
    channels_mult: tuple[int, ...]
    num_res_blocks: int
    patch: int = 4


@dataclass(frozen=True)
class Sizes:
    vlm: DecoderSize
    expert: DecoderSize     # the generation and the action experts alike
    vision: VisionSize
    cosmos: CosmosSize


def variant_layers(variant: str, family: str) -> int:
    """`qwen3_vl_28l` -> 28 (the variant names vLLM-Omni takes)."""
    head, _, tail = variant.rpartition("_")
    if head != family or not tail.endswith("l") or not tail[:-1].isdigit() or int(tail[:-1]) < 1:
        raise ValueError(f"variant {variant!r}: expected {family}_<layers>l")
    return int(tail[:-1])


def real_sizes(vlm_layers: int, expert_layers: int) -> Sizes:
    """The sizes vLLM-Omni fixes per variant: a Qwen3-VL-2B-class understanding expert (2048
    wide, 16 heads of 128, 8 KV heads), experts of 1024, a 24-block vision tower of 1024, Cosmos
    CI8x8."""
    return Sizes(DecoderSize(2048, 6144, vlm_layers, 16, 8, 128), DecoderSize(1024, 3072, expert_layers, 16, 8, 128),
                 VisionSize(24, 1024, 4096, 16, 16, 2304), CosmosSize(128, (2, 4, 4), 2))


@dataclass(frozen=True)
class PolicyConfig:
    """What the policy's arithmetic needs from config.json and train_config.json."""

    sizes: Sizes
    chunk: int
    max_state_dim: int
    max_action_dim: int
    num_steps: int
    image_resolution: tuple[int, int]
    prompt_tokens: int
    scale_factor: int
    min_period: float
    max_period: float
    state_dim: int                 # the robot's (input_features' observation.state), <= max_state_dim
    action_dim: int                # the robot's (output_features' action), <= max_action_dim
    action_mode: str               # "delta" | "absolute" (train_config.json)
    variants: tuple[str, str]
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def frame_rows(self) -> int:
        """Rows per Cosmos frame after the scale_factor pooling (16 for CI8x8 at 8)."""
        side = COSMOS_SIZE // COSMOS_COMPRESSION // self.scale_factor
        return side * side

    @property
    def grid(self) -> tuple[int, int]:
        """The vision tower's patch grid of one resized image."""
        p = self.sizes.vision.patch
        return self.image_resolution[0] // p, self.image_resolution[1] // p

    @property
    def image_tokens(self) -> int:
        gh, gw = self.grid
        m = self.sizes.vision.merge
        return (gh // m) * (gw // m)


def _feature_dim(features: Any, key: str, default: int) -> int:
    spec = features.get(key) if isinstance(features, dict) else None
    shape = spec.get("shape") if isinstance(spec, dict) else None
    if isinstance(shape, list) and len(shape) == 1 and isinstance(shape[0], int) and shape[0] > 0:
        return int(shape[0])
    return default


def read_config(checkpoint: Path) -> PolicyConfig:
    """config.json (+ train_config.json), or a ValueError saying what this project cannot run."""
    path = checkpoint / "config.json"
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable config ({exc})") from None
    if not isinstance(raw, dict) or raw.get("type") != TYPE:
        raise ValueError(f"{path}: not an InternVLA-A1 config (type {TYPE!r})")
    vlm_variant = str(raw.get("qwen3_vl_variant", "qwen3_vl_28l"))
    expert_variant = str(raw.get("action_expert_variant", "qwen3_28l"))
    vlm_layers, expert_layers = variant_layers(vlm_variant, "qwen3_vl"), variant_layers(expert_variant, "qwen3")
    sizes = sizes_from(raw.get("omni_edge_sizes"), vlm_layers, expert_layers) if "omni_edge_sizes" in raw \
        else real_sizes(vlm_layers, expert_layers)
    v, e = sizes.vlm, sizes.expert
    if v.layers != e.layers:
        raise ValueError(f"{path}: the experts share attention layer by layer: {vlm_variant} and {expert_variant} "
                         "differ in layers")
    if (v.kv_heads, v.head_dim, v.heads) != (e.kv_heads, e.head_dim, e.heads):
        raise ValueError(f"{path}: the experts' heads differ ({v.heads}x{v.head_dim}/{v.kv_heads} vs "
                         f"{e.heads}x{e.head_dim}/{e.kv_heads}): they cannot share attention")
    res = raw.get("image_resolution", [224, 224])
    if not (isinstance(res, list) and len(res) == 2 and all(isinstance(x, int) and x > 0 for x in res)):
        raise ValueError(f"{path}: image_resolution: [height, width]")
    unit = sizes.vision.patch * sizes.vision.merge
    if res[0] % unit or res[1] % unit:
        # The policy first resizes every image with padding to image_resolution; on a multiple of
        # patch x merge, Qwen3-VL's smart resize is the identity, so the device never resamples twice.
        raise ValueError(f"{path}: image_resolution {res}: a multiple of {unit} (patch x merge) is what this "
                         "project runs (Qwen3-VL's smart resize is then the identity)")
    scale = int(raw.get("scale_factor", 8))
    if scale < 1 or (COSMOS_SIZE // COSMOS_COMPRESSION) % scale:
        raise ValueError(f"{path}: scale_factor {scale}: must divide the 32 x 32 Cosmos latent")
    max_state, max_action = int(raw.get("max_state_dim", 32)), int(raw.get("max_action_dim", 32))
    state_dim = _feature_dim(raw.get("input_features"), "observation.state", max_state)
    action_dim = _feature_dim(raw.get("output_features"), "action", max_action)
    if not (0 < state_dim <= max_state and 0 < action_dim <= max_action):
        raise ValueError(f"{path}: the state ({state_dim}) and action ({action_dim}) dimensions must fit "
                         f"max_state_dim ({max_state}) and max_action_dim ({max_action})")
    return PolicyConfig(sizes, int(raw.get("chunk_size", 50)), max_state, max_action,
                        int(raw.get("num_inference_steps", 10)), (res[0], res[1]),
                        int(raw.get("tokenizer_max_length", 48)), scale, float(raw.get("min_period", 4e-3)),
                        float(raw.get("max_period", 4.0)), state_dim, action_dim, read_action_mode(checkpoint),
                        (vlm_variant, expert_variant), raw)


def sizes_from(block: Any, vlm_layers: int, expert_layers: int) -> Sizes:
    """The `omni_edge_sizes` block of a checkpoint made here."""
    try:
        vlm = DecoderSize(layers=vlm_layers, **block["vlm"])
        expert = DecoderSize(layers=expert_layers, **block["expert"])
        vision = VisionSize(**block["vision"])
        c = block["cosmos"]
        cosmos = CosmosSize(int(c["channels"]), tuple(int(x) for x in c["channels_mult"]), int(c["num_res_blocks"]))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"omni_edge_sizes: {exc}") from None
    return Sizes(vlm, expert, vision, cosmos)


def sizes_block(s: Sizes) -> dict[str, Any]:
    def dec(d: DecoderSize) -> dict[str, int]:
        return {"hidden": d.hidden, "intermediate": d.intermediate, "heads": d.heads, "kv_heads": d.kv_heads,
                "head_dim": d.head_dim}

    return {"vlm": dec(s.vlm), "expert": dec(s.expert),
            "vision": {"depth": s.vision.depth, "hidden": s.vision.hidden, "intermediate": s.vision.intermediate,
                       "heads": s.vision.heads, "patch": s.vision.patch,
                       "num_position_embeddings": s.vision.num_position_embeddings},
            "cosmos": {"channels": s.cosmos.channels, "channels_mult": list(s.cosmos.channels_mult),
                       "num_res_blocks": s.cosmos.num_res_blocks}}


def read_action_mode(checkpoint: Path) -> str:
    path = checkpoint / "train_config.json"
    if not path.is_file():
        return "delta"  # vLLM-Omni's default
    try:
        mode = json.loads(path.read_text()).get("dataset", {}).get("action_mode", "delta")
    except (OSError, ValueError, AttributeError) as exc:
        raise ValueError(f"{path}: not readable ({exc})") from None
    if mode not in ("delta", "absolute"):
        raise ValueError(f"{path}: dataset.action_mode {mode!r}: delta or absolute")
    return str(mode)


# ---- modules ---------------------------------------------------------------------------------

def _text_config(d: DecoderSize, vocab: int) -> Any:
    from transformers import Qwen3VLTextConfig

    config_class: Any = Qwen3VLTextConfig
    return config_class(vocab_size=vocab, hidden_size=d.hidden, intermediate_size=d.intermediate,
                             num_hidden_layers=d.layers, num_attention_heads=d.heads, num_key_value_heads=d.kv_heads,
                             head_dim=d.head_dim, rms_norm_eps=RMS_EPS, tie_word_embeddings=True,
                             rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA,
                                              "mrope_section": list(MROPE_SECTION), "mrope_interleaved": True},
                             attn_implementation="eager")


def _vision_config(v: VisionSize, out_hidden: int) -> Any:
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLVisionConfig

    config_class: Any = Qwen3VLVisionConfig
    return config_class(depth=v.depth, hidden_size=v.hidden, intermediate_size=v.intermediate, num_heads=v.heads,
                               patch_size=v.patch, temporal_patch_size=v.temporal_patch, spatial_merge_size=v.merge,
                               out_hidden_size=out_hidden, num_position_embeddings=v.num_position_embeddings,
                               deepstack_visual_indexes=[], hidden_act="gelu_pytorch_tanh",
                               attn_implementation="eager")


class _Layers(nn.Module):
    """A Qwen3-VL text decoder's layers and final norm (`embed`: with its token embeddings)."""

    def __init__(self, d: DecoderSize, embed: bool) -> None:
        super().__init__()
        from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextDecoderLayer, Qwen3VLTextRMSNorm

        config = _text_config(d, VOCAB)
        if embed:
            self.embed_tokens = nn.Embedding(VOCAB, d.hidden)
        self.layers = nn.ModuleList([Qwen3VLTextDecoderLayer(config, i) for i in range(d.layers)])
        self.norm = Qwen3VLTextRMSNorm(d.hidden, eps=RMS_EPS)


class _ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(32, cin, eps=1e-6)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm2 = nn.GroupNorm(32, cout, eps=1e-6)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.nin_shortcut = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        out: torch.Tensor = self.nin_shortcut(x) + h
        return out


class _SelfAttention2d(nn.Module):
    """Single-head attention over the positions of a feature map (the encoder's middle)."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.norm = nn.GroupNorm(32, c, eps=1e-6)
        self.q, self.k, self.v, self.proj_out = (nn.Conv2d(c, c, 1) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        b, c, hh, ww = h.shape
        q = self.q(h).reshape(b, c, hh * ww).transpose(1, 2)
        k = self.k(h).reshape(b, c, hh * ww)
        v = self.v(h).reshape(b, c, hh * ww)
        weights = torch.softmax(torch.bmm(q, k) * (c ** -0.5), dim=2)
        attended = torch.bmm(v, weights.transpose(1, 2)).reshape(b, c, hh, ww)
        out: torch.Tensor = x + self.proj_out(attended)
        return out


class _Level(nn.Module):
    def __init__(self, cin: int, cout: int, blocks: int, downsample: bool) -> None:
        super().__init__()
        self.block = nn.ModuleList([_ResBlock(cin if i == 0 else cout, cout) for i in range(blocks)])
        self.attn = nn.ModuleList()  # CI8x8 attends only in the middle at these resolutions
        self.downsample = _Downsample(cout) if downsample else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.block:
            x = block(x)
        return x if self.downsample is None else self.downsample(x)


class _Downsample(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.conv(F.pad(x, (0, 1, 0, 1)))
        return out


def haar(x: torch.Tensor) -> torch.Tensor:
    """One level of the orthonormal 2-D Haar transform, halved: [B, C, H, W] -> [B, 4C, H/2, W/2]
    ordered (low-low, low-high, high-low, high-high) per channel block, as Cosmos patches."""
    s = 0.7071067811865476
    even_w, odd_w = x[..., 0::2], x[..., 1::2]
    low, high = (even_w + odd_w) * s, (even_w - odd_w) * s
    parts = []
    for band in (low, high):
        even_h, odd_h = band[..., 0::2, :], band[..., 1::2, :]
        parts += [(even_h + odd_h) * s, (even_h - odd_h) * s]
    return torch.cat(parts, dim=1) / 2


class _Middle(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.block_1, self.attn_1, self.block_2 = _ResBlock(c, c), _SelfAttention2d(c), _ResBlock(c, c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.block_2(self.attn_1(self.block_1(x)))
        return out


class _Encoder(nn.Module):
    def __init__(self, c: CosmosSize) -> None:
        super().__init__()
        downsamples = int(math.log2(COSMOS_COMPRESSION)) - int(math.log2(c.patch))
        self.conv_in = nn.Conv2d(3 * c.patch * c.patch, c.channels, 3, padding=1)
        widths = [c.channels * m for m in c.channels_mult]
        self.down = nn.ModuleList()
        cin = c.channels
        for i, w in enumerate(widths):
            self.down.append(_Level(cin, w, c.num_res_blocks, i < downsamples))
            cin = w
        self.mid = _Middle(cin)
        self.norm_out = nn.GroupNorm(32, cin, eps=1e-6)
        self.conv_out = nn.Conv2d(cin, LATENT_CHANNELS, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv_in(x)
        for level in self.down:
            h = level(h)
        out: torch.Tensor = self.conv_out(F.silu(self.norm_out(self.mid(h))))
        return out


class CosmosEncoder(nn.Module):
    """Cosmos-Tokenizer CI8x8's encoder and quant_conv (what `encode` returns: the latent
    itself, an identity distribution): [B, 3, 256, 256] in [-1, 1] -> [B, 16, 32, 32]. Haar
    patches of 4 (two levels), one downsampling level, a middle with one attention block."""

    def __init__(self, c: CosmosSize) -> None:
        super().__init__()
        self.patch_levels = int(math.log2(c.patch))
        self.encoder = _Encoder(c)
        self.quant_conv = nn.Conv2d(LATENT_CHANNELS, LATENT_CHANNELS, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.patch_levels):
            x = haar(x)
        out: torch.Tensor = self.quant_conv(self.encoder(x))
        return out


class _VlmModel(nn.Module):
    def __init__(self, s: Sizes) -> None:
        super().__init__()
        from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionModel

        vision_class: Any = Qwen3VLVisionModel
        self.visual: Any = vision_class._from_config(_vision_config(s.vision, s.vlm.hidden))
        self.language_model = _Layers(s.vlm, embed=True)


class _Understanding(nn.Module):
    def __init__(self, s: Sizes) -> None:
        super().__init__()
        self.model = _VlmModel(s)


class _Experts(nn.Module):
    def __init__(self, s: Sizes) -> None:
        super().__init__()
        self.und_expert = _Understanding(s)
        self.gen_expert = _Layers(s.expert, embed=False)
        self.act_expert = _Layers(s.expert, embed=False)


class InternVLAA1(nn.Module):
    """The policy's weights under the names vLLM-Omni's checkpoint uses (less `model.`)."""

    def __init__(self, config: PolicyConfig) -> None:
        super().__init__()
        s = config.sizes
        self.config = config
        self.qwen3_vl_with_expert = _Experts(s)
        h = s.expert.hidden
        self.cosmos_in_proj = nn.Conv2d(LATENT_CHANNELS, h, 1)
        self.downsample_conv = nn.Conv2d(h, h, config.scale_factor, stride=config.scale_factor)
        self.action_in_proj = nn.Linear(config.max_action_dim, h)
        self.action_out_proj = nn.Linear(h, config.max_action_dim)
        self.state_proj = nn.Linear(config.max_state_dim, h)
        self.action_time_mlp_in = nn.Linear(2 * h, h)
        self.action_time_mlp_out = nn.Linear(h, h)
        self.cosmos = CosmosEncoder(s.cosmos)

    @property
    def visual(self) -> Any:
        return self.qwen3_vl_with_expert.und_expert.model.visual

    @property
    def vlm(self) -> _Layers:
        return self.qwen3_vl_with_expert.und_expert.model.language_model


# Weights a checkpoint holds that action inference never reads: the foresight image head and
# the tied LM head.
UNUSED_PREFIXES = ("model.upsample_conv.", "model.cosmos_out_proj.", "model.cosmos_out_layer_norm.",
                   "model.qwen3_vl_with_expert.und_expert.lm_head.",
                   "model.qwen3_vl_with_expert.und_expert.model.visual.deepstack_merger_list.")


def load(checkpoint: Path, config: PolicyConfig | None = None) -> InternVLAA1:
    """The policy in float32 from model.safetensors and cosmos/encoder.safetensors; every weight
    the arithmetic reads must be there with its shape (a ValueError names what is not)."""
    from safetensors.torch import load_file

    config = config or read_config(checkpoint)
    model = InternVLAA1(config).float().eval()
    for f in ("model.safetensors", f"{COSMOS_DIR}/encoder.safetensors"):
        if not (checkpoint / f).is_file():
            raise ValueError(f"{checkpoint}: no {f}")
    weights = {k.removeprefix("model."): v for k, v in load_file(str(checkpoint / "model.safetensors")).items()
               if k.startswith("model.") and not k.startswith(UNUSED_PREFIXES) and not k.startswith("model.cosmos.")}
    weights.update({f"cosmos.{k}": v for k, v in load_file(str(checkpoint / COSMOS_DIR / "encoder.safetensors")).items()})
    expected = model.state_dict()
    missing = sorted(set(expected) - set(weights))
    if missing:
        raise ValueError(f"{checkpoint}: {len(missing)} weights missing, e.g. {missing[:3]}")
    for name, tensor in weights.items():
        if name in expected and tuple(tensor.shape) != tuple(expected[name].shape):
            raise ValueError(f"{checkpoint}: {name} is {tuple(tensor.shape)}; the config's sizes say "
                             f"{tuple(expected[name].shape)}")
    model.load_state_dict({k: v.float() for k, v in weights.items() if k in expected}, strict=True)
    return model


# ---- the arithmetic --------------------------------------------------------------------------

def _project(layer: Any, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
             head_dim: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A layer's queries, keys (normed, rotated) and values for `hidden` [1, N, H]: [1, heads, N, D]."""
    from transformers.models.qwen3_vl.modeling_qwen3_vl import apply_rotary_pos_emb

    attn = layer.self_attn
    x = layer.input_layernorm(hidden)
    shape = (*x.shape[:-1], -1, head_dim)
    q = attn.q_norm(attn.q_proj(x).view(shape)).transpose(1, 2)
    k = attn.k_norm(attn.k_proj(x).view(shape)).transpose(1, 2)
    v = attn.v_proj(x).view(shape).transpose(1, 2)
    q, k = apply_rotary_pos_emb(q, k, cos, sin)
    return q, k, v


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, scaling: float) -> torch.Tensor:
    """Eager grouped-query attention with an additive bias: [1, heads, N, D] -> [1, N, heads x D]."""
    groups = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(groups, dim=1)
    v = v.repeat_interleave(groups, dim=1)
    weights = torch.softmax(torch.matmul(q, k.transpose(2, 3)) * scaling + bias, dim=-1)
    out = torch.matmul(weights, v).transpose(1, 2)
    return out.reshape(out.shape[0], out.shape[1], -1)


def _finish(layer: Any, hidden: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
    hidden = hidden + layer.self_attn.o_proj(attended)
    out: torch.Tensor = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
    return out


def context_kv(model: InternVLAA1, prefix: torch.Tensor, history: torch.Tensor, bias: torch.Tensor,
               cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The keys and values the action expert reads, [layers, 1, kv_heads, P + M, D]: the
    understanding expert over the prefix embeddings [1, P, Hv] and the generation expert over the
    history rows [1, M, He], one attention per layer over both (the bias [1, 1, P+M, P+M] keeps
    the prefix from seeing the history, so this equals running them one after the other)."""
    d = model.config.sizes.vlm.head_dim
    P = prefix.shape[1]
    experts = (model.vlm, model.qwen3_vl_with_expert.gen_expert)
    keys, values = [], []
    for i in range(len(model.vlm.layers)):
        layers: list[Any] = [e.layers[i] for e in experts]
        parts = [_project(layer, h, cos[:, a:b], sin[:, a:b], d)
                 for layer, h, (a, b) in zip(layers, (prefix, history), ((0, P), (P, None)), strict=True)]
        q, k, v = (torch.cat(t, dim=2) for t in zip(*parts, strict=True))
        att = _attend(q, k, v, bias, layers[0].self_attn.scaling)
        prefix = _finish(layers[0], prefix, att[:, :P])
        history = _finish(layers[1], history, att[:, P:])
        keys.append(k)
        values.append(v)
    return torch.stack(keys), torch.stack(values)


def velocity(model: InternVLAA1, keys: torch.Tensor, values: torch.Tensor, bias: torch.Tensor, x: torch.Tensor,
             time_embedding: torch.Tensor, state: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """One flow step's velocity [1, chunk, A]: the state token and the noisy chunk (with the time
    embedding) through the action expert, attending to the context's keys and values."""
    actions = model.action_in_proj(x)
    times = time_embedding[:, None, :].expand_as(actions)
    mixed = model.action_time_mlp_out(F.silu(model.action_time_mlp_in(torch.cat([actions, times], dim=2))))
    hidden = torch.cat([model.state_proj(state)[:, None, :], mixed], dim=1)
    expert = model.qwen3_vl_with_expert.act_expert
    d = model.config.sizes.expert.head_dim
    layer: Any
    for i, layer in enumerate(expert.layers):
        q, k, v = _project(layer, hidden, cos, sin, d)
        att = _attend(q, torch.cat([keys[i], k], dim=2), torch.cat([values[i], v], dim=2), bias,
                      layer.self_attn.scaling)
        hidden = _finish(layer, hidden, att)
    out: torch.Tensor = model.action_out_proj(expert.norm(hidden)[:, -x.shape[1]:])
    return out


def frame_rows(model: InternVLAA1, image: torch.Tensor) -> torch.Tensor:
    """One frame [1, 3, 256, 256] in [-1, 1] -> its pooled Cosmos rows [1, rows, He]."""
    features: torch.Tensor = model.downsample_conv(model.cosmos_in_proj(model.cosmos(image)))
    return features.flatten(2).transpose(1, 2)
