"""Llama text LLMs (transformers' LlamaForCausalLM: Llama 2 and 3.x with their RoPE scaling,
SmolLM2) through the shared text decoder."""

from omni_edge.export.architecture import Architecture

ARCHITECTURE = Architecture(
    name="llama", model_types=("llama",), task="llm", presets=("tiny",),
    summary="a Llama text LLM (Llama 3.x, SmolLM2)", package=__name__)
