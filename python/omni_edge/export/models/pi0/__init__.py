"""π0 vision-language-action policies (transformers' PI0ForConditionalGeneration)."""

from omni_edge.export.architecture import Architecture

ARCHITECTURE = Architecture(
    name="pi0", model_types=("pi0",), task="policy", presets=("tiny", "small"),
    summary="a π0 vision-language-action policy: vision, prefix, action expert", package=__name__)
