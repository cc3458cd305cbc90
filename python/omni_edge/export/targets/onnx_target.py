"""ONNX graphs for ONNX Runtime: one file per graph, all weights in one shared `weights.bin`.

Identical weight tensors (the same bytes, whatever graph or name they come from) are stored
once and given one content-derived name, and `weights.json` indexes them, so the runtime maps
the file once and hands the same memory to every session (prefill, decode, every bucket)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import onnx
import torch
from onnx import numpy_helper

OPSET = 17
SHARED_MIN_BYTES = 1024
ALIGNMENT = 64
SHARED_DTYPES = ("float32", "float16", "uint8")  # float weights; the blocks of quantized ones (cpu_quant)


def export_graph(module: torch.nn.Module, example: tuple[torch.Tensor, ...], input_names: Sequence[str],
                 output_names: Sequence[str], path: Path,
                 dynamic_axes: Mapping[str, Mapping[int, str]] | None = None) -> None:
    """Standard ONNX ops (the TorchScript exporter; its graphs are what the HTP takes), static
    shapes unless `dynamic_axes` names some (ONNX Runtime only)."""
    with torch.no_grad():
        torch.onnx.export(module, example, str(path), input_names=list(input_names), output_names=list(output_names),
                          dynamo=False, opset_version=OPSET, do_constant_folding=True,
                          dynamic_axes={k: dict(v) for k, v in dynamic_axes.items()} if dynamic_axes else None)


def _digest(array: Any) -> str:
    return "w_" + hashlib.sha256(f"{array.dtype}{array.shape}".encode() + array.tobytes()).hexdigest()[:20]


def share_weights(directory: Path, graph_files: Sequence[str], weights_file: str = "weights.bin") -> dict[str, Any]:
    """Move every initializer of at least SHARED_MIN_BYTES into one deduplicated external file."""
    index: dict[str, Any] = {"file": weights_file, "alignment": ALIGNMENT, "tensors": [], "graphs": {}}
    offsets: dict[str, tuple[int, int]] = {}
    with (directory / weights_file).open("wb") as out:
        for name in graph_files:
            model = onnx.load(str(directory / name), load_external_data=False)
            renames: dict[str, str] = {}
            used: list[str] = []
            for init in model.graph.initializer:
                array = numpy_helper.to_array(init)
                raw = array.tobytes()
                if len(raw) < SHARED_MIN_BYTES:
                    continue
                if array.dtype.name not in SHARED_DTYPES:
                    raise ValueError(f"{name}: shared weight {init.name} is {array.dtype}, expected one of {SHARED_DTYPES}")
                shared = _digest(array)
                if shared not in offsets:
                    pad = (-out.tell()) % ALIGNMENT
                    out.write(b"\0" * pad)
                    offsets[shared] = (out.tell(), len(raw))
                    out.write(raw)
                    index["tensors"].append({"name": shared, "dtype": array.dtype.name, "shape": list(array.shape),
                                             "offset": offsets[shared][0], "nbytes": len(raw)})
                offset, length = offsets[shared]
                renames[init.name] = shared
                used.append(shared)
                init.name = shared
                init.ClearField("raw_data")
                init.ClearField("float_data")
                init.ClearField("int32_data")
                init.data_location = onnx.TensorProto.EXTERNAL
                del init.external_data[:]
                for key, value in (("location", weights_file), ("offset", str(offset)), ("length", str(length))):
                    entry = init.external_data.add()
                    entry.key, entry.value = key, value
            for node in model.graph.node:
                for i, inp in enumerate(node.input):
                    if inp in renames:
                        node.input[i] = renames[inp]
            onnx.save(model, str(directory / name))
            index["graphs"][name] = sorted(set(used))
    (directory / "weights.json").write_text(json.dumps(index, indent=1) + "\n")
    return index


def cpu_session(path: Path, threads: int = 0) -> Any:
    """An ONNX Runtime CPU session of one graph: the exporters' checks of a graph against its module.
    `threads` > 0: that many intra-op threads (the summation order of a native stage run with them)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
