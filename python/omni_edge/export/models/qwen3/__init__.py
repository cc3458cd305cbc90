"""Qwen3 text LLMs (transformers' Qwen3ForCausalLM) through the shared text decoder."""

from omni_edge.export.architecture import Architecture

ARCHITECTURE = Architecture(
    name="qwen3", model_types=("qwen3",), task="llm", presets=("tiny", "small", "bench"),
    summary="a Qwen3 text LLM", package=__name__, checkpoint_flags=("sliding_window", "train_steps"))
