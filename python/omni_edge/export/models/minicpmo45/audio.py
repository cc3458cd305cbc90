"""MiniCPM-o 4.5's audio path, as vLLM-Omni 0.30.0 runs it offline (get_audio_hidden_states):
Whisper log-mel features (80 bins, 100 frames a second; each 30 s piece on its own), a Whisper
encoder whose attention is block-causal over 1 s blocks (every frame sees its own block and all
earlier ones), a two-layer projector into the LLM's width, then average pooling by
audio_pool_step: 10 embeddings a second. The projector runs before the pooling."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from omni_edge.export.models.minicpmo45.config import AudioConfig
from omni_edge.export.models.minicpmo45.vision import _Attention

SAMPLE_RATE = 16000
HOP = 160
PIECE_SECONDS = 30  # the feature extractor's window: longer audio is encoded piece by piece


def encoder_frames(mel_frames: int) -> int:
    return (mel_frames - 1) // 2 + 1


def audio_tokens(mel_frames: int, pool_step: int) -> int:
    """Embeddings of a piece of `mel_frames` frames (the reference's _get_feat_extract_output_lengths)."""
    return (encoder_frames(mel_frames) - pool_step) // pool_step + 1


def placeholder_count(samples: int, pool_step: int) -> int:
    """The `<unk>`s an audio of `samples` (16 kHz) stands for in the prompt: counted on the whole
    clip, as the reference's processor does."""
    return audio_tokens(math.ceil(samples / HOP), pool_step)


def audio_placeholder(samples: int, pool_step: int) -> str:
    return "<|audio_start|>" + "<unk>" * placeholder_count(samples, pool_step) + "<|audio_end|>"


def log_mel_pieces(samples: np.ndarray, mel_bins: int) -> list[np.ndarray]:
    """Each 30 s piece's log-mel features [mel_bins, ceil(n/160)] by transformers' Whisper
    extractor (the piece padded to 30 s, the padding's frames cut off: the release processor's
    dynamic-range mode is this)."""
    from transformers import WhisperFeatureExtractor

    extractor_class: Any = WhisperFeatureExtractor
    extractor = extractor_class(feature_size=mel_bins, sampling_rate=SAMPLE_RATE, hop_length=HOP)
    step = PIECE_SECONDS * SAMPLE_RATE
    pieces = [samples[i:i + step] for i in range(0, max(len(samples), 1), step)]
    out = []
    for piece in pieces:
        got = extractor(piece, sampling_rate=SAMPLE_RATE, return_attention_mask=True, padding="max_length",
                        return_tensors="np")
        frames = int(got["attention_mask"][0].sum())
        out.append(np.ascontiguousarray(got["input_features"][0, :, :frames], np.float32))
    return out


def block_causal_mask(frames: int, block: int) -> torch.Tensor:
    """[frames, frames]: 0 where frame i may attend to frame j (j before the end of i's block),
    -inf elsewhere; all zeros when block is 0 (full attention)."""
    if block <= 0:
        return torch.zeros(frames, frames)
    idx = torch.arange(frames)
    end = torch.clamp((idx // block + 1) * block, max=frames)
    allowed = idx[None, :] < end[:, None]
    return torch.zeros(frames, frames).masked_fill(~allowed, float("-inf"))


class _WhisperLayer(nn.Module):
    def __init__(self, c: AudioConfig) -> None:
        super().__init__()
        self.self_attn = _Attention(c.width, c.heads, k_bias=False)
        self.self_attn_layer_norm, self.final_layer_norm = nn.LayerNorm(c.width), nn.LayerNorm(c.width)
        self.fc1, self.fc2 = nn.Linear(c.width, c.ffn), nn.Linear(c.ffn, c.width)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.self_attn_layer_norm(x), mask)
        out: torch.Tensor = x + self.fc2(F.gelu(self.fc1(self.final_layer_norm(x))))
        return out


class AudioEncoder(nn.Module):
    """Whisper's encoder over one piece's mel [1, bins, T] -> [1, (T-1)//2+1, width] (names as
    the release's `apm.*`)."""

    def __init__(self, c: AudioConfig) -> None:
        super().__init__()
        self.config = c
        self.conv1 = nn.Conv1d(c.mel_bins, c.width, 3, padding=1)
        self.conv2 = nn.Conv1d(c.width, c.width, 3, stride=2, padding=1)
        self.embed_positions = nn.Embedding(c.max_positions, c.width)
        self.layers = nn.ModuleList(_WhisperLayer(c) for _ in range(c.layers))
        self.layer_norm = nn.LayerNorm(c.width)

    def forward(self, mel: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = F.gelu(self.conv2(F.gelu(self.conv1(mel)))).transpose(1, 2)
        x = x + self.embed_positions.weight[: x.shape[1]]
        for layer in self.layers:
            x = layer(x, mask)
        out: torch.Tensor = self.layer_norm(x)
        return out


class Projector(nn.Module):
    """`audio_projection_layer.*`: linear, ReLU, linear."""

    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(width, hidden), nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.linear2(F.relu(self.linear1(x)))
        return out


class PieceEncoder(nn.Module):
    """One piece of T mel frames -> its embeddings [1, audio_tokens(T), hidden]: encoder with the
    block-causal mask, projector, average pooling (what one exported graph computes, per T)."""

    def __init__(self, encoder: AudioEncoder, projector: Projector, mel_frames: int) -> None:
        super().__init__()
        self.encoder, self.projector = encoder, projector
        c = encoder.config
        self.pool, self.tokens = c.pool_step, audio_tokens(mel_frames, c.pool_step)
        self.register_buffer("mask", block_causal_mask(encoder_frames(mel_frames), c.chunk_frames), persistent=False)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        x = self.projector(self.encoder(mel, self.mask))
        return F.avg_pool1d(x.transpose(1, 2), self.pool, self.pool).transpose(1, 2)[:, : self.tokens]
