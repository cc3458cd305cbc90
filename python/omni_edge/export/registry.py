"""The one list of model architectures: what `make-checkpoint --arch` offers, which `export`
command takes a checkpoint, and which folder (export/models/<arch>/) builds it, found from the
checkpoint's own config.json (its model_type; InternVLA-A1's configs say `type`). Adding an architecture is a folder under
models/ with the same files as the others, and one line here."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from omni_edge.export import gguf
from omni_edge.export.architecture import Architecture
from omni_edge.export.models import internvla_a1, llama, minicpmo45, pi0, qwen2, qwen3, qwen3_5, qwen3_tts, qwen25_omni
from omni_edge.export.options import TargetOptions

ARCHITECTURES: tuple[Architecture, ...] = (
    qwen3.ARCHITECTURE,
    qwen3_5.ARCHITECTURE,
    qwen2.ARCHITECTURE,
    llama.ARCHITECTURE,
    qwen3_tts.ARCHITECTURE,
    qwen25_omni.ARCHITECTURE,
    minicpmo45.ARCHITECTURE,
    pi0.ARCHITECTURE,
    internvla_a1.ARCHITECTURE,
)
TASKS = ("llm", "tts", "policy")


def model_types(task: str | None = None) -> list[str]:
    """The config.json model_types the registry knows, or those one export command takes."""
    return [t for a in ARCHITECTURES if task in (None, a.task) for t in a.model_types]


def by_name(name: str) -> Architecture:
    for arch in ARCHITECTURES:
        if arch.name == name:
            return arch
    raise ValueError(f"unknown architecture {name!r} (available: {', '.join(a.name for a in ARCHITECTURES)})")


def of_checkpoint(checkpoint: Path) -> Architecture:
    """The architecture a checkpoint directory declares (config.json's model_type), or a
    ValueError naming what it is instead."""
    config = checkpoint / "config.json"
    if not config.is_file():
        raise ValueError(f"{checkpoint}: not a checkpoint directory (no config.json)")
    try:
        fields = json.loads(config.read_text())
        model_type = fields.get("model_type") or fields.get("type")
    except (OSError, ValueError, AttributeError) as exc:
        raise ValueError(f"{config}: not a readable config ({exc})") from None
    for arch in ARCHITECTURES:
        if model_type in arch.model_types:
            error = arch.config_error(fields, checkpoint) if arch.config_error else None
            if error:
                raise ValueError(error)
            return arch
    known = ", ".join(model_types())
    raise ValueError(f"{checkpoint}: model_type {model_type!r} is not supported (known: {known})")


def make_checkpoint(out: Path, arch: str = "qwen3", preset: str = "tiny", seed: int = 0, from_gguf: Path | None = None,
                    **flags: Any) -> Path:
    """`make-checkpoint`: the architecture's own maker; a flag it does not take (given, not None)
    is refused by name. `from_gguf`: a checkpoint dequantized from that file instead (its
    architecture is the file's)."""
    if from_gguf is not None:
        extra = sorted("--" + k.replace("_", "-") for k, v in flags.items() if v is not None)
        if extra:
            raise ValueError(f"--from-gguf takes the file's architecture and weights: not {', '.join(extra)}")
        return gguf.checkpoint_from_gguf(from_gguf, out)
    architecture = by_name(arch)
    given = {k: v for k, v in flags.items() if v is not None}
    refused = [k for k in given if k not in architecture.checkpoint_flags]
    if refused:
        takers = {a.name for a in ARCHITECTURES for k in refused if k in a.checkpoint_flags}
        names = ", ".join("--" + k.replace("_", "-") for k in refused)
        raise ValueError(f"{arch} checkpoints do not take {names}"
                         + (f" ({', '.join(sorted(takers))} does)" if takers else ""))
    result: Path = architecture.module("checkpoint").make_checkpoint(out, preset=preset, seed=seed, **given)
    return result


def export_checkpoint(checkpoint: Path, out: Path, opts: TargetOptions) -> Any:
    """`export llm|tts|policy`: the checkpoint's architecture exports it, if its options are that
    command's (LlmExportOptions, TtsExportOptions, PolicyExportOptions). A GGUF file is first
    dequantized into a checkpoint directory named after it, beside OUT, removed afterwards."""
    if gguf.is_gguf(checkpoint):
        if opts.TASK != "llm":  # refused before the slow conversion: GGUF files hold text LLMs only
            raise ValueError(f"{checkpoint}: a GGUF file holds a text LLM; export it with `omni-edge export llm`")
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".gguf-", dir=out.parent) as tmp:
            return export_checkpoint(gguf.checkpoint_from_gguf(checkpoint, Path(tmp) / checkpoint.stem), out, opts)
    arch = of_checkpoint(checkpoint)
    if arch.task != opts.TASK:
        raise ValueError(f"{checkpoint}: not a {' or '.join(model_types(opts.TASK))} checkpoint directory: it is a {arch.name} checkpoint "
                         f"({arch.summary}); export it with `omni-edge export {arch.task}`")
    return arch.module("export").export(checkpoint, out, opts)
