"""A speech export's plan and component, for every target: the options no export can honour,
the component's files, and the talker / code predictor / vocoder stages of its plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omni_edge.artifacts import new_component
from omni_edge.export.decoder.graphs import DecoderShape
from omni_edge.export.models.qwen3_tts.graphs import (
    MASK_VALUE,
    PREDICTOR_SLOTS,
    talker_shape,
)
from omni_edge.export.models.qwen3_tts.reference import (
    CODE_GROUPS,
    SAMPLE_RATE,
    SAMPLES_PER_FRAME,
    Qwen3Tts,
)
from omni_edge.export.models.qwen3_tts.validation import SPEECH_CPU_LIMITS
from omni_edge.export.options import TtsExportOptions


def check_options(opts: TtsExportOptions) -> None:
    """Refuse options no export can honour, before any work."""
    if opts.prefill_chunk < 1 or not opts.buckets or min(opts.buckets) < opts.prefill_chunk:
        raise ValueError("every talker bucket must hold at least one prefill chunk")
    if opts.validation_frames < 1:
        raise ValueError("validation needs at least one frame")
    if opts.precision not in ("fp32", *SPEECH_CPU_LIMITS):
        raise ValueError(f"--target cpu takes --precision fp32, {', '.join(SPEECH_CPU_LIMITS)}, not {opts.precision!r}")
    if opts.precision != "fp32" and set(opts.formats) != {"onnx"}:
        raise ValueError(f"--precision {opts.precision} is built for ONNX Runtime only (--format onnx): an "
                         "ExecuTorch speech program has no teacher-forced check to qualify it yet")


def speech_component(directory: Path, model: Qwen3Tts, checkpoint: Path, extra: tuple[Path, ...] = ()) -> Path:
    """`new_component` for a speech checkpoint, with its text tokenizer as tokenizer.json (a
    release's is converted from vocab.json + merges.txt)."""
    out = new_component(directory, checkpoint, extra, required=("config.json",))
    if not (out / "tokenizer.json").is_file():
        model.tokenizer.save(str(out / "tokenizer.json"))
    return out


def _decoder(s: DecoderShape, vocab: int, chunk: int, buckets: list[int]) -> dict[str, Any]:
    return {"hidden_size": s.hidden, "num_layers": s.layers, "num_kv_heads": s.kv_heads, "head_dim": s.head_dim,
            "vocab_size": vocab, "prefill_chunk": chunk, "mask_value": MASK_VALUE,
            "kv": {"mode": "full", "buckets": buckets, "overflow": "refuse"}}


def speech_plan(model: Qwen3Tts, component: str, files: dict[str, Any], opts: TtsExportOptions,
                backend: str = "onnxruntime", device: str = "cpu", devices: dict[str, str] | None = None) -> dict[str, Any]:
    """The two-stage plan: talker (with its code predictor) -> vocoder, in the Omni stage
    vocabulary; `files` maps each graph name to its plan reference (a file, or file + method).
    Every graph group runs on `device` but those `devices` names (group role -> device)."""
    C, buckets, windows = opts.prefill_chunk, sorted(set(opts.buckets)), opts.stream.windows

    def group(graphs: dict[str, Any], role: str) -> dict[str, Any]:
        return {"backend": backend, "device": (devices or {}).get(role, device), "graphs": graphs}

    ids, s, sampling = model.ids, opts.stream, model.sampling
    talker = {
        "stage_id": 0, "model_stage": "talker", "execution_type": "llm_ar", "input_sources": [],
        "engine_output_type": "codes", "artifact": component,
        "talker": {"tokenizer": "tokenizer.json", "text_pad_id": model.text_pad_id, "code_groups": CODE_GROUPS,
                   "codebook_size": ids.codebook_size, "codec_ids": {"pad": ids.pad, "bos": ids.bos, "eos": ids.eos},
                   "max_frames": 1500, "min_frames": model.min_frames, "prompt": model.prompt.to_json(),
                   "sampling": sampling.to_json(),
                   "decoder": _decoder(talker_shape(model.talker.model.config), ids.vocab, C, buckets),
                   "predictor": _decoder(talker_shape(model.talker.code_predictor.config), ids.codebook_size, 1,
                                         [PREDICTOR_SLOTS])},
        "graphs": {
            "embed": group({"chunk": files[f"talker_embed_n{C}"], "step": files["talker_embed_n1"]}, "embed"),
            "prefill": group({str(b): files[f"talker_prefill_s{b}"] for b in buckets}, "prefill"),
            "decode": group({str(b): files[f"talker_decode_s{b}"] for b in buckets}, "decode"),
            "embed_hidden": group({"step": files["talker_embed_hidden_n1"]}, "embed_hidden"),
            "head": group({"step": files["talker_head"]}, "head"),
            "predictor_embed": group({"step": files["predictor_embed_n1"]}, "predictor_embed"),
            "predictor_decode": group({str(PREDICTOR_SLOTS): files[f"predictor_decode_s{PREDICTOR_SLOTS}"]}, "predictor_decode"),
            "predictor_head": group({"step": files["predictor_head"]}, "predictor_head"),
        },
    }
    vocoder = {
        "stage_id": 1, "model_stage": "code2wav", "execution_type": "llm_generation", "input_sources": [0],
        "final_output": True, "final_output_type": "audio", "engine_output_type": "audio", "artifact": component,
        "vocoder": {"code_groups": CODE_GROUPS, "samples_per_frame": SAMPLES_PER_FRAME, "sample_rate": SAMPLE_RATE,
                    "tail_samples": model.tail_samples, "first_chunk": s.first, "chunk": s.chunk,
                    "left_context": s.left_context, "windows": list(windows), "pcm_dtype": "float32",
                    "schedule": s.schedule()},
        "graphs": {"vocoder": group({str(w): files[f"vocoder_w{w}"] for w in windows}, "vocoder")},
    }
    return {"plan_version": 1, "name": f"speech ({component})", "stages": [talker, vocoder],
            "stream_limits": {"max_events": 64, "max_bytes": 16 << 20}}
