"""GGUF files (llama.cpp's format) as checkpoints: transformers' GGUF loader dequantizes the
weights to float32 and rebuilds the tokenizer and chat template from the file's metadata; the
result is an ordinary checkpoint directory (config.json + model.safetensors + tokenizer.json) whose
omni_edge_checkpoint.json records where it came from: the file, its SHA-256 and the tensor types
its weights were dequantized from (Q4_1, Q8_0, ...), which every manifest exported from it
carries."""

from __future__ import annotations

import collections
import contextlib
import shutil
import sys
from pathlib import Path
from typing import Any

from omni_edge.contracts.manifest import sha256_file
from omni_edge.export.checkpoint import read_record, write_record

# GGUF's general.architecture -> the config.json model_type transformers writes for it; the
# registry's text architectures that transformers' GGUF loader also reads.
ARCHITECTURES = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3"}


def is_gguf(path: Path) -> bool:
    return path.suffix.lower() == ".gguf"


def describe(path: Path) -> dict[str, Any]:
    """The file's architecture, name and tensor types, read from its header (nothing is
    dequantized); a ValueError for a file that is not GGUF or holds an architecture not taken."""
    from gguf import GGUFReader

    if not path.is_file():
        raise ValueError(f"{path}: no such GGUF file")
    try:
        reader = GGUFReader(str(path))
        arch = str(reader.fields["general.architecture"].contents())
        name_field = reader.fields.get("general.name")
        types = collections.Counter(t.tensor_type.name for t in reader.tensors)
    except (KeyError, ValueError, OSError, IndexError) as exc:
        raise ValueError(f"{path}: not a readable GGUF file ({exc})") from None
    if arch not in ARCHITECTURES:
        raise ValueError(f"{path}: GGUF architecture {arch!r} is not supported ({', '.join(ARCHITECTURES)})")
    return {"format": "gguf", "file": path.name, "architecture": arch,
            "name": str(name_field.contents()) if name_field is not None else None,
            "tensor_types": dict(sorted(types.items()))}


def checkpoint_from_gguf(path: Path, out: Path) -> Path:
    """Write OUT as a float32 checkpoint directory dequantized from the GGUF file (built beside
    OUT and renamed into place, so a failure leaves no half checkpoint)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = describe(path)
    source["sha256"] = sha256_file(path)
    source["dequantized_from"] = sorted(t for t in source["tensor_types"] if t not in ("F32", "F16", "BF16"))
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    # transformers' GGUF reader draws its own tqdm bar on sys.stderr: third-party output, sent where
    # descriptor 2 goes (the log while the CLI is quiet, the terminal with --verbose).
    with contextlib.redirect_stderr(sys.__stderr__ or sys.stderr):
        tokenizer: Any = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model: Any = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    if model.config.model_type != ARCHITECTURES[source["architecture"]]:
        raise ValueError(f"{path}: transformers read it as {model.config.model_type!r}, not {source['architecture']!r}")
    # The weights are plain float32 tensors now: saved as such, not as a GGUF-quantized model.
    model.hf_quantizer = None
    del model.config.quantization_config
    model.generation_config.do_sample = False
    model.save_pretrained(partial, safe_serialization=True)
    tokenizer.save_pretrained(partial)
    write_record(partial, {"arch": model.config.model_type, "source": source})
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    return out


def checkpoint_source(checkpoint: Path) -> dict[str, Any]:
    """What a checkpoint directory was converted from ({} for one made or downloaded as is), for
    the manifests exported from it."""
    try:
        record = read_record(checkpoint)
    except (OSError, ValueError):
        return {}
    source = record.get("source") if isinstance(record, dict) else None
    return {"source": source} if isinstance(source, dict) else {}
