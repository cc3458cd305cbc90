"""A text decoder's plan: its KV caches (buckets or a ring), the `llm` section the controller
reads, the thinker stage and the plan file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omni_edge.export.decoder.graphs import DecoderShape
from omni_edge.export.options import LlmExportOptions
from omni_edge.files import write_text_atomic

FP32_MASK_VALUE = -10000.0
# The precision a text decoder builds per target when none is asked for.
PRECISION_DEFAULTS = {"cpu": "fp32", "qnn-htp": "w8a16"}


def kv_caches(shape: DecoderShape, opts: LlmExportOptions) -> list[int]:
    """The cache sizes to build graphs for: the buckets (full KV) or the ring's window."""
    if shape.linear is not None and (opts.kv != "full" or opts.overflow != "refuse"):
        raise ValueError("a hybrid's attention layers attend to every position: a ring or a sliding window would drop "
                         "positions the model sees (--kv full --overflow refuse only); its Gated DeltaNet layers carry "
                         "fixed-size state whatever the context")
    if opts.kv == "full":
        if shape.sliding_window is not None:
            raise ValueError(f"this checkpoint uses sliding-window attention (window {shape.sliding_window}): "
                             "export it with --kv ring so the runtime keeps exactly that window")
        caches = sorted(set(opts.buckets))
        if not caches or caches[0] < opts.prefill_chunk:
            raise ValueError("every context bucket must hold at least one prefill chunk")
        return caches
    if opts.kv == "ring":
        window = opts.window or shape.sliding_window
        if window is None:
            raise ValueError("--kv ring needs --window, or a checkpoint with a sliding window")
        if shape.sliding_window is not None and window != shape.sliding_window:
            raise ValueError(f"--window {window} differs from the checkpoint's sliding window {shape.sliding_window}")
        if window < opts.prefill_chunk:
            raise ValueError("the ring window must hold at least one prefill chunk")
        return [window]
    raise ValueError(f"unknown KV mode {opts.kv!r} (full or ring)")


def shape_bucket(opts: LlmExportOptions, caches: list[int]) -> str:
    """The manifest's shape bucket: ring128-n32, ctx512-1024-n32."""
    bucket = "ring" + str(caches[0]) if opts.kv == "ring" else "ctx" + "-".join(map(str, caches))
    return f"{bucket}-n{opts.prefill_chunk}"


CHATML_STOPS = ("<|im_end|>", "<|endoftext|>")
# The chat formats the controller renders (controller_cpp/text/chat.h): the markers a template and
# vocabulary must hold for each, and its end-of-turn stop token.
CHAT_MARKERS = {"chatml": ("<|im_start|>", "<|im_end|>"),
                "llama3": ("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>")}
CHAT_STOPS = {"chatml": CHATML_STOPS, "llama3": ("<|eot_id|>",), "none": CHATML_STOPS}


def text_format(checkpoint: Path) -> tuple[str, list[str]]:
    """(chat_format, stop_tokens) of a checkpoint's tokenizer: "llama3" where its chat template
    uses Llama 3's header markers, "chatml" where it is ChatML (or where it has no template and its
    vocabulary holds ChatML's markers), each only if the vocabulary holds that format's markers;
    else "none" (`--chat` is then refused by name). The stop tokens are the format's end of turn
    and the checkpoint's end-of-sequence tokens that its vocabulary holds (the controller refuses
    a stop token it cannot find)."""
    tokenizer = json.loads((checkpoint / "tokenizer.json").read_text())
    vocab: dict[str, int] = dict(tokenizer.get("model", {}).get("vocab") or {})
    vocab.update({t["content"]: t["id"] for t in tokenizer.get("added_tokens", [])})
    by_id = {i: t for t, i in vocab.items()}

    def read(name: str) -> dict[str, Any]:
        path = checkpoint / name
        data = json.loads(path.read_text()) if path.is_file() else {}
        return data if isinstance(data, dict) else {}

    config, generation = read("tokenizer_config.json"), read("generation_config.json")
    template = str(config.get("chat_template") or "")
    if (checkpoint / "chat_template.jinja").is_file():
        template = (checkpoint / "chat_template.jinja").read_text()
    eos_ids = generation.get("eos_token_id", read("config.json").get("eos_token_id"))
    eos = [by_id.get(i) for i in (eos_ids if isinstance(eos_ids, list) else [eos_ids]) if isinstance(i, int)]
    named = config.get("eos_token")
    eos.append(named.get("content") if isinstance(named, dict) else named)
    fmt = "none"
    if "<|start_header_id|>" in template:
        # Llama 3.1+ templates add a dated system turn the controller does not render: --chat is
        # refused for them rather than given a different prompt.
        dated = "Cutting Knowledge Date" in template
        fmt = "llama3" if all(m in vocab for m in CHAT_MARKERS["llama3"]) and not dated else "none"
    elif "<|im_start|>" in (template or "<|im_start|>"):
        fmt = "chatml" if all(m in vocab for m in CHAT_MARKERS["chatml"]) else "none"
    stops = [t for t in dict.fromkeys([*CHAT_STOPS[fmt], *eos]) if isinstance(t, str) and t in vocab]
    return fmt, stops


def fused_attention(opts: LlmExportOptions) -> bool:
    """Whether the ONNX bodies attend with ONNX Runtime's fused GroupQueryAttention over the valid
    slots only (a step's cost follows the position, not the bucket): CPU graphs of a full cache that
    refuses to overflow. A ring's slots are not in position order (the kernel is causal by slot), and
    the HTP compiles only standard ops."""
    return opts.target == "cpu" and opts.attention == "fused" and opts.kv == "full" and opts.overflow == "refuse"


def kv_section(opts: LlmExportOptions, caches: list[int], fmt: str = "onnx") -> dict[str, Any]:
    """The plan's `kv`: a full cache's buckets or a ring's window, and how the graphs attend."""
    if opts.kv != "full":
        return {"mode": "ring", "window": caches[0]}
    kv: dict[str, Any] = {"mode": "full", "buckets": caches, "overflow": opts.overflow}
    if fmt == "onnx" and fused_attention(opts):
        kv["attention"] = "fused"
    return kv


def llm_section(shape: DecoderShape, opts: LlmExportOptions, caches: list[int], checkpoint: Path,
                fmt: str = "onnx") -> dict[str, Any]:
    kv = kv_section(opts, caches, fmt)
    chat_format, stops = text_format(checkpoint)
    if not stops:
        raise ValueError(f"{checkpoint}: no end-of-sequence token in the tokenizer's vocabulary")
    return {
        "tokenizer": "tokenizer.json", "chat_format": chat_format, "stop_tokens": stops,
        "hidden_size": shape.hidden, "num_layers": shape.attention_layers, "num_kv_heads": shape.kv_heads,
        "head_dim": shape.head_dim, "vocab_size": shape.vocab, "prefill_chunk": opts.prefill_chunk,
        "mask_value": FP32_MASK_VALUE, "kv": kv, "max_new_tokens": opts.max_new_tokens,
        "sampling": {"temperature": 0.0}, **recurrent_section(shape),
    }


# State sets a hybrid keeps: rewinds of up to HISTORY - 1 withheld tokens restore a set without a copy.
RECURRENT_HISTORY = 4


def recurrent_section(shape: DecoderShape) -> dict[str, Any]:
    """A hybrid's `recurrent`: its Gated DeltaNet layers' state shapes (nothing for a transformer)."""
    if shape.linear is None:
        return {}
    conv, state = shape.linear.state_shapes()
    return {"recurrent": {"layers": shape.linear_layers, "conv_state": conv[1:], "recurrent_state": state[1:],
                          "history": RECURRENT_HISTORY}}


def thinker_stage(component: str, llm: dict[str, Any], graphs: dict[str, Any]) -> dict[str, Any]:
    return {
        "stage_id": 0, "model_stage": "thinker", "execution_type": "llm_ar", "input_sources": [],
        "final_output": True, "final_output_type": "text", "engine_output_type": "text",
        "artifact": component, "llm": llm, "graphs": graphs,
    }


def write_plan(out: Path, name: str, stage: dict[str, Any], file: str = "") -> Path:
    """OUT/FILE (default plan.<component without thinker->.json) holding the one stage."""
    plan = {"plan_version": 1, "name": name, "stages": [stage],
            "stream_limits": {"max_events": 64, "max_bytes": 1 << 20}}
    path = out / (file or f"plan.{stage['artifact'].removeprefix('thinker-')}.json")
    write_text_atomic(path, json.dumps(plan, indent=2) + "\n")
    return path


def state_layout_version(shape: DecoderShape) -> int:
    """1: a KV cache; 2: a KV cache beside a hybrid's conv and recurrent states."""
    return 2 if shape.linear is not None else 1
