"""A Qwen2.5-Omni export's plan and components, for every target: the encoders as entry stages
feeding the thinker, the files each encoder component carries, their identity and manifests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from omni_edge.artifacts import write_validated
from omni_edge.contracts import ValidationReport
from omni_edge.export.models.qwen25_omni.reference import Thinker, processors
from omni_edge.files import write_text_atomic

PREPROCESSOR = ("tokenizer.json", "config.json", "preprocessor_config.json")  # what each encoder component needs


THINKER_CONFIG = "thinker_config.json"


ENCODER_SQNR_DB = 60.0  # fp32 graphs vs the transformers modules: summation order only (measured 120-145 dB)


def image_grid(checkpoint: Path, width: int, height: int) -> tuple[int, int, int]:
    """The (t, h, w) patch grid the checkpoint's image processor gives an image of that size."""
    from PIL import Image

    grid = processors(checkpoint).image(images=[Image.new("RGB", (width, height))], return_tensors="np")["image_grid_thw"][0]
    return int(grid[0]), int(grid[1]), int(grid[2])


def component_identity(checkpoint: Path, bucket: str) -> dict[str, str]:
    revision = json.loads((checkpoint / "config.json").read_text()).get("_name_or_path", "") or "local"
    return dict(checkpoint_id=checkpoint.name, checkpoint_revision=revision, precision="fp32", shape_bucket=bucket,
                target_abi="x86_64-linux")


def write_component_manifest(cdir: Path, component: str, identity: dict[str, str], numerical: ValidationReport,
              task: ValidationReport, extra: dict[str, Any]) -> None:
    from onnxruntime import __version__ as ort_version

    write_validated(cdir, component, identity, numerical, task, runtime="onnxruntime", runtime_version=ort_version,
                    compiler_version=f"torch-{torch.__version__}", extra_metadata=extra)


def multimodal_plan(path: Path, name: str, thinker: Thinker, thinker_stage: dict[str, Any], vision: dict[str, Any],
                    audio: dict[str, Any], chunk_frames: int, grids: list[tuple[int, int, int]], fmt: str = "onnx",
                    backend: str = "onnxruntime") -> Path:
    """The image and audio encoders (components vision-FMT, audio-FMT; their graph references) as
    entry stages whose rows feed the thinker."""
    hidden = int(thinker.config.text_config.hidden_size)
    v = thinker.config.vision_config
    widths = {"image": v.in_channels * v.temporal_patch_size * v.patch_size ** 2,
              "audio": thinker.config.audio_config.num_mel_bins}

    def encoder(stage_id: int, kind: str, modality: str, graphs: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {"stage_id": stage_id, "model_stage": f"{kind}_encoder", "execution_type": "llm_generation", "input_sources": [],
                "engine_output_type": "embeddings", "artifact": f"{kind}-{fmt}",
                "encoder": {"modality": modality, "preprocessor": "preprocessor_config.json", "hidden_size": hidden,
                            "input_width": widths[modality], **extra},
                "graphs": {"encoder": {"backend": backend, "device": "cpu", "graphs": graphs}}}

    reader = {**thinker_stage, "stage_id": 2, "input_sources": [0, 1],
              "llm": {**thinker_stage["llm"], "media": {"config": THINKER_CONFIG}}}
    # An encoder event carries one item's rows: the largest image's, or 30 s of audio (750 tokens).
    largest = max([g[0] * g[1] * g[2] // 4 for g in grids] + [750]) * hidden * 4
    plan = {"plan_version": 1, "name": f"{name} (image + audio -> text, {fmt})",
            "stages": [encoder(0, "vision", "image", vision),
                       encoder(1, "audio", "audio", audio, chunk_frames=chunk_frames), reader],
            "stream_limits": {"max_events": 64, "max_bytes": max(1 << 20, 2 * largest)}}
    write_text_atomic(path, json.dumps(plan, indent=2) + "\n")
    return path
