"""MiniCPM-o 4.5 (openbmb/MiniCPM-o-4_5, as vLLM-Omni 0.30.0 serves it): a thinker of SigLIP
slices and a resampler, a Whisper audio encoder and a Qwen3 LLM; its talker and token2wav follow."""

from omni_edge.export.architecture import Architecture
from omni_edge.export.models.minicpmo45.config import version_error

ARCHITECTURE = Architecture(
    name="minicpmo-4.5", model_types=("minicpmo",), task="llm", presets=("tiny", "small"),
    summary="MiniCPM-o 4.5 (SigLIP slices + resampler, Whisper audio encoder, Qwen3 LLM)", package=__name__,
    config_error=version_error)
