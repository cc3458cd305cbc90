"""Block-quantized weights for the CPU routes. ONNX Runtime: every MatMul whose weight is a
[K, N] float32 initializer becomes `com.microsoft.MatMulNBits` with symmetric int4 or int8 blocks
along K, the layout ONNX Runtime's MLAS integer kernels read (and ONNX Runtime GenAI's builder
writes for `-p int4` / `-p int8`). ExecuTorch: every nn.Linear gets torchao's int8 dynamic
activations with grouped int4/int8 weights, which XNNPACK lowers to its integer GEMMs (the
"8da4w" of ExecuTorch's LLM exports).

Each block of `block_size` weights along K stores one float32 scale; the values are rounded to
the nearest of the 2^bits levels around the default zero point 2^(bits-1). The step maps the
block's largest-magnitude weight to the most negative level (the whole signed range is used, as
in llama.cpp's Q4_0); at 4 bits a few smaller steps are tried too and the one with the least
squared error is kept. Accuracy level 4: activations are quantized to int8 per block
and the products accumulate in integers."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

CPU_PRECISIONS = {"fp32": 32, "int8": 8, "int4": 4}
ACCURACY_LEVEL = 4          # MatMulNBits: int8 activations, integer dot products
MS_DOMAIN = "com.microsoft"
SCALE_SEARCH = tuple(1.0 - 0.02 * i for i in range(16))  # int4 step sizes tried per block: 100% .. 70% of the extreme's


def manifest_block(precision: str, block_size: int, graphs: str, fmt: str = "onnx") -> dict[str, Any]:
    """What a quantized CPU artifact's weights are, for its manifest ({} at fp32)."""
    if precision == "fp32":
        return {}
    bits = CPU_PRECISIONS[precision]
    per_channel = fmt == "pte" and bits == 8  # XNNPACK groups only 4-bit weights
    op = ({"op": "com.microsoft.MatMulNBits", "accuracy_level": ACCURACY_LEVEL} if fmt == "onnx" else
          {"op": "torchao Int8DynamicActivationIntxWeight (XNNPACK: int8 dynamic activations)"})
    return {"quantization": {"precision": precision, **op, "bits": bits,
                             "block_size": "per output channel" if per_channel else block_size, "symmetric": True,
                             "graphs": graphs}}


def quantize_blocks(weight: np.ndarray, bits: int, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """A [K, N] float32 weight -> (B uint8 [N, K/block, block*bits/8], scales float32 [N, K/block])."""
    k, n = weight.shape
    if bits not in (4, 8) or k % block_size or block_size % 2:
        raise ValueError(f"cannot quantize a [{k}, {n}] weight to {bits} bits in blocks of {block_size}")
    blocks = weight.T.reshape(n, k // block_size, block_size).astype(np.float32)
    levels = 1 << (bits - 1)                            # 8 for int4, 128 for int8
    extreme = np.take_along_axis(blocks, np.abs(blocks).argmax(-1)[..., None], -1)  # signed, largest magnitude
    full = extreme / -levels                            # the extreme lands on -levels exactly
    scales, best = full, np.full(extreme.shape, np.inf, np.float32)
    for shrink in SCALE_SEARCH if bits == 4 else (1.0,):
        # A smaller step clips the extreme but rounds the rest finer: keep, per block, the step
        # with the least squared error (round-to-nearest at the extreme alone loses most at 4 bits).
        candidate = (full * np.float32(shrink)).astype(np.float32)
        safe = np.where(candidate == 0, np.float32(1), candidate)
        error = np.square(np.clip(np.rint(blocks / safe), -levels, levels - 1) * candidate - blocks).sum(-1, keepdims=True)
        better = error < best
        scales, best = np.where(better, candidate, scales), np.where(better, error, best)
    safe = np.where(scales == 0, np.float32(1), scales)
    q = (np.clip(np.rint(blocks / safe), -levels, levels - 1).astype(np.int32) + levels).astype(np.uint8)
    if bits == 4:                                       # two per byte, the even element in the low nibble
        q = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
    return np.ascontiguousarray(q), np.ascontiguousarray(scales[..., 0])


def dequantize_blocks(packed: np.ndarray, scales: np.ndarray, bits: int, block_size: int) -> np.ndarray:
    """The [K, N] float32 weight that MatMulNBits multiplies by (the inverse of quantize_blocks)."""
    n, blocks, _ = packed.shape
    q = np.stack([packed & 0x0F, packed >> 4], -1).reshape(n, blocks, block_size) if bits == 4 else packed
    values = (q.astype(np.float32) - (1 << (bits - 1))) * scales[..., None]
    return np.ascontiguousarray(values.reshape(n, blocks * block_size).T)


def quantize_graph(path: Path, bits: int, block_size: int,
                   done: dict[bytes, tuple[np.ndarray, np.ndarray]] | None = None) -> int:
    """Rewrites the graph file in place; returns how many MatMuls now read quantized weights.

    A MatMul qualifies when its second input is a rank-2 float32 initializer with K a multiple
    of the block size; anything else (attention's activation x activation products) stays.
    `done` remembers quantized weights by content across the graphs of one export (every bucket's
    prefill and decode graph holds the same projections)."""
    import onnx
    from onnx import helper, numpy_helper

    done = {} if done is None else done
    model = onnx.load(str(path))
    graph = model.graph
    initializers = {init.name: init for init in graph.initializer}
    uses: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            uses[name] = uses.get(name, 0) + 1
    nodes, rewritten, dropped = [], 0, set()
    for node in graph.node:
        init = initializers.get(node.input[1]) if node.op_type == "MatMul" and len(node.input) == 2 else None
        if (init is None or len(init.dims) != 2 or init.data_type != onnx.TensorProto.FLOAT
                or init.dims[0] % block_size):
            nodes.append(node)
            continue
        weight = numpy_helper.to_array(init)
        key = hashlib.sha256(weight.tobytes()).digest() + bytes(str(weight.shape), "ascii")
        if key not in done:
            done[key] = quantize_blocks(weight, bits, block_size)
        packed, scales = done[key]
        stem = f"{init.name}_q{bits}b{block_size}"
        graph.initializer.extend([numpy_helper.from_array(packed, stem), numpy_helper.from_array(scales, stem + "_scales")])
        k, n = weight.shape
        nodes.append(helper.make_node("MatMulNBits", [node.input[0], stem, stem + "_scales"], list(node.output),
                                      name=(node.name or stem) + "_nbits", domain=MS_DOMAIN, K=k, N=n, bits=bits,
                                      block_size=block_size, accuracy_level=ACCURACY_LEVEL))
        uses[init.name] -= 1
        if uses[init.name] == 0:
            dropped.add(init.name)
        rewritten += 1
    if not rewritten:
        return 0
    del graph.node[:]
    graph.node.extend(nodes)
    kept = [init for init in graph.initializer if init.name not in dropped]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    if not any(op.domain == MS_DOMAIN for op in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    onnx.save(model, str(path))
    return rewritten


def quantize_linears(module: Any, bits: int, block_size: int) -> int:
    """The ExecuTorch route: every nn.Linear of `module` whose input width is a multiple of the
    group size gets int8 dynamic activations and symmetric `bits` weights (torchao), in place:
    int4 in groups of `block_size`, int8 per output channel (XNNPACK groups only 4-bit weights).
    Returns how many."""
    import torch
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
    from torchao.quantization.granularity import PerAxis, PerGroup
    from torchao.utils import unwrap_tensor_subclass

    def chosen(m: Any, fqn: str = "") -> bool:
        return isinstance(m, torch.nn.Linear) and m.in_features % block_size == 0

    count = sum(1 for m in module.modules() if chosen(m))
    config = Int8DynamicActivationIntxWeightConfig(weight_dtype=getattr(torch, f"int{bits}"),
                                                   weight_granularity=PerGroup(block_size) if bits == 4 else PerAxis(0))
    with torch.no_grad():
        quantize_(module, config, filter_fn=chosen)
        unwrap_tensor_subclass(module)
    return count
