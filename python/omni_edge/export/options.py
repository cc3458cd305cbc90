"""What every export is asked for, whatever the model: the target (CPU runtimes or the QNN HTP),
the formats, the precision and its block size, the SoCs and the threads. One type, checked once
when it is made; each family's options extend it with their own fields, and each family resolves
the precision it defaults to and refuses the ones it cannot build."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from omni_edge.socs import SOCS

TARGETS = ("cpu", "qnn-htp")        # cpu: ONNX Runtime and/or ExecuTorch; qnn-htp: QNN context binaries per SoC
FORMATS = ("onnx", "pte")           # cpu: ONNX Runtime graphs, an ExecuTorch program
BLOCK_PRECISIONS = ("int8", "int4")  # cpu precisions whose weights are quantized in blocks
MAX_THREADS = 1024


def formats_of(text: str) -> tuple[str, ...]:
    """--format onnx|pte|both as the formats to write ("both": ONNX first, it is plan.json)."""
    return FORMATS if text == "both" else (text,)


@dataclass(frozen=True)
class TargetOptions:
    TASK: ClassVar[str] = ""  # the export command a family's options belong to (llm, tts, policy)

    formats: tuple[str, ...] = ("onnx",)
    target: str = "cpu"
    precision: str = ""                   # "": the family's default for the target
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
        if self.target == "cpu" and self.precision in BLOCK_PRECISIONS:
            check_block_size(self.block_size)

    def precision_or(self, defaults: dict[str, str]) -> str:
        """The precision asked for, or the family's default for this target."""
        return self.precision or defaults[self.target]


def check_block_size(block_size: int) -> None:
    """MLAS's kernels take blocks of 16, 32, 64, ... weights."""
    if block_size < 16 or block_size & (block_size - 1):
        raise ValueError(f"--block-size {block_size}: a power of two, at least 16")
