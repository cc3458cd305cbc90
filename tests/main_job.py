"""Copies of what the main job made (`omni-edge demo`, see python/omni_edge/cli/demo.py): a
fixture takes one only when its record says it is what the fixture would make itself, which
saves the suite that work (the tiny checkpoint's 4 minutes of training, SmolLM2's dequantization
and exports)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from paths import ROOT


def copy_checkpoint(model: str, out: Path, accept: Callable[[dict[str, Any]], bool]) -> Path | None:
    """The demo's checkpoint of MODEL when `accept` takes its omni_edge_checkpoint.json (the record
    is written last, so the checkpoint is also complete)."""
    from omni_edge.cli.demo import MODELS
    from omni_edge.export.checkpoint import read_record

    made = ROOT / MODELS[model].workdir / MODELS[model].checkpoint
    try:
        record = read_record(made)
    except (OSError, ValueError):
        return None
    if not accept(record):
        return None
    shutil.copytree(made, out)
    return out


def copy_artifact(model: str, checkpoint: Path, out: Path, options: dict[str, Any]) -> Path | None:
    """The demo's text artifact of MODEL when its record (written after the export) is `options`,
    this checkpoint's record and this checkout's Python sources: the export the caller would make."""
    from omni_edge.cli.demo import EXPORT_RECORD, MODELS, export_record

    made = ROOT / MODELS[model].workdir / "artifact"
    try:
        record = json.loads((made / EXPORT_RECORD).read_text())
    except (OSError, ValueError):
        return None
    if record != export_record(checkpoint, options):  # the record holds the options it was made with
        return None
    shutil.copytree(made, out, ignore=shutil.ignore_patterns(EXPORT_RECORD))
    return out
