"""`omni-edge export llm`'s options: the target's (TargetOptions) and a text decoder's own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from omni_edge.export.options import TargetOptions

# The precision each target builds when none is asked for.
PRECISION_DEFAULTS = {"cpu": "fp32", "qnn-htp": "w8a16"}


@dataclass(frozen=True)
class LlmExportOptions(TargetOptions):
    TASK: ClassVar[str] = "llm"

    prefill_chunk: int = 32
    buckets: tuple[int, ...] = (512, 1024)
    kv: str = "full"            # full | ring
    window: int | None = None   # ring: defaults to the checkpoint's sliding window
    overflow: str = "refuse"    # full: refuse | ring
    max_new_tokens: int = 256
    share_weights: bool = False  # qnn-htp: also a twin with prefill+decode in one weight-shared context
    keep_qdq: bool = False       # qnn-htp: keep the quantized source graphs (qdq/) for AI Hub compile jobs
    image_sizes: tuple[tuple[int, int], ...] = ((448, 448),)  # multimodal: a vision graph per size's patch grid
    extra_metadata: dict[str, Any] = field(default_factory=dict)
