"""`omni-edge export policy`'s options: the target's (TargetOptions) and a policy's own."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from omni_edge.export.options import TargetOptions

# The precision each target builds when none is asked for.
PRECISION_DEFAULTS = {"cpu": "fp32", "qnn-htp": "fp16"}


@dataclass(frozen=True)
class PolicyExportOptions(TargetOptions):
    TASK: ClassVar[str] = "policy"

    cameras: tuple[str, ...] = ()        # default: DEFAULT_CAMERAS
    prompt_tokens: int = 0               # default: PROMPT_TOKENS
    action_spec: Path | None = None
    max_observation_age_ms: float = 1000.0
