"""Qwen3.5-style hybrid text LLMs (transformers' Qwen3_5ForCausalLM: three Gated DeltaNet
linear-attention layers to each gated full-attention layer, partial RoPE) through the shared
text decoder, with each linear layer's conv and recurrent state carried beside the KV cache."""

from omni_edge.export.architecture import Architecture

ARCHITECTURE = Architecture(
    name="qwen3.5", model_types=("qwen3_5_text", "qwen3_5"), task="llm", presets=("tiny", "bench"),
    summary="a Qwen3.5 hybrid text LLM (Gated DeltaNet + gated attention)", package=__name__)
