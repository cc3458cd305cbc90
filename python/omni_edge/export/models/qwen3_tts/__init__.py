"""Qwen3-TTS speech models (the `qwen-tts` release layout, or a local one): talker, 15-codebook
code predictor, 12 Hz vocoder."""

from omni_edge.export.architecture import Architecture

ARCHITECTURE = Architecture(
    name="qwen3-tts", model_types=("qwen3_tts",), task="tts", presets=("tiny", "small"),
    summary="a Qwen3-TTS speech model: talker, code predictor, vocoder", package=__name__,
    checkpoint_flags=("thinker",))
