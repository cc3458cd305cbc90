"""The decoder of Qwen3-TTS's 12 Hz speech tokenizer (`speech_tokenizer/` of a Qwen3-TTS
release, model_type "qwen3_tts_tokenizer_12hz"): 16 codes per frame -> 1920 samples at 24 kHz.

It is Qwen3-Omni's Code2Wav with a different front and narrower transformer:
  codes      a split residual VQ: codebook 0 and codebooks 1..15 are two quantizers, each a sum
             of codebook rows (a row is embedding_sum / cluster_usage) projected by a 1x1 conv;
             the two are added, then a causal conv (kernel 3) widens them to `latent_dim`.
  transformer  Omni's sliding-window code2wav transformer at `hidden_size`, entered and left
             through linear projections from and to `latent_dim`.
  upsampling Omni's ConvNeXt upsampler and SnakeBeta decoder blocks at `latent_dim`, except that
             each transposed conv trims its overhang from the right only: every output sample
             depends only on frames at or before it, so a frame's samples are final when it is
             decoded (no tail waits for the next frame).
The transformer, upsampler and decoder blocks are transformers' Qwen3-Omni classes; parameter
names are the release's (`decoder.*` in speech_tokenizer/model.safetensors), so its weights load
as they are.
"""

from __future__ import annotations

import importlib
from typing import Any

import torch
from torch import nn

MODEL_TYPE = "qwen3_tts_tokenizer_12hz"
EPSILON = 1e-5  # cluster_usage floor of a codebook row


class _Codebook(nn.Module):
    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        self.cluster_usage = nn.Parameter(torch.ones(size), requires_grad=False)
        self.embedding_sum = nn.Parameter(torch.zeros(size, dim), requires_grad=False)

    def table(self) -> torch.Tensor:
        return self.embedding_sum / self.cluster_usage.clamp(min=EPSILON)[:, None]


class _CodebookLayer(nn.Module):
    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        self._codebook = _Codebook(size, dim)


class _Layers(nn.Module):
    def __init__(self, n: int, size: int, dim: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(_CodebookLayer(size, dim) for _ in range(n))


class _ResidualVq(nn.Module):
    """n codebooks whose rows are summed, then projected dim -> out (1x1 conv, no bias). The
    input projection is the encoder's; it is kept so that the release's weights load exactly."""

    def __init__(self, n: int, size: int, dim: int, out: int) -> None:
        super().__init__()
        self.vq = _Layers(n, size, dim)
        self.input_proj = nn.Conv1d(out, dim, 1, bias=False)
        self.output_proj = nn.Conv1d(dim, out, 1, bias=False)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, n, T] -> [B, out, T]."""
        layers: list[_CodebookLayer] = list(self.vq.layers)  # type: ignore[arg-type]
        total = sum(layer._codebook.table()[codes[:, i]] for i, layer in enumerate(layers))
        assert isinstance(total, torch.Tensor)
        out: torch.Tensor = self.output_proj(total.transpose(1, 2))
        return out


class _SplitResidualVq(nn.Module):
    def __init__(self, groups: int, size: int, dim: int, out: int) -> None:
        super().__init__()
        self.rvq_first = _ResidualVq(1, size, dim, out)
        self.rvq_rest = _ResidualVq(groups - 1, size, dim, out)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        return self.rvq_first.decode(codes[:, :1]) + self.rvq_rest.decode(codes[:, 1:])


def _omni_config(c: dict[str, Any]) -> Any:
    """The decoder config in the terms of transformers' Qwen3-Omni Code2Wav classes."""
    from transformers.models.qwen3_omni_moe.configuration_qwen3_omni_moe import Qwen3OmniMoeCode2WavConfig

    config = Qwen3OmniMoeCode2WavConfig(
        codebook_size=c["codebook_size"], hidden_size=c["hidden_size"], intermediate_size=c["intermediate_size"],
        num_hidden_layers=c["num_hidden_layers"], num_attention_heads=c["num_attention_heads"],
        num_key_value_heads=c["num_key_value_heads"], sliding_window=c["sliding_window"],
        rms_norm_eps=c.get("rms_norm_eps", 1e-5), layer_scale_initial_scale=c.get("layer_scale_initial_scale", 0.01),
        max_position_embeddings=c.get("max_position_embeddings", 8000), hidden_act=c.get("hidden_act", "silu"),
        attention_bias=c.get("attention_bias", False), num_quantizers=c["num_quantizers"],
        upsample_rates=list(c["upsample_rates"]), upsampling_ratios=list(c["upsampling_ratios"]),
        decoder_dim=c["decoder_dim"], rope_parameters={"rope_type": "default", "rope_theta": c.get("rope_theta", 10000)})
    config.head_dim = int(c.get("head_dim", c["hidden_size"] // c["num_attention_heads"]))
    return config


class Qwen3TtsCodecDecoder(nn.Module):
    """codes [B, 16, T] -> wav [B, 1, T x 1920] in [-1, 1] (`forward`)."""

    def __init__(self, decoder_config: dict[str, Any]) -> None:
        omni: Any = importlib.import_module("transformers.models.qwen3_omni_moe.modeling_qwen3_omni_moe")

        super().__init__()
        c = decoder_config
        self.config = _omni_config(c)
        self.config._attn_implementation = "eager"
        latent, dim = int(c["latent_dim"]), int(c["codebook_dim"])
        self.groups = int(c["num_quantizers"])
        self.quantizer = _SplitResidualVq(self.groups, int(c["codebook_size"]), dim // 2, dim)
        self.pre_conv = omni.Qwen3OmniMoeCausalConvNet(dim, latent, 3)
        self.pre_transformer: Any = omni.Qwen3OmniMoeCode2WavTransformerModel(self.config)
        self.pre_transformer.input_proj = nn.Linear(latent, self.config.hidden_size)
        self.pre_transformer.output_proj = nn.Linear(self.config.hidden_size, latent)
        self.upsample = nn.ModuleList(
            nn.ModuleList([omni.Qwen3OmniMoeCausalTransConvNet(latent, latent, f, f),
                           omni.Qwen3OmniMoeConvNeXtBlock(latent)])
            for f in self.config.upsampling_ratios)
        blocks: list[nn.Module] = [omni.Qwen3OmniMoeCausalConvNet(latent, self.config.decoder_dim, 7)]
        for i in range(len(self.config.upsample_rates)):
            block = omni.Qwen3OmniMoeCode2WavDecoderBlock(self.config, i)
            up = block.block[1]  # the transposed conv: trim its overhang from the right only (causal)
            up.left_pad, up.right_pad = 0, up.conv.kernel_size[0] - up.conv.stride[0]
            blocks.append(block)
        out_dim = self.config.decoder_dim // 2 ** len(self.config.upsample_rates)
        blocks += [omni.Qwen3OmniMoeSnakeBeta(out_dim), omni.Qwen3OmniMoeCausalConvNet(out_dim, 1, 7)]
        self.decoder = nn.ModuleList(blocks)
        self.total_upsample = 1
        for f in [*self.config.upsample_rates, *self.config.upsampling_ratios]:
            self.total_upsample *= int(f)

    def forward(self, codes: torch.Tensor, attention_mask: Any = None, position_ids: Any = None) -> torch.Tensor:
        """`attention_mask` / `position_ids`: the transformer's, when given explicitly (export)."""
        if codes.shape[1] != self.groups:
            raise ValueError(f"expected {self.groups} codebooks, got {codes.shape[1]}")
        hidden = self.pre_conv(self.quantizer.decode(codes)).transpose(1, 2)
        t = self.pre_transformer
        hidden = t(inputs_embeds=t.input_proj(hidden), attention_mask=attention_mask,
                   position_ids=position_ids).last_hidden_state
        hidden = t.output_proj(hidden).permute(0, 2, 1)
        for up in self.upsample:
            for block in up:  # type: ignore[attr-defined]
                hidden = block(hidden)
        for block in self.decoder:
            hidden = block(hidden)
        wav: torch.Tensor = hidden.clamp(min=-1, max=1)
        return wav
