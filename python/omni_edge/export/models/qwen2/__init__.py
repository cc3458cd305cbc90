"""Qwen2 / Qwen2.5 text LLMs (transformers' Qwen2ForCausalLM: q/k/v biases, no q/k norms)
through the shared text decoder."""

from omni_edge.export.architecture import Architecture

ARCHITECTURE = Architecture(
    name="qwen2", model_types=("qwen2",), task="llm", presets=("tiny",),
    summary="a Qwen2 / Qwen2.5 text LLM", package=__name__)
