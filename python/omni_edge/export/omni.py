"""The omni pipeline: a thinker (text LLM) plan and a speech plan joined into one three-stage
plan (thinker -> talker -> vocoder), and its PyTorch reference.

The talker of an omni speech checkpoint reads the thinker's hidden states: its text projection
takes the thinker's hidden size (`make-checkpoint --arch qwen3-tts --thinker CKPT`). The hidden
state handed on with each generated token is the thinker's last hidden state (before the final
norm) at the position that produced the token; the talker runs dual-track on them
(`qwen3_tts.stream_codes_from_hidden`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from omni_edge.files import write_text_atomic


def omni_plan(thinker_plan: Path, speech_plan: Path, out_dir: Path) -> dict[str, Any]:
    """The thinker (final output: text), the talker (reads it), the vocoder (reads the talker,
    final output: audio); a multimodal thinker plan's encoder stages come first, feeding the
    thinker as before. Artifact paths relative to `out_dir`."""
    thinker, speech = json.loads(thinker_plan.read_text()), json.loads(speech_plan.read_text())
    llm = [s for s in thinker["stages"] if "llm" in s]
    encoders = [s for s in thinker["stages"] if "encoder" in s]
    talker = [s for s in speech["stages"] if "talker" in s]
    vocoder = [s for s in speech["stages"] if "vocoder" in s]
    if len(llm) != 1 or len(talker) != 1 or len(vocoder) != 1 or len(encoders) + 1 != len(thinker["stages"]):
        raise ValueError("need a thinker plan with one llm stage (and encoder stages) and a speech plan with a talker "
                         "and a vocoder stage")

    def rebase(stage: dict[str, Any], plan: Path, stage_id: int, sources: list[int]) -> dict[str, Any]:
        artifact = (plan.parent / stage["artifact"]).resolve()
        return {**stage, "stage_id": stage_id, "input_sources": sources,
                "artifact": os.path.relpath(artifact, out_dir.resolve())}

    ids = {s["stage_id"]: i for i, s in enumerate(encoders)}  # encoders keep their order, renumbered from 0
    stages = [rebase(s, thinker_plan, ids[s["stage_id"]], [ids[i] for i in s["input_sources"]]) for s in encoders]
    first = len(stages)
    stages += [rebase(llm[0], thinker_plan, first, [ids[i] for i in llm[0]["input_sources"]]),
               rebase(talker[0], speech_plan, first + 1, [first]), rebase(vocoder[0], speech_plan, first + 2, [first + 1])]
    stages[first]["final_output"], stages[first]["final_output_type"] = True, "text"
    limits = [p["stream_limits"] for p in (thinker, speech) if "stream_limits" in p]
    return {"plan_version": 1, "name": f"omni ({thinker.get('name', '')} + {speech.get('name', '')})", "stages": stages,
            "stream_limits": {key: max(lim[key] for lim in limits) for key in limits[0]} if limits else None}


def write_omni_plan(thinker_plan: Path, speech_plan: Path, out_dir: Path) -> Path:
    """The plan; a thinker that hears (an audio encoder stage) also gets the voice activity
    detector of realtime sessions (`vad-onnx` beside the plan)."""
    from omni_edge.export.vad import export_vad, plan_section

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "plan.json"
    plan = omni_plan(thinker_plan, speech_plan, out_dir)
    if any(s.get("model_stage") == "audio_encoder" for s in plan["stages"]):
        plan["voice_activity"] = plan_section(path, export_vad(out_dir))
    write_text_atomic(path, json.dumps(plan, indent=2) + "\n")
    return path


@torch.no_grad()
def thinker_reference(checkpoint: Path, prompt_ids: list[int], max_new_tokens: int,
                      stop_ids: tuple[int, ...] = (), forced: list[int] | None = None) -> tuple[list[int], torch.Tensor]:
    """Greedy tokens of the thinker (transformers) and, for each, the last decoder layer's
    output (pre-norm) at the position that produced it: [n, hidden]. With `forced`, the tokens
    are those instead of its own picks (the hidden states along another run's path)."""
    from transformers import AutoModelForCausalLM, DynamicCache

    model: Any = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    model.eval()
    captured: list[torch.Tensor] = []
    hook = model.model.layers[-1].register_forward_hook(
        lambda _m, _i, out: captured.append((out[0] if isinstance(out, tuple) else out)[0, -1].clone()))
    try:
        cache = DynamicCache(config=model.config)
        ids = torch.tensor([prompt_ids])
        tokens: list[int] = []
        hidden: list[torch.Tensor] = []
        for step in range(max_new_tokens if forced is None else len(forced)):
            logits = model(input_ids=ids, cache=cache, use_cache=True).logits[0, -1]
            token = int(torch.argmax(logits)) if forced is None else forced[step]
            if token in stop_ids:
                break
            tokens.append(token)
            hidden.append(captured[-1])
            ids = torch.tensor([[token]])
    finally:
        hook.remove()
    return tokens, torch.stack(hidden) if hidden else torch.zeros(0, model.config.hidden_size)
