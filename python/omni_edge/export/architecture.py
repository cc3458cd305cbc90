"""An architecture's registry entry: its name, the config.json model_types that declare it, the
export command that takes it, its presets, and the folder that builds it."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Architecture:
    name: str                     # make-checkpoint --arch
    model_types: tuple[str, ...]  # the config.json model_type values of its checkpoints
    task: str                     # the export command that takes it: llm | tts | policy
    presets: tuple[str, ...]      # make-checkpoint --preset
    summary: str                  # one line for --help
    package: str                  # its folder: checkpoint.make_checkpoint, export.export
    checkpoint_flags: tuple[str, ...] = ()  # make-checkpoint's optional flags it takes
    # Why a config of its model_type is still not it (another generation sharing the model_type),
    # or None: config.json's dict and where it was read.
    config_error: Callable[[dict[str, Any], object], str | None] | None = None

    def module(self, name: str) -> Any:
        """Its module `name` (checkpoint, reference, export, ...), imported on first use."""
        return importlib.import_module(f"{self.package}.{name}")
