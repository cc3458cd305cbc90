"""MiniCPM-o 4.5's talker as a PyTorch reference, as vLLM-Omni 0.30.0 runs it
(MiniCPMO45OmniTTSForConditionalGeneration, the release's `tts.*` weights, tts_config
model_type "minicpmtts" with one codebook):

- its condition: for each token of the spoken span (the thinker's reply after `<|tts_bos|>`,
  up to `<|tts_eos|>` / `<|im_end|>`), the text embedding of the thinker's token plus the
  thinker's final-norm hidden state at that token through a two-layer projector (L2-normalized
  when normalize_projected_hidden), then the text embeddings of text_eos and audio_bos;
- a Llama decoder over that prefill, then one code a step fed back through `emb_code`;
- its head a weight-normalized linear (the release stores g and v), the code vocabulary
  num_audio_tokens, whose last id ends the speech; the deploy config asks for at least 50 codes
  (the end is masked before) and at most 4096 positions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from omni_edge.export.models.minicpmo45.audio import Projector

MIN_CODES = 50  # deploy/minicpmo_4_5.yaml min_tokens (the release's min_new_token)
HEAD_G, HEAD_V = "head_code.0.parametrizations.weight.original0", "head_code.0.parametrizations.weight.original1"


@dataclass(frozen=True)
class TalkerConfig:
    llm_dim: int
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    max_positions: int
    rms_eps: float
    audio_tokens: int
    text_tokens: int
    audio_bos: int
    text_eos: int
    normalize: bool

    @property
    def eos(self) -> int:
        return self.audio_tokens - 1

    @classmethod
    def from_json(cls, tts: Any, where: object) -> TalkerConfig:
        if not isinstance(tts, dict) or tts.get("model_type") != "minicpmtts":
            raise ValueError(f"{where}: tts_config is not a MiniCPM-o 4.5 talker (model_type minicpmtts)")
        if tts.get("num_vq", 1) != 1:
            raise ValueError(f"{where}: tts_config.num_vq is {tts.get('num_vq')}; the 4.5 talker has one codebook")
        try:
            return cls(int(tts["llm_dim"]), int(tts["hidden_size"]), int(tts["intermediate_size"]),
                       int(tts["num_hidden_layers"]), int(tts["num_attention_heads"]),
                       int(tts.get("num_key_value_heads") or tts["num_attention_heads"]),
                       int(tts.get("max_position_embeddings", 4096)), float(tts.get("rms_norm_eps", 1e-6)),
                       int(tts["num_audio_tokens"]), int(tts["num_text_tokens"]), int(tts["audio_bos_token_id"]),
                       int(tts["text_eos_token_id"]), bool(tts.get("normalize_projected_hidden", False)))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{where}: tts_config lacks or mistypes {exc}") from None

    def llama(self) -> Any:
        from transformers import LlamaConfig

        # vocab_size 1: the backbone's own token table is never read (inputs are embeddings).
        return LlamaConfig(vocab_size=1, hidden_size=self.hidden, intermediate_size=self.intermediate,
                           num_hidden_layers=self.layers, num_attention_heads=self.heads,
                           num_key_value_heads=self.kv_heads, hidden_act="silu",
                           max_position_embeddings=self.max_positions, rms_norm_eps=self.rms_eps,
                           tie_word_embeddings=False, bos_token_id=None, eos_token_id=None, pad_token_id=None)


class Talker(nn.Module):
    """The release's `tts.*` modules (the backbone under `model.`)."""

    def __init__(self, c: TalkerConfig) -> None:
        from transformers import LlamaModel

        super().__init__()
        self.config = c
        self.model = LlamaModel(c.llama())
        self.emb_text = nn.Embedding(c.text_tokens, c.hidden)
        self.projector_semantic = Projector(c.llm_dim, c.hidden)
        self.emb_code = nn.ModuleList([nn.Embedding(c.audio_tokens, c.hidden)])
        self.head_code = nn.ModuleList([nn.Linear(c.hidden, c.audio_tokens, bias=False)])

    def load(self, weights: dict[str, torch.Tensor], where: object) -> int:
        """Loads the `tts.*` tensors (the head from its weight-norm g and v); returns how many of
        them it has no place for (the release's unused speaker projector, the backbone's token table)."""
        own = {k[4:]: v for k, v in weights.items() if k.startswith("tts.")}
        if HEAD_G not in own or HEAD_V not in own:
            raise ValueError(f"{where}: tts.{HEAD_V} / original0 (the talker's weight-norm head) are missing")
        state = self.state_dict()
        wanted = {k for k in state if k not in ("model.embed_tokens.weight", "head_code.0.weight")}
        missing = sorted(wanted - set(own))
        if missing:
            raise ValueError(f"{where}: tts.{missing[0]} is missing ({len(missing)} talker tensors are)")
        merged = {k: own[k] for k in wanted}
        merged["head_code.0.weight"] = torch._weight_norm(own[HEAD_V], own[HEAD_G], 0)
        merged["model.embed_tokens.weight"] = state["model.embed_tokens.weight"]
        for name, tensor in merged.items():
            if tensor.shape != state[name].shape:
                raise ValueError(f"{where}: tts.{name} is {tuple(tensor.shape)}, the config says {tuple(state[name].shape)}")
        self.load_state_dict(merged)
        return len(set(own) - wanted - {HEAD_G, HEAD_V})

    def condition(self, ids: list[int], hidden: torch.Tensor) -> torch.Tensor:
        """The prefill [len(ids) + 2, hidden]: text + projected thinker states, text_eos, audio_bos."""
        c = self.config
        tail: torch.Tensor = self.emb_text(torch.tensor([c.text_eos, c.audio_bos]))
        if not ids:
            return tail
        projected = self.projector_semantic(hidden)
        if c.normalize:
            projected = torch.nn.functional.normalize(projected, p=2, dim=-1)
        out: torch.Tensor = torch.cat([self.emb_text(torch.tensor(ids)) + projected, tail])
        return out


@dataclass
class Codes:
    codes: list[int]             # without the end
    logits: list[torch.Tensor]   # [audio_tokens] before each pick (the end masked before MIN_CODES)
    ended: bool


@torch.no_grad()
def generate_codes(talker: Talker, ids: list[int], hidden: torch.Tensor, max_codes: int,
                   min_codes: int = MIN_CODES) -> Codes:
    """Greedy codes for a spoken span: the end is masked for the first `min_codes` steps."""
    from transformers import DynamicCache

    c = talker.config
    cache = DynamicCache(config=talker.model.config)
    embeds = talker.condition(ids, hidden)[None]
    out = talker.model(inputs_embeds=embeds, past_key_values=cache, use_cache=True).last_hidden_state
    codes: list[int] = []
    logits: list[torch.Tensor] = []
    for step in range(max_codes):
        row = talker.head_code[0](out[0, -1]).float()
        if step < min_codes:
            row[c.eos] = float("-inf")
        logits.append(row)
        code = int(torch.argmax(row))
        if code == c.eos:
            return Codes(codes, logits, True)
        codes.append(code)
        out = talker.model(inputs_embeds=talker.emb_code[0](torch.tensor([[code]])), past_key_values=cache,
                           use_cache=True).last_hidden_state
    return Codes(codes, logits, False)
