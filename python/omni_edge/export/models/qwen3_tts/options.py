"""`omni-edge export tts`'s options: the target's (TargetOptions) and the speech stages' own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from omni_edge.export.models.qwen3_tts.reference import StreamShape, Voice
from omni_edge.export.options import TargetOptions

# The precision each target builds when none is asked for.
PRECISION_DEFAULTS = {"cpu": "fp32", "qnn-htp": "fp16"}


@dataclass(frozen=True)
class TtsExportOptions(TargetOptions):
    TASK: ClassVar[str] = "tts"

    prefill_chunk: int = 32
    buckets: tuple[int, ...] = (512, 1024)  # talker context: text prefix + frames
    stream: StreamShape = field(default_factory=StreamShape)
    validation_frames: int = 48
    voice: Voice = field(default_factory=Voice)  # a release's speaker, language and instruction
    vocoder_on_npu: bool = False  # qnn-htp: the vocoder windows on the HTP too (default: on the CPU)
