"""A MiniCPM-o 4.5 export's plans: the thinker alone (text -> text) and the whole thinker (image +
audio + text -> text): the encoders as entry stages (style "minicpmo": the controller slices
images and cuts audio into 30 s pieces as the reference processors do) whose rows replace the
prompt's `<unk>`s, the thinker with plain positions. Both reply with thinking off (the release's
chat() default) and stop on `<|tts_eos|>` or `<|im_end|>`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omni_edge.export.models.minicpmo45.reference import NO_THINKING, STOP_TOKENS, Thinker
from omni_edge.files import write_text_atomic


def thinker_llm(llm: dict[str, Any]) -> dict[str, Any]:
    """The decoder export's llm section as MiniCPM-o 4.5 replies: thinking off, its stop tokens."""
    stops = list(dict.fromkeys([*STOP_TOKENS, *llm["stop_tokens"]]))
    return {**llm, "stop_tokens": stops, "chat_generation_prompt": NO_THINKING}


def rewrite_thinker_plan(path: Path) -> None:
    plan = json.loads(path.read_text())
    for stage in plan["stages"]:
        if "llm" in stage:
            stage["llm"] = thinker_llm(stage["llm"])
    write_text_atomic(path, json.dumps(plan, indent=2) + "\n")


def media_plan(path: Path, name: str, thinker: Thinker, thinker_plan: Path, vision: dict[str, str],
               audio: dict[str, Any]) -> Path:
    """The encoders (components vision-onnx, audio-onnx; their graph references) as entry stages
    feeding the thinker stage of `thinker_plan`."""
    hidden, patch = thinker.config.hidden, thinker.config.vision.patch
    queries = thinker.config.slices.query_num

    def encoder(stage_id: int, kind: str, modality: str, graphs: dict[str, str], **fields: Any) -> dict[str, Any]:
        return {"stage_id": stage_id, "model_stage": f"{kind}_encoder", "execution_type": "llm_generation",
                "input_sources": [], "engine_output_type": "embeddings", "artifact": f"{kind}-onnx",
                "encoder": {"modality": modality, "style": "minicpmo", "preprocessor": "preprocessor_config.json", "hidden_size": hidden,
                            **fields},
                "graphs": {"encoder": {"backend": "onnxruntime", "device": "cpu", "graphs": graphs}}}

    stage = json.loads(thinker_plan.read_text())["stages"][0]
    reader = {**stage, "stage_id": 2, "input_sources": [0, 1],
              "llm": {**thinker_llm(stage["llm"]), "media": {"config": "config.json", "style": "minicpmo"}}}
    # An encoder event carries one item's rows: the largest image's (its slices), or 30 s of audio.
    slices = 1 + thinker.config.slices.max_slices
    largest = max(slices * queries, audio["tokens"]) * hidden * 4
    plan = {"plan_version": 1, "name": f"{name} (image + audio -> text, onnx)",
            "stages": [encoder(0, "vision", "image", vision, input_width=3 * patch * patch, query_num=queries),
                       encoder(1, "audio", "audio", audio["graphs"], input_width=thinker.config.audio.mel_bins,
                               chunk_frames=audio["piece_frames"], pool_step=audio["pool_step"]),
                       reader],
            "stream_limits": {"max_events": 64, "max_bytes": max(1 << 20, 2 * largest)}}
    write_text_atomic(path, json.dumps(plan, indent=2) + "\n")
    return path
