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


def media_plan(path: Path, name: str, thinker: Thinker, thinker_plan: Path, vision: dict[str, Any],
               audio: dict[str, Any], fmt: str = "onnx") -> Path:
    """The encoders (components vision-<fmt>, audio-<fmt>; their graph references) as entry stages
    feeding the thinker stage of `thinker_plan`."""
    backend = "onnxruntime" if fmt == "onnx" else "executorch"
    hidden, patch = thinker.config.hidden, thinker.config.vision.patch
    queries = thinker.config.slices.query_num

    def encoder(stage_id: int, kind: str, modality: str, graphs: dict[str, Any], **fields: Any) -> dict[str, Any]:
        return {"stage_id": stage_id, "model_stage": f"{kind}_encoder", "execution_type": "llm_generation",
                "input_sources": [], "engine_output_type": "embeddings", "artifact": f"{kind}-{fmt}",
                "encoder": {"modality": modality, "style": "minicpmo", "preprocessor": "preprocessor_config.json", "hidden_size": hidden,
                            **fields},
                "graphs": {"encoder": {"backend": backend, "device": "cpu", "graphs": graphs}}}

    stage = json.loads(thinker_plan.read_text())["stages"][0]
    reader = {**stage, "stage_id": 2, "input_sources": [0, 1],
              "llm": {**thinker_llm(stage["llm"]), "media": {"config": "config.json", "style": "minicpmo"}}}
    # An encoder event carries one item's rows: the largest image's (its slices), or 30 s of audio.
    slices = 1 + thinker.config.slices.max_slices
    largest = max(slices * queries, audio["tokens"]) * hidden * 4
    plan = {"plan_version": 1, "name": f"{name} (image + audio -> text, {fmt})",
            "stages": [encoder(0, "vision", "image", vision, input_width=3 * patch * patch, query_num=queries),
                       encoder(1, "audio", "audio", audio["graphs"], input_width=thinker.config.audio.mel_bins,
                               chunk_frames=audio["piece_frames"], pool_step=audio["pool_step"]),
                       reader],
            "stream_limits": {"max_events": 64, "max_bytes": max(1 << 20, 2 * largest)}}
    write_text_atomic(path, json.dumps(plan, indent=2) + "\n")
    return path


# deploy/minicpmo_4_5.yaml's talker sampling (the release's TTSSamplingParams).
TALKER_SAMPLING = {"temperature": 0.8, "top_p": 0.85, "top_k": 25, "repetition_penalty": 1.05, "seed": 42}
REPETITION_WINDOW = 16  # the release's penalty counts the last 16 codes


def omni_plan(path: Path, name: str, whole: Path, talker_plan: Path, talker: Any, thinker_hidden: int,
              code2wav: dict[str, Any], rows: tuple[Any, Any] = ("condition.onnx", "text_embed.onnx")) -> Path:
    """vLLM-Omni's topology for MiniCPM-o 4.5: the whole thinker's plan (`whole`: encoders, then
    the thinker, its reply spoken: the prompt ends in `<|tts_bos|>`), the talker (family codec_lm,
    component talker-onnx: the graphs of `talker_plan` and its condition graphs) reading the
    thinker's reply, and the code2wav stage `code2wav` reading the talker's codes; `rows`: the
    references of the talker's condition and text_embed graphs."""
    from omni_edge.export.models.minicpmo45.reference import SPEECH_START
    from omni_edge.export.models.minicpmo45.talker import MIN_CODES

    plan = json.loads(whole.read_text())
    thinker = plan["stages"][-1]
    thinker["llm"] = {**thinker["llm"], "chat_generation_prompt": NO_THINKING + SPEECH_START, "closing_state": True}
    source = json.loads(talker_plan.read_text())["stages"][0]
    llm = source["llm"]
    decoder = {k: llm[k] for k in ("hidden_size", "num_layers", "num_kv_heads", "head_dim", "vocab_size", "prefill_chunk",
                                   "mask_value", "kv")}
    group = next(iter(source["graphs"].values()))

    def graph(ref: Any) -> dict[str, Any]:
        return {"backend": group["backend"], "device": group["device"], "graphs": {"step": ref}}

    speaker = {"stage_id": thinker["stage_id"] + 1, "model_stage": "talker", "execution_type": "llm_ar",
               "input_sources": [thinker["stage_id"]], "engine_output_type": "codes", "artifact": source["artifact"],
               "codec_lm": {"decoder": decoder, "end_code": talker.config.eos, "min_codes": MIN_CODES, "max_codes": 4096,
                            "text_eos": talker.config.text_eos, "audio_bos": talker.config.audio_bos,
                            "text_vocab": talker.config.text_tokens,
                            "thinker_hidden": thinker_hidden, "sampling": TALKER_SAMPLING,
                            "repetition_window": REPETITION_WINDOW},
               "graphs": {**source["graphs"], "condition": graph(rows[0]), "text_embed": graph(rows[1])}}
    plan["stages"] += [speaker, {**code2wav, "stage_id": speaker["stage_id"] + 1, "input_sources": [speaker["stage_id"]]}]
    plan["name"] = f"{name} (image + audio + text -> text + speech, {group['backend']})"
    # A window's samples (28 codes: 1.16 s at 24 kHz, float32) is the largest event after the encoders'.
    plan["stream_limits"] = {**plan["stream_limits"], "max_events": 256}
    write_text_atomic(path, json.dumps(plan, indent=2) + "\n")
    return path
