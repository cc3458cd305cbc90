"""An architecture's registry entry: its name, the config.json model_types that declare it, the
export command that takes it, its presets, and the folder that builds it."""

from __future__ import annotations

import importlib
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

    def module(self, name: str) -> Any:
        """Its module `name` (checkpoint, reference, export, ...), imported on first use."""
        return importlib.import_module(f"{self.package}.{name}")
