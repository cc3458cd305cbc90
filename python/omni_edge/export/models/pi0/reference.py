"""π0 (transformers' PI0ForConditionalGeneration): the loader, and the reference side of every
check: camera images as the policy reads them and the action chunk `sample_actions` returns for
fixed noise.

A π0 checkpoint is a PaliGemma-style VLM (SigLIP vision, Gemma decoder) that computes the prefix
(each camera's image rows, then the task's ids) once per observation, and an action expert (a
smaller Gemma with as many layers, whose layers attend to the prefix's keys and values) that
denoises an action chunk by flow matching. PI0ImageProcessor needs torchvision, which does not
work here: `camera_pixels` resizes with padding and normalizes to [-1, 1] with Pillow, as the
native controller does on the device."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

PI0_TYPE = "pi0"
SPECIAL_TOKENS = ("<pad>", "<eos>", "<bos>", "<image>")
PROMPT_SUFFIX = "\n"  # PI0Processor's prompt: image tokens, <bos>, the task, a newline
PROMPT_TOKENS = 48    # PI0Processor pads the text to 48 tokens (its max_length)
IMAGE_MEAN = IMAGE_STD = (0.5, 0.5, 0.5)  # IMAGENET_STANDARD_*: x / 255 into [-1, 1]


# ---- loading ---------------------------------------------------------------------------------

@dataclass
class Policy:
    model: Any
    config: Any
    tokenizer: Any
    bos_id: int
    image_token_id: int

    @property
    def image_size(self) -> int:
        return int(self.config.vlm_config.vision_config.image_size)

    @property
    def image_tokens(self) -> int:
        v = self.config.vlm_config.vision_config
        return int((v.image_size // v.patch_size) ** 2)


def load_policy(checkpoint: Path) -> Policy:
    """A π0 checkpoint directory (PI0ForConditionalGeneration.save_pretrained + tokenizer.json),
    or a ValueError saying why it is not one this project can run."""
    from transformers import AutoTokenizer, PI0Config, PI0ForConditionalGeneration

    path = checkpoint / "config.json"
    if not path.is_file():
        raise ValueError(f"{checkpoint}: no config.json")
    kind = json.loads(path.read_text()).get("model_type")
    if kind != PI0_TYPE:
        raise ValueError(f"{checkpoint}: model_type is {kind!r}; export policy takes a π0 checkpoint ({PI0_TYPE!r})")
    if not (checkpoint / "tokenizer.json").is_file():
        raise ValueError(f"{checkpoint}: no tokenizer.json (the task's ids come from the checkpoint's tokenizer)")
    config: Any = PI0Config.from_pretrained(checkpoint)
    text, expert, vision = config.vlm_config.text_config, config.dit_config, config.vlm_config.vision_config
    problems = []
    if text.num_hidden_layers != expert.num_hidden_layers:
        problems.append(f"the expert has {expert.num_hidden_layers} layers and the VLM decoder {text.num_hidden_layers}")
    if (text.head_dim, text.num_key_value_heads) != (expert.head_dim, expert.num_key_value_heads):
        problems.append("the expert's KV heads differ from the VLM decoder's (it reads the prefix's keys and values)")
    if vision.image_size % vision.patch_size:
        problems.append(f"image size {vision.image_size} is not a multiple of patch {vision.patch_size}")
    if config.vlm_config.vision_config.vision_use_head:
        problems.append("the SigLIP tower has a pooling head (π0 reads every patch row)")
    if problems:
        raise ValueError(f"{checkpoint}: not a π0 this project can run: " + "; ".join(problems))
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    image_token_id = int(config.vlm_config.image_token_id)
    bos = tokenizer.bos_token_id
    model_class: Any = PI0ForConditionalGeneration
    model = model_class.from_pretrained(checkpoint, dtype="float32").eval()
    return Policy(model, config, tokenizer, -1 if bos is None else int(bos), image_token_id)


# ---- the reference -----------------------------------------------------------------------------

def camera_pixels(image: Any, size: int) -> np.ndarray:
    """[3, size, size] float32: resized keeping the aspect ratio until one side is `size`
    (transformers' max height/width rule; Pillow's bicubic, whose pass order the native
    controller follows), x / 255 normalized to [-1, 1], then zero-padded at the bottom and right
    (after normalization, as PI0ImageProcessor)."""
    from PIL import Image

    rgb = image.convert("RGB")
    scale = min(size / rgb.height, size / rgb.width)
    h, w = int(rgb.height * scale), int(rgb.width * scale)
    if (w, h) != rgb.size:
        rgb = rgb.resize((w, h), Image.Resampling.BICUBIC)
    x = np.asarray(rgb, np.float32) / np.float32(255.0)
    mean, std = np.array(IMAGE_MEAN, np.float32), np.array(IMAGE_STD, np.float32)
    out = np.zeros((3, size, size), np.float32)
    out[:, :h, :w] = ((x - mean) / std).transpose(2, 0, 1)
    return out


def observation_pixels(images: Any, size: int) -> list[np.ndarray]:
    """camera_pixels of each image file, in the order given."""
    from PIL import Image

    return [camera_pixels(Image.open(path), size) for path in images]


def prompt_ids(policy: Policy, prompt: str) -> list[int]:
    """The task's ids as the prefix holds them: <bos>, then the prompt and PI0Processor's newline
    as the checkpoint's tokenizer encodes them."""
    ids = policy.tokenizer.encode(prompt + PROMPT_SUFFIX, add_special_tokens=False)
    return ([policy.bos_id] if policy.bos_id >= 0 else []) + [int(i) for i in ids]


def reference_actions(policy: Policy, pixels: list[np.ndarray], prompt: str, state: np.ndarray,
                      noise: np.ndarray) -> np.ndarray:
    """transformers' sample_actions for one observation: [chunk, action_dim]."""
    import torch

    ids = [policy.image_token_id] * (policy.image_tokens * len(pixels)) + prompt_ids(policy, prompt)
    input_ids = torch.tensor([ids])
    padded = np.zeros(policy.config.max_state_dim, np.float32)
    padded[:len(state)] = state
    with torch.no_grad():
        out = policy.model.sample_actions(
            state=torch.from_numpy(padded)[None], input_ids=input_ids,
            pixel_values=torch.from_numpy(np.stack(pixels))[None],
            pixel_attention_mask=torch.ones(1, len(pixels), dtype=torch.bool),
            attention_mask=torch.ones_like(input_ids), noise=torch.from_numpy(noise)[None])
    return np.asarray(out[0].numpy(), np.float32)
