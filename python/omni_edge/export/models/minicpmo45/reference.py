"""MiniCPM-o 4.5's thinker as a PyTorch reference: the release's weights (`vpm.`, `resampler.`,
`apm.`, `audio_projection_layer.`, `llm.`) in the local image and audio modules and transformers'
Qwen3ForCausalLM, and a request (images, audio, text) rendered as vLLM-Omni renders it: the chat
template's user turn (media parts first, joined without separators), each media item's
placeholder expanded, every `<unk>` of the prompt replaced in order by the media embeddings,
positions 0..N-1 (no M-RoPE), greedy decoding until `<|tts_eos|>` or `<|im_end|>`.

The `<unk>` id is read from the tokenizer (128244 in the release, whose vLLM-Omni model hard-codes
it); the other special tokens too."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from omni_edge.export.models.minicpmo45.audio import AudioEncoder, PieceEncoder, Projector, audio_placeholder, log_mel_pieces
from omni_edge.export.models.minicpmo45.config import ThinkerConfig, read_config
from omni_edge.export.models.minicpmo45.vision import (
    Resampler,
    SliceEncoder,
    VisionTower,
    image_placeholder,
    patch_strip,
    slice_grid,
    slice_image,
)

STOP_TOKENS = ("<|tts_eos|>", "<|im_end|>")  # vLLM-Omni's stage-0 stop ids (151704, 151645 in the release)
NO_THINKING = "<think>\n\n</think>\n\n"  # enable_thinking=False, as the release's chat() defaults
SPEECH_START = "<|tts_bos|>"  # use_tts_template: the reply is spoken
THINKER_PARTS = ("vpm", "resampler", "apm", "audio_projection_layer", "llm")


@dataclass
class Media:
    """One item of a request: an image (PIL) or audio (float32 samples at 16 kHz)."""

    kind: str
    value: Any


@dataclass
class Thinker:
    config: ThinkerConfig
    vpm: VisionTower
    resampler: Resampler
    apm: AudioEncoder
    audio_projection_layer: Projector
    llm: Any  # transformers.Qwen3ForCausalLM
    tokenizer: Any
    skipped: dict[str, int] = field(default_factory=dict)  # weight-name prefix -> tensors not read

    def token(self, text: str) -> int:
        got = self.tokenizer.convert_tokens_to_ids(text)
        if not isinstance(got, int) or got < 0 or self.tokenizer.convert_ids_to_tokens(got) != text:
            raise ValueError(f"the tokenizer has no {text!r} token")
        return got

    @property
    def stop_ids(self) -> tuple[int, ...]:
        return tuple(self.token(t) for t in STOP_TOKENS)


def _read_weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    files = sorted(checkpoint.glob("*.safetensors"))
    if not files:
        raise ValueError(f"{checkpoint}: no *.safetensors")
    weights: dict[str, torch.Tensor] = {}
    for f in files:
        weights.update({k: v.float() for k, v in load_file(str(f)).items()})
    return weights


def _load(module: nn.Module, prefix: str, weights: dict[str, torch.Tensor], where: Path) -> int:
    """Loads `prefix.*` into `module` (all of its parameters must be there); returns the tensors
    under the prefix that the module has no place for (the release's dropped last vision layer)."""
    own = {k[len(prefix) + 1:]: v for k, v in weights.items() if k.startswith(prefix + ".")}
    expected = module.state_dict()
    missing = sorted(set(expected) - set(own))
    if missing:
        raise ValueError(f"{where}: {prefix}.{missing[0]} is missing ({len(missing)} tensors of {prefix} are)")
    for name, tensor in expected.items():
        if own[name].shape != tensor.shape:
            raise ValueError(f"{where}: {prefix}.{name} is {tuple(own[name].shape)}, the config says {tuple(tensor.shape)}")
    module.load_state_dict({k: own[k] for k in expected})
    return len(own) - len(expected)


def load_thinker(checkpoint: Path) -> Thinker:
    """The thinker of a MiniCPM-o 4.5 directory (config.json, *.safetensors, tokenizer files)."""
    from transformers import AutoTokenizer, Qwen3ForCausalLM

    config = read_config(checkpoint)
    weights = _read_weights(checkpoint)
    llm_class: Any = Qwen3ForCausalLM
    parts: dict[str, nn.Module] = {
        "vpm": VisionTower(config.vision), "resampler": Resampler(config.slices.query_num, config.hidden, config.vision.hidden),
        "apm": AudioEncoder(config.audio), "audio_projection_layer": Projector(config.audio.width, config.hidden),
        "llm": llm_class(config.llm_config())}
    skipped: dict[str, int] = {}
    for name, module in parts.items():
        extra = _load(module, name, weights, checkpoint)
        if extra:
            skipped[name] = extra
        module.eval()
    for key in weights:
        head = key.partition(".")[0]
        if head not in THINKER_PARTS:
            skipped[head] = skipped.get(head, 0) + 1
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    return Thinker(config, parts["vpm"], parts["resampler"], parts["apm"], parts["audio_projection_layer"],  # type: ignore[arg-type]
                   parts["llm"], tokenizer, skipped)


def load_talker(checkpoint: Path) -> Any:
    """The talker (`tts.*`) of a MiniCPM-o 4.5 directory."""
    from omni_edge.export.models.minicpmo45.talker import Talker, TalkerConfig

    config = read_config(checkpoint)
    talker = Talker(TalkerConfig.from_json(config.raw.get("tts_config") or {}, checkpoint / "config.json"))
    talker.load(_read_weights(checkpoint), checkpoint)
    return talker.eval()


# ---- a request ----------------------------------------------------------------------------

@torch.no_grad()
def image_embeddings(thinker: Thinker, image: Any) -> torch.Tensor:
    """[(1 + cols*rows) * query_num, hidden]: every slice through the tower and the resampler."""
    sliced = slice_image(image, thinker.config.slices)
    out = []
    for x, (rows, cols) in zip(sliced.slices, [(h // thinker.config.vision.patch, w // thinker.config.vision.patch)
                                                for h, w in sliced.sizes], strict=True):
        strip = torch.from_numpy(patch_strip(x, thinker.config.vision.patch))[None]
        out.append(SliceEncoder(thinker.vpm, thinker.resampler, rows, cols)(strip)[0])
    return torch.cat(out)


@torch.no_grad()
def audio_embeddings(thinker: Thinker, samples: np.ndarray) -> torch.Tensor:
    """[tokens, hidden]: each 30 s piece's embeddings, in order."""
    out = []
    for mel in log_mel_pieces(samples, thinker.config.audio.mel_bins):
        encoder = PieceEncoder(thinker.apm, thinker.audio_projection_layer, mel.shape[1])
        out.append(encoder(torch.from_numpy(mel)[None])[0])
    return torch.cat(out)


def render_prompt(thinker: Thinker, media: list[Media], text: str, chat: bool = True, speech: bool = False,
                  system: str | None = None) -> str:
    """The prompt's text with every media item's placeholder expanded: the user turn's parts in
    order (media first, then the text, no separators), the assistant's start with thinking off
    and, for a spoken reply, `<|tts_bos|>`."""
    parts, images = [], 0
    for item in media:
        if item.kind == "image":
            width, height = item.value.size  # the grid needs the size only, not the resized slices
            parts.append(image_placeholder(slice_grid(width, height, thinker.config.slices), thinker.config.slices, images))
            images += 1
        elif item.kind == "audio":
            parts.append(audio_placeholder(len(item.value), thinker.config.audio.pool_step))
        else:
            raise ValueError(f"unknown media kind {item.kind!r} (image, audio)")
    content = "".join(parts) + text
    if not chat:
        return content
    prompt = f"<|im_start|>system\n{system}<|im_end|>\n" if system else ""
    prompt += f"<|im_start|>user\n{content}<|im_end|>\n<|im_start|>assistant\n{NO_THINKING}"
    return prompt + (SPEECH_START if speech else "")


@torch.no_grad()
def input_embeddings(thinker: Thinker, ids: list[int], media: list[Media]) -> torch.Tensor:
    """[1, len(ids), hidden]: the token embeddings, each `<unk>` replaced in order by the media's."""
    embeds: torch.Tensor = thinker.llm.model.embed_tokens(torch.tensor([ids]))
    rows = [image_embeddings(thinker, m.value) if m.kind == "image" else audio_embeddings(thinker, m.value) for m in media]
    slots = [i for i, t in enumerate(ids) if t == thinker.token("<unk>")]
    got = sum(int(r.shape[0]) for r in rows)
    if got != len(slots):
        raise ValueError(f"the prompt has {len(slots)} media placeholders, its media make {got} embeddings")
    if rows:
        embeds[0, slots] = torch.cat(rows)
    return embeds


@dataclass
class Reply:
    ids: list[int]        # generated, without the stop token
    hidden: torch.Tensor  # [len(ids), hidden]: the final norm's output at each generated token's position
    stop: int | None      # the stop id that ended it, None at max_new_tokens
    logits: list[torch.Tensor] = field(default_factory=list)  # [vocab] before each pick
    prenorm: torch.Tensor | None = None  # [len(ids), hidden]: the same states before the final norm


@torch.no_grad()
def generate(thinker: Thinker, media: list[Media], text: str, max_new_tokens: int, chat: bool = True,
             speech: bool = False, system: str | None = None, ignore_stop: bool = False) -> tuple[list[int], Reply]:
    """The prompt's ids and the greedy reply (`ignore_stop`: all max_new_tokens, through stop ids)."""
    from transformers import DynamicCache

    ids = list(thinker.tokenizer.encode(render_prompt(thinker, media, text, chat, speech, system), add_special_tokens=False))
    cache = DynamicCache(config=thinker.llm.config)
    out = thinker.llm(inputs_embeds=input_embeddings(thinker, ids, media), past_key_values=cache, use_cache=True)
    reply: list[int] = []
    hidden: list[torch.Tensor] = []
    logits: list[torch.Tensor] = []
    prenorm: list[torch.Tensor] = []  # the final norm's input at each fed token
    hook = thinker.llm.model.norm.register_forward_pre_hook(lambda _m, args: prenorm.append(args[0][0, -1].clone()))
    stop_ids, stop = () if ignore_stop else thinker.stop_ids, None
    try:
        for _ in range(max_new_tokens):
            logits.append(out.logits[0, -1].clone())
            token = int(torch.argmax(logits[-1]))
            if token in stop_ids:
                stop = token
                break
            reply.append(token)
            out = thinker.llm(input_ids=torch.tensor([[token]]), past_key_values=cache, use_cache=True,
                              output_hidden_states=True)
            hidden.append(out.hidden_states[-1][0, -1])
    finally:
        hook.remove()
    width = thinker.config.hidden
    rows = torch.stack(hidden) if hidden else torch.zeros(0, width)
    return ids, Reply(reply, rows, stop, logits, torch.stack(prenorm) if hidden else torch.zeros(0, width))


@dataclass
class Speech:
    prompt: list[int]
    reply: Reply
    codes: list[int]
    pcm: torch.Tensor  # 24 kHz


@torch.no_grad()
def speak(thinker: Thinker, talker: Any, token2wav: Any, voice: Any, media: list[Media], text: str,
          max_new_tokens: int, max_codes: int, system: str | None = None) -> Speech:
    """The three stages on one request: the thinker's spoken reply (greedy), the talker's codes for
    it (greedy, at least 50), token2wav's samples in the voice, window by window."""
    from omni_edge.export.models.minicpmo45.talker import generate_codes

    ids, reply = generate(thinker, media, text, max_new_tokens, speech=True, system=system)
    codes = generate_codes(talker, reply.ids, reply.hidden, max_codes).codes
    return Speech(ids, reply, codes, token2wav.utterance(voice, codes))
