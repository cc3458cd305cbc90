"""What an export is asked for. `TargetOptions`, whatever the model: the target (CPU runtimes or
the QNN HTP), the formats, the precision and its block size, the SoCs, the threads, validation.
One type per export command extends it with the task's own fields (a text LLM's buckets, a
speech model's stream shape, a policy's cameras) and says which precisions each target takes.
Every value is checked once, when the options are made, before any work; the architecture that
exports a checkpoint then refuses what it cannot build (omni_edge.export.registry)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from omni_edge.export.speech import StreamShape, Voice
from omni_edge.socs import SOCS

TARGETS = ("cpu", "qnn-htp")          # cpu: ONNX Runtime and/or ExecuTorch; qnn-htp: QNN context binaries per SoC
FORMATS = ("onnx", "pte")             # cpu: ONNX Runtime graphs, an ExecuTorch program
CPU_PRECISIONS = ("fp32", "int8", "int4")  # int8/int4: weights quantized in blocks (targets/cpu_quant.py)
QNN_PRECISIONS = ("w8a16", "w4a16", "a16w16", "fp16")  # the HTP recipes (targets/qnn_target.py)
BLOCK_PRECISIONS = ("int8", "int4")
MAX_THREADS = 1024


def formats_of(text: str) -> tuple[str, ...]:
    """--format onnx|pte|both as the formats to write ("both": ONNX first, it is plan.json)."""
    return FORMATS if text == "both" else (text,)


@dataclass(frozen=True)
class TargetOptions:
    TASK: ClassVar[str] = ""  # the export command these options belong to (llm, tts, policy)
    # The precisions each target takes, and the one it builds when none is asked for (no default:
    # the architecture chooses, and "" reaches it).
    PRECISIONS: ClassVar[dict[str, tuple[str, ...]]] = {"cpu": CPU_PRECISIONS, "qnn-htp": QNN_PRECISIONS}
    PRECISION_DEFAULTS: ClassVar[dict[str, str]] = {}

    formats: tuple[str, ...] = ("onnx",)
    target: str = "cpu"
    precision: str = ""
    block_size: int = 32                  # cpu int8/int4: weights per quantization block along K
    socs: tuple[str, ...] = ("sm8750",)   # qnn-htp: one component per SoC
    threads: int = 0                      # 0: every core
    validate: bool = True                 # False: no validation run (the artifact will not qualify)

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise ValueError(f"unknown target {self.target!r} ({', '.join(TARGETS)})")
        if not self.formats:
            raise ValueError("at least one format (onnx, pte)")
        for fmt in self.formats:
            if fmt not in FORMATS:
                raise ValueError(f"unknown format {fmt!r} ({', '.join(FORMATS)})")
        if not self.socs:
            raise ValueError("at least one SoC (--soc)")
        for soc in self.socs:
            if soc not in SOCS:
                raise ValueError(f"unknown SoC {soc!r} (known: {', '.join(SOCS)})")
        if not 0 <= self.threads <= MAX_THREADS:
            raise ValueError(f"--threads takes a whole number from 0 to {MAX_THREADS}, not {self.threads}")
        if not self.precision and self.PRECISION_DEFAULTS:
            object.__setattr__(self, "precision", self.PRECISION_DEFAULTS[self.target])
        allowed = self.PRECISIONS[self.target]
        if self.precision and self.precision not in allowed:
            raise ValueError(f"unknown precision {self.precision!r}: --target {self.target} takes --precision "
                             f"{', '.join(allowed)}")
        if self.target == "cpu" and self.precision in BLOCK_PRECISIONS:
            check_block_size(self.block_size)

    def precision_or(self, defaults: dict[str, str]) -> str:
        """The precision asked for, or the architecture's default for this target."""
        return self.precision or defaults[self.target]


def check_block_size(block_size: int) -> None:
    """MLAS's kernels take blocks of 16, 32, 64, ... weights."""
    if block_size < 16 or block_size & (block_size - 1):
        raise ValueError(f"--block-size {block_size}: a power of two, at least 16")


@dataclass(frozen=True)
class LlmExportOptions(TargetOptions):
    """`export llm`: a text decoder (and a multimodal thinker's encoders). The precision default is
    the architecture's: the text decoder builds fp32 / w8a16, a thinker's encoders fp16 on the HTP."""

    TASK: ClassVar[str] = "llm"

    prefill_chunk: int = 32
    buckets: tuple[int, ...] = (512, 1024)
    kv: str = "full"            # full | ring
    window: int | None = None   # ring: defaults to the checkpoint's sliding window
    overflow: str = "refuse"    # full: refuse | ring
    attention: str = "fused"    # CPU ONNX graphs of a full cache: fused (over the valid slots) | masked (the whole bucket)
    max_new_tokens: int = 256
    share_weights: bool = False  # qnn-htp: also a twin with prefill+decode in one weight-shared context
    keep_qdq: bool = False       # qnn-htp: keep the quantized source graphs (qdq/) for AI Hub compile jobs
    image_sizes: tuple[tuple[int, int], ...] = ((448, 448),)  # multimodal: a vision graph per size's patch grid
    voice: Path | None = None    # an omni thinker's speech: the voice prompt's WAV (None: the default)
    extra_metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TtsExportOptions(TargetOptions):
    """`export tts`: a talker, its code predictor and a chunked vocoder."""

    TASK: ClassVar[str] = "tts"
    PRECISION_DEFAULTS: ClassVar[dict[str, str]] = {"cpu": "fp32", "qnn-htp": "fp16"}

    prefill_chunk: int = 32
    buckets: tuple[int, ...] = (512, 1024)  # talker context: text prefix + frames
    stream: StreamShape = field(default_factory=StreamShape)
    validation_frames: int = 48
    voice: Voice = field(default_factory=Voice)  # a release's speaker, language and instruction
    vocoder_on_npu: bool = False  # qnn-htp: the vocoder windows on the HTP too (default: on the CPU)


@dataclass(frozen=True)
class PolicyExportOptions(TargetOptions):
    """`export policy`: a vision-language-action policy: float on the CPU; fp16 on the HTP, or
    w8a16 (InternVLA-A1: its decoders' weights at 8 bits)."""

    TASK: ClassVar[str] = "policy"
    PRECISIONS: ClassVar[dict[str, tuple[str, ...]]] = {"cpu": ("fp32",), "qnn-htp": ("fp16", "w8a16")}
    PRECISION_DEFAULTS: ClassVar[dict[str, str]] = {"cpu": "fp32", "qnn-htp": "fp16"}

    cameras: tuple[str, ...] = ()        # default: the architecture's cameras
    prompt_tokens: int = 0               # default: the architecture's text slots
    action_spec: Path | None = None
    max_observation_age_ms: float = 1000.0
