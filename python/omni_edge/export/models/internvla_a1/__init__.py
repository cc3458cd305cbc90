"""InternVLA-A1 vision-language-action policies (vLLM-Omni's InternVLAA1Policy): Qwen3-VL
understanding, Cosmos-encoded frame history ("foresight" generation expert), a flow-matching
action expert, all three sharing attention."""

from omni_edge.export.architecture import Architecture

ARCHITECTURE = Architecture(
    name="internvla-a1", model_types=("internvla_a1",), task="policy", presets=("tiny", "small"),
    summary="an InternVLA-A1 policy: Qwen3-VL vision and prefix, Cosmos frame history, action expert",
    package=__name__)
