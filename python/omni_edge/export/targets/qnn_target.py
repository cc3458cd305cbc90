"""QNN HTP artifacts: quantized (QDQ) ONNX graphs per stage and bucket, compiled into QNN
context binaries (EPContext models) for one Snapdragon SoC.

Recipe per HTP architecture (what the SoC's NPU can run), calibration on text that ships with
the project, activation ranges widened beyond what calibration saw, weights quantized
symmetrically per output channel (or in blocks for 4-bit), RMSNorm fused into one op.
Every artifact is then validated on the HTP backend (the emulator here, the NPU on a device)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from omni_edge.export.comparison import sqnr_db
from omni_edge.socs import SOCS, Soc

CALIBRATION_TEXT = Path(__file__).parents[1] / "data" / "calibration.txt"  # export/data: shipped text
QDQ_MASK_VALUE = -100.0  # survives 16-bit activation quantization; -1e4 would not
RANGE_WIDENING = 2.0     # activation ranges: this many times what calibration saw (unseen text goes further)
WEIGHT_SHARING_MIN_ARCH = 73  # QNN shares weights between graphs of one context from HTP v73 on


@dataclass(frozen=True)
class Precision:
    weights: str            # int8 | int4 | int16 | fp16
    activations: str        # uint16 | fp16
    min_arch: int
    why: str


PRECISIONS: dict[str, Precision] = {
    "w8a16": Precision("int8", "uint16", 68, "8-bit weights with 16-bit activations run on every HTP generation"),
    "w4a16": Precision("int4", "uint16", 73, "4-bit weights need HTP v73 or newer"),
    "a16w16": Precision("int16", "uint16", 73, "16-bit weights need HTP v73 or newer"),
    "fp16": Precision("fp16", "fp16", 73, "float16 on the HTP needs v73 or newer"),
}


def check_target(soc: str, precision: str) -> tuple[Soc, Precision]:
    """The SoC and recipe, or a ValueError saying why that SoC cannot run it."""
    if soc not in SOCS:
        raise ValueError(f"unknown SoC {soc!r} (known: {', '.join(SOCS)})")
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r} (known: {', '.join(PRECISIONS)})")
    s, p = SOCS[soc], PRECISIONS[precision]
    if s.htp_arch < p.min_arch:
        raise ValueError(f"{precision} cannot run on {soc} ({s.name}, HTP v{s.htp_arch}): {p.why}")
    return s, p


def check_weight_sharing(key: str, soc: Soc) -> None:
    if soc.htp_arch < WEIGHT_SHARING_MIN_ARCH:
        raise ValueError(f"weight sharing cannot run on {key} ({soc.name}, HTP v{soc.htp_arch}): "
                         f"QNN shares weights between graphs from HTP v{WEIGHT_SHARING_MIN_ARCH} on")


# ---- graph rewrites before quantization ------------------------------------------------
QDQ_OPSET = 21  # 16-bit QuantizeLinear/DequantizeLinear


def prepare_graph(fp32: Path, out: Path, fuse_norms: bool = True) -> int:
    """The fp32 graph at opset 21 (16-bit QDQ), RMSNorm fused (after the conversion, which does
    not know the fused op) when `fuse_norms`. Returns how many norms were fused.

    fp16 graphs keep RMSNorm unfused: the HTP's fp16 path computes the fused 4-D q/k norms of a
    prefill chunk wrongly (measured on the emulator, QNN 2.51: prefill keys at 3 dB SQNR fused,
    62 dB unfused); quantized graphs are right either way, and faster fused."""
    from onnx import version_converter

    model = version_converter.convert_version(onnx.load(str(fp32)), QDQ_OPSET)
    fused = fuse_rmsnorm(model) if fuse_norms else 0
    onnx.save(model, str(out), save_as_external_data=True, location=out.name + ".data")
    return fused


def fuse_rmsnorm(model: onnx.ModelProto) -> int:
    """Mul(x, x) or Pow(x, 2) -> ReduceMean(-1) -> Add(eps) -> Sqrt -> Div(1, .) -> Mul(x, .) -> Mul(w, .)
    becomes SimplifiedLayerNormalization(x, w): one op the HTP runs (and half the emulator time)."""
    graph = model.graph
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    constants = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for n in graph.node:
        if n.op_type == "Constant":
            constants[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)

    def single(name: str, op: str) -> onnx.NodeProto | None:
        users = consumers.get(name, [])
        return users[0] if len(users) == 1 and users[0].op_type == op else None

    fused = 0
    removed: set[int] = set()
    for pow_node in list(graph.node):
        squares = pow_node.op_type == "Mul" and pow_node.input[0] == pow_node.input[1]
        if pow_node.op_type == "Pow" and pow_node.input[1] in constants:
            squares = float(np.asarray(constants[pow_node.input[1]]).reshape(-1)[0]) == 2.0
        if not squares:
            continue
        x = pow_node.input[0]
        mean = single(pow_node.output[0], "ReduceMean")
        add = mean and single(mean.output[0], "Add")
        sqrt = add and single(add.output[0], "Sqrt")
        div = sqrt and single(sqrt.output[0], "Div")
        mul = div and single(div.output[0], "Mul")
        scale = mul and single(mul.output[0], "Mul")
        if not (mean and add and sqrt and div and mul and scale):
            continue
        eps_name = add.input[1] if add.input[0] == mean.output[0] else add.input[0]
        if eps_name not in constants or x not in mul.input:
            continue
        weight = scale.input[0] if scale.input[1] == mul.output[0] else scale.input[1]
        norm = helper.make_node("SimplifiedLayerNormalization", [x, weight], [scale.output[0]],
                                name=f"rmsnorm_{fused}", axis=-1,
                                epsilon=float(np.asarray(constants[eps_name]).reshape(-1)[0]), stash_type=1)
        chain = [pow_node, mean, add, sqrt, div, mul, scale]
        index = min(list(graph.node).index(c) for c in chain)
        for c in chain:
            removed.add(id(c))
        graph.node.insert(index, norm)
        fused += 1
    keep = [n for n in graph.node if id(n) not in removed]
    del graph.node[:]
    graph.node.extend(keep)
    return fused


# ---- calibration through the native engine -------------------------------------------
def calibration_token_ids(tokenizer: Path | Any, lengths: Sequence[int]) -> list[list[int]]:
    """Sequences of the requested lengths from the shipped calibration text; `tokenizer` is a
    tokenizer.json or a loaded `tokenizers.Tokenizer`."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer)) if isinstance(tokenizer, Path) else tokenizer
    text = CALIBRATION_TEXT.read_text()
    ids = tok.encode(text).ids
    out, start = [], 0
    for n in lengths:
        seq = (ids[start:] + ids)[:n]
        out.append(seq)
        start = (start + n) % max(1, len(ids))
    return out


# A calibration prompt with media: ids, the rows [n, hidden] that replace the embeddings at positions.
Prompt = tuple[list[int], np.ndarray, list[int]]


def capture_calibration(plan: Path, sequences: Sequence[list[int] | Prompt], decode_steps: int, per_sequence: int,
                        threads: int = 0) -> dict[str, list[list[np.ndarray]]]:
    """Run the fp32 graphs through the native engine, collecting every graph's inputs: up to
    `per_sequence` runs of each graph per sequence, so that every sequence (and the cache
    positions it reaches) is represented. A sequence is token ids, or a Prompt whose media rows
    the engine splices in (a multimodal thinker's bodies then meet the encoders' rows too)."""
    from omni_edge import _native

    engine = _native.LlmEngine.open(str(plan), threads)
    out: dict[str, list[list[np.ndarray]]] = {}
    for seq in sequences:
        ids, rows, positions = seq if isinstance(seq, tuple) else (seq, None, [])
        engine.reset()
        engine.capture(per_sequence)
        if rows is None:
            engine.feed(ids)
        else:
            engine.feed(ids, np.ascontiguousarray(rows, np.float32).tobytes(), positions)
        for step in range(decode_steps):
            engine.feed([ids[(step * 7) % len(ids)]])
        for graph, samples in engine.take_capture().items():
            out.setdefault(graph, []).extend(
                [np.frombuffer(b, dtype=dtype).reshape(shape).copy() for b, dtype, shape in sample] for sample in samples)
    engine.capture(0)
    return out


class _Reader:
    """onnxruntime.quantization CalibrationDataReader over captured samples."""

    def __init__(self, names: list[str], samples: list[list[np.ndarray]]) -> None:
        self._it: Iterator[dict[str, np.ndarray]] = (dict(zip(names, s, strict=True)) for s in samples)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._it, None)

    def rewind(self) -> None:
        raise NotImplementedError


def _calibrate(model_path: Path, names: list[str], samples: list[list[np.ndarray]]) -> Any:
    """MinMax ranges of every activation over the samples (onnxruntime's TensorsData)."""
    from onnxruntime.quantization.calibrate import CalibrationMethod, create_calibrator

    calibrator = create_calibrator(str(model_path), calibrate_method=CalibrationMethod.MinMax,
                                   augmented_model_path=str(model_path.with_suffix(".augmented.onnx")),
                                   use_external_data_format=True)
    calibrator.collect_data(_Reader(names, samples))
    tensors = calibrator.compute_data()
    model_path.with_suffix(".augmented.onnx").unlink(missing_ok=True)
    return tensors


def _ranges(tensors: Any) -> dict[str, tuple[float, float]]:
    return {name: (float(np.asarray(r.range_value[0]).min()), float(np.asarray(r.range_value[1]).max()))
            for name, r in tensors.data.items()}


WEIGHT_BITS = {"int8": 8, "int4": 4, "int16": 16}


def mse_channel_scales(weight: np.ndarray, bits: int, axis: int) -> np.ndarray:
    """Symmetric per-channel scales that minimise each channel's squared rounding + clipping
    error (a grid over clipping ratios), instead of mapping the channel's max |w| to the top code."""
    w = np.moveaxis(weight.astype(np.float64), axis, 0).reshape(weight.shape[axis], -1)
    qmax = 2 ** (bits - 1) - 1
    amax = np.maximum(np.abs(w).max(axis=1), 1e-12)
    best_scale, best_err = amax / qmax, np.full(len(amax), np.inf)
    for ratio in np.linspace(0.5, 1.0, 26):
        scale = (amax * ratio / qmax)[:, None]
        err = ((np.clip(np.round(w / scale), -qmax - 1, qmax) * scale - w) ** 2).sum(axis=1)
        better = err < best_err
        best_err[better], best_scale[better] = err[better], scale[better, 0]
    scales: np.ndarray = best_scale.astype(np.float32)
    return scales


def widened(lo: float, hi: float, widen: float) -> tuple[float, float]:
    """A calibrated range `widen` times as wide around its centre, and always holding 0."""
    center, half = (lo + hi) / 2, max((hi - lo) / 2, 1e-6) * widen
    return min(lo, center - half, 0.0), max(hi, center + half, 0.0)


def quantize_graph(fp32: Path, out: Path, samples: list[list[np.ndarray]], precision: Precision,
                   widen: float = RANGE_WIDENING, exclude_nodes: Sequence[str] = (),
                   fixed_ranges: dict[str, tuple[float, float]] | None = None) -> None:
    """QDQ graph for the HTP: 16-bit activations (ranges widened `widen` times beyond calibration),
    weights symmetric per output channel (int8, int4, int16) with MSE-chosen scales.
    `fixed_ranges` are used as given (the KV cache: one range per layer for every graph)."""
    from onnxruntime.quantization import QuantType, quantize_static
    from onnxruntime.quantization.calibrate import save_tensors_data
    from onnxruntime.quantization.execution_providers.qnn import get_qnn_qdq_config

    model = onnx.load(str(fp32))
    names = [i.name for i in model.graph.input]
    tensors = _calibrate(fp32, names, samples)
    ranges = _ranges(tensors)
    weights = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    weight_type = {"int8": QuantType.QInt8, "int4": QuantType.QInt4, "int16": QuantType.QInt16}[precision.weights]
    overrides: dict[str, list[dict[str, Any]]] = {}
    for node in model.graph.node:
        # MatMul B is [in, out]: one scale per output column. (An embedding table keeps one scale:
        # per-row scales would not survive the gather on the HTP.)
        if node.op_type == "MatMul" and len(node.input) > 1:
            w = weights.get(node.input[1])
            if w is not None and w.ndim == 2:
                scales = mse_channel_scales(w, WEIGHT_BITS[precision.weights], axis=1)
                zero = np.int8(0) if precision.weights != "int16" else np.int16(0)
                overrides[node.input[1]] = [{"quant_type": weight_type, "axis": 1, "scale": np.float32(sc), "zero_point": zero}
                                            for sc in scales]
    for name, (lo, hi) in ranges.items():
        if name in weights or name in overrides:
            continue
        rmin, rmax = widened(lo, hi, widen)
        overrides[name] = [{"rmin": np.float32(rmin), "rmax": np.float32(rmax)}]
    for name, (lo, hi) in (fixed_ranges or {}).items():
        overrides[name] = [{"rmin": np.float32(lo), "rmax": np.float32(hi)}]
    config = get_qnn_qdq_config(str(fp32), _Reader(names, samples), activation_type=QuantType.QUInt16,
                                weight_type=weight_type, init_overrides=overrides,
                                nodes_to_exclude=list(exclude_nodes) or None)
    # The quantizer takes the ranges just computed from a calibration cache instead of running
    # the (quadratic in nodes) calibration a second time: half the time of a large graph.
    cache = out.with_suffix(".calibration.json")
    save_tensors_data(tensors, cache)
    try:
        quantize_static(str(fp32), str(out), None, calibrate_method=config.calibrate_method,
                        quant_format=config.quant_format, activation_type=config.activation_type,
                        weight_type=config.weight_type, op_types_to_quantize=config.op_types_to_quantize,
                        nodes_to_quantize=config.nodes_to_quantize, nodes_to_exclude=config.nodes_to_exclude,
                        per_channel=config.per_channel, reduce_range=config.reduce_range,
                        use_external_data_format=config.use_external_data_format,
                        calibration_providers=config.calibration_providers, extra_options=config.extra_options,
                        calibration_cache_path=cache)
    finally:
        cache.unlink(missing_ok=True)


# ---- the KV cache at the graph boundary, in its quantized type ---------------------------
def kv_ranges(samples: dict[str, list[list[np.ndarray]]], input_names: Sequence[str], layers: int,
              widen: float = RANGE_WIDENING) -> dict[str, tuple[float, float]]:
    """One range per layer for the keys and one for the values, over every body graph's
    calibration caches (prefill and decode, every bucket), widened like the other activations and
    given to the cache inputs and the new-entry outputs alike: every graph then reads and writes
    the same uint16 codes, so the controller copies new entries into the cache as they are and a
    cache moves between buckets unchanged."""
    return state_ranges(samples, input_names, {f"past_{kind}_{layer}": f"new_{kind}_{layer}"
                                               for kind in ("key", "value") for layer in range(layers)}, widen)


def state_ranges(samples: dict[str, list[list[np.ndarray]]], input_names: Sequence[str], pairs: dict[str, str],
                 widen: float = RANGE_WIDENING) -> dict[str, tuple[float, float]]:
    """One range per state a body reads and writes back (`pairs`: input -> output name), over
    every body graph's calibration inputs, widened and given to both ends: what one run writes
    the next reads with the same quantization."""
    ranges: dict[str, tuple[float, float]] = {}
    for name, out in pairs.items():
        index = list(input_names).index(name)
        values = [sample[index] for graph, runs in samples.items() if graph.split(":")[0] in ("prefill", "decode")
                  for sample in runs]
        ranges[name] = ranges[out] = widened(min(float(v.min()) for v in values), max(float(v.max()) for v in values),
                                             widen)
    return ranges


def kv_codes(ranges: dict[str, tuple[float, float]]) -> dict[str, dict[str, float]]:
    """The uint16 scale and zero point of each range (asymmetric: rmin -> 0, rmax -> 65535)."""
    codes: dict[str, dict[str, float]] = {}
    for name, (lo, hi) in ranges.items():
        scale = max(hi - lo, 1e-8) / 65535.0
        codes[name] = {"scale": float(np.float32(scale)), "zero_point": int(np.clip(np.rint(-lo / scale), 0, 65535))}
    return codes


def quantized_kv_io(qdq: Path, codes: dict[str, dict[str, float]]) -> None:
    """Rewrites a QDQ body graph so that its cache inputs and new-entry outputs are uint16 codes
    with the given scale and zero point: each input is dequantized where the graph reads it and
    each output quantized where the graph writes it (the HTP folds these into the neighbouring
    quantized ops, or requantizes where the quantizer chose other parameters)."""
    model = onnx.load(str(qdq))
    graph = model.graph
    inputs = {i.name: i for i in graph.input}
    outputs = {o.name: o for o in graph.output}
    first: list[onnx.NodeProto] = []
    last: list[onnx.NodeProto] = []
    renames: dict[str, str] = {}
    for name, code in codes.items():
        scale, zero = f"{name}_code_scale", f"{name}_code_zero_point"
        graph.initializer.extend([numpy_helper.from_array(np.array(code["scale"], np.float32), scale),
                                  numpy_helper.from_array(np.array(code["zero_point"], np.uint16), zero)])
        if name in inputs:
            renames[name] = name + "_dequantized"
            first.append(helper.make_node("DequantizeLinear", [name, scale, zero], [renames[name]], name=name + "_codes"))
            inputs[name].type.tensor_type.elem_type = onnx.TensorProto.UINT16
        elif name in outputs:
            renames[name] = name + "_float"
            last.append(helper.make_node("QuantizeLinear", [renames[name], scale, zero], [name], name=name + "_codes"))
            outputs[name].type.tensor_type.elem_type = onnx.TensorProto.UINT16
        else:
            raise ValueError(f"{qdq.name}: no graph input or output named {name}")
    for node in graph.node:
        for i, tensor in enumerate(node.input):
            node.input[i] = renames.get(tensor, tensor)
        for i, tensor in enumerate(node.output):
            node.output[i] = renames.get(tensor, tensor)
    nodes = first + list(graph.node) + last
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.save(model, str(qdq), save_as_external_data=True, location=qdq.name + ".data")


def quantize_codes(x: np.ndarray, code: dict[str, float]) -> np.ndarray:
    q: np.ndarray = np.clip(np.rint(x / code["scale"]) + code["zero_point"], 0, 65535).astype(np.uint16)
    return q


def dequantize_codes(q: np.ndarray, code: dict[str, float]) -> np.ndarray:
    x: np.ndarray = ((q.astype(np.float32) - np.float32(code["zero_point"])) * np.float32(code["scale"])).astype(np.float32)
    return x


@functools.cache
def qnn_devices() -> tuple[Any, ...]:
    """The QNN plugin EP's devices, its library registered with ONNX Runtime once per process."""
    import onnxruntime as ort

    ort.register_execution_provider_library("QNNExecutionProvider", str(qnn_library_dir() / "libonnxruntime_providers_qnn.so"))
    devices = tuple(d for d in ort.get_ep_devices() if d.ep_name == "QNNExecutionProvider")
    if not devices:
        raise RuntimeError("the QNN execution provider offers no device")
    return devices


def htp_session_options(extra: dict[str, str] | None = None, provider: dict[str, str] | None = None) -> Any:
    """Session options with the HTP backend and CPU fallback disabled: a graph the HTP cannot
    run fails here instead of running on the CPU."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    for key, value in (extra or {}).items():
        so.add_session_config_entry(key, value)
    so.add_provider_for_devices(list(qnn_devices()), {"backend_path": str(qnn_library_dir() / "libQnnHtp.so"), **(provider or {})})
    return so


def compile_context(graph: Path, out_dir: Path, soc: Soc, precision: Precision, share: str = "") -> Path:
    """An EPContext model (QNN context binary beside it) compiled for `soc` on this host.

    share: "" compiles a context of its own; "open" / "last" put the graph into one context with
    the graphs compiled before it (QNN weight sharing: equal weights are stored once), "last"
    closing that context."""
    import onnxruntime as ort

    ctx = out_dir / ctx_name(graph.name.removeprefix("fp32_"))
    config = {"ep.context_enable": "1", "ep.context_file_path": str(ctx), "ep.context_embed_mode": "0"}
    provider = {"htp_arch": str(soc.htp_arch), "soc_model": str(soc.soc_model),
                "htp_graph_finalization_optimization_mode": "3"}
    if precision.activations == "fp16":
        provider["enable_htp_fp16_precision"] = "1"
    if share:
        config["ep.share_ep_contexts"] = "1"
        provider["enable_htp_weight_sharing"] = "1"
        if share == "last":
            config["ep.stop_share_ep_contexts"] = "1"
    with _native_log() as log:
        try:
            ort.InferenceSession(str(graph), htp_session_options(config, provider))
            failure = None
        except Exception as exc:  # onnxruntime raises its own Fail/RuntimeException types
            failure = exc
    if failure is not None:
        lines = [ln for ln in "".join(log).splitlines() if "Unsupported nodes in QNN EP" in ln]
        refused = sorted(set(re.findall(r"\{ name: ([^,]*), type: ([^ }]+) \}", "\n".join(lines))))
        ops = ", ".join(f"{name or 'unnamed'} ({op})" for name, op in refused) or "a node (no op named in the log)"
        raise ValueError(f"{graph.name}: the HTP v{soc.htp_arch} of {soc.name} cannot run {ops}; CPU fallback is "
                         f"disabled, so no context was compiled ({failure})")
    return ctx


def float_nodes(graph: Path) -> list[str]:
    """Nodes a weight-quantized policy graph keeps in float on the HTP: every Softmax with the Add
    that feeds it (scores + an attention bias of 0 / -65504) and the normalizations."""
    model = onnx.load(str(graph), load_external_data=False)
    producer = {out: node for node in model.graph.node for out in node.output}
    names = []
    for node in model.graph.node:
        if node.op_type in ("LayerNormalization", "InstanceNormalization"):
            names.append(node.name)
        if node.op_type == "Softmax":
            names.append(node.name)
            feed = producer.get(node.input[0])
            if feed is not None and feed.op_type == "Add":
                names.append(feed.name)
    return names


def ctx_name(file: str) -> str:
    """The EPContext model compiled from graph `file`."""
    return Path(file).stem + "_ctx.onnx"


def graph_sqnr(fp32_dir: Path, ctx_dir: Path, files: dict[str, str], samples: dict[str, list[list[np.ndarray]]],
               per_graph: int = 4, all_outputs: bool = False,
               codes: dict[str, dict[str, float]] | None = None) -> dict[str, float]:
    """Per graph, the SQNR (dB) of its first output (with `all_outputs`: the worst of its
    outputs) against the fp32 graph on the same held-out inputs (up to `per_graph` of them), the
    compiled graph running on the HTP backend. `codes`: the scale and zero point of each tensor
    the compiled graph takes or returns as uint16 codes (the KV cache)."""
    codes = codes or {}
    import onnxruntime as ort

    out: dict[str, float] = {}
    for name, file in files.items():
        if not samples.get(name):
            continue
        fp32 = ort.InferenceSession(str(fp32_dir / file), providers=["CPUExecutionProvider"])
        htp = ort.InferenceSession(str(ctx_dir / ctx_name(file)), htp_session_options())
        names = [i.name for i in fp32.get_inputs()]
        outputs = [o.name for o in fp32.get_outputs()][:None if all_outputs else 1]
        refs: list[list[np.ndarray]] = [[] for _ in outputs]
        gots: list[list[np.ndarray]] = [[] for _ in outputs]
        for sample in samples[name][:per_graph]:
            feed = dict(zip(names, sample, strict=True))
            coded = {k: quantize_codes(v, codes[k]) if k in codes else v for k, v in feed.items()}
            got = [dequantize_codes(g, codes[o]) if o in codes else g
                   for o, g in zip(outputs, htp.run(outputs, coded), strict=True)]
            for i, (r, g) in enumerate(zip(fp32.run(outputs, feed), got, strict=True)):
                refs[i].append(r.ravel())
                gots[i].append(g.ravel())
        worst = np.inf
        for r_parts, g_parts in zip(refs, gots, strict=True):
            worst = min(worst, sqnr_db(np.concatenate(r_parts), np.concatenate(g_parts)))
        out[name] = float(worst)
    return out


@contextlib.contextmanager
def _native_log() -> Iterator[list[str]]:
    """What the process writes to stderr (fd 2) while the body runs, as one string in the yielded
    list afterwards: ONNX Runtime's QNN EP names the nodes it refuses only there, not in the
    exception it raises."""
    text: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+", errors="replace") as log:
        os.dup2(log.fileno(), 2)
        try:
            yield text
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            log.seek(0)
            text.append(log.read())


def context_binaries(ctx_model: Path) -> list[str]:
    """The context binary files an EPContext model refers to."""
    model = onnx.load(str(ctx_model), load_external_data=False)
    return sorted({helper.get_attribute_value(a).decode() for n in model.graph.node if n.op_type == "EPContext"
                   for a in n.attribute if a.name == "ep_cache_context"})


def qnn_library_dir() -> Path:
    import onnxruntime_qnn

    return Path(onnxruntime_qnn.__file__).parent


def versions() -> dict[str, str]:
    """QNN SDK (QAIRT) and EP versions of the wheel that compiled the context binaries."""
    import importlib.metadata as md

    import onnxruntime_qnn.build_and_package_info as info

    return {"qnn_sdk": str(getattr(info, "qnn_version", "unknown")), "onnxruntime_qnn": md.version("onnxruntime-qnn"),
            "onnxruntime": md.version("onnxruntime")}


def describe(soc: Soc, precision_name: str, precision: Precision,
             kv_codes: dict[str, dict[str, float]] | None = None) -> dict[str, Any]:
    if kv_codes:
        layers = len(kv_codes) // 4
        kv_io: dict[str, Any] = {
            "dtype": "uint16", "granularity": "per layer: one scale and zero point for all heads, the same in every "
            "graph and bucket (inputs and new entries alike)",
            "layers": [{kind: kv_codes[f"past_{kind}_{layer}"] for kind in ("key", "value")} for layer in range(layers)]}
    else:  # fp16 graphs: the cache crosses as float32 and the HTP converts it to fp16 inside
        kv_io = {"dtype": "float32", "inside_graph": f"{precision.activations}"}
    return {"soc": soc.name, "htp_arch": f"v{soc.htp_arch}", "soc_model": soc.soc_model, "precision": precision_name,
            "weights": precision.weights, "activations": precision.activations, "kv_cache_io": kv_io,
            "mask_value": QDQ_MASK_VALUE}


def write_component(directory: Path, identity: dict[str, str], numerical: Any, task: Any, soc: Soc, precision: Precision,
                    extra_metadata: dict[str, Any]) -> None:
    """A compiled component's reports and manifest: the QNN runtime, SDK and target beside `extra_metadata`."""
    from omni_edge.artifacts import write_validated

    v = versions()
    write_validated(directory, directory.name, identity, numerical, task, runtime="onnxruntime-qnn",
                    runtime_version=v["onnxruntime_qnn"], compiler_version=f"qnn-{v['qnn_sdk']}",
                    extra_metadata={"qnn": {**describe(soc, identity["precision"], precision), "versions": v},
                                    **extra_metadata})


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=1) + "\n")
