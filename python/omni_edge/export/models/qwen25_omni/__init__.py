"""Qwen2.5-Omni thinkers (transformers' Qwen2_5OmniThinkerForConditionalGeneration): vision and
audio encoders before an M-RoPE text decoder."""

from omni_edge.export.architecture import Architecture

ARCHITECTURE = Architecture(
    name="qwen2.5-omni", model_types=("qwen2_5_omni_thinker", "qwen2_5_omni"), task="llm", presets=("tiny", "small"),
    summary="a Qwen2.5-Omni thinker (vision and audio encoders, M-RoPE decoder)", package=__name__)
