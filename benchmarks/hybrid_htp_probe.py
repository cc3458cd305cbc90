"""Does the HTP run a hybrid's (Qwen3.5) bodies? Compiles the fp16 decode (one token) and prefill
(a chunk of 16, 13 valid) bodies of a checkpoint for the X Elite's HTP v73 on the QNN emulator (CPU
fallback disabled: a refused op is named), then runs a real prompt through both on the emulator
and on ONNX Runtime's CPU in float32, and prints each output's SQNR.

    omni-edge make-checkpoint --arch qwen3.5 --out work/q35
    python benchmarks/hybrid_htp_probe.py --checkpoint work/q35 --out work/q35-htp-probe
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import torch

CACHE, CHUNK, VALID = 128, 16, 13


def main() -> None:
    import onnxruntime as ort
    from omni_edge.export.comparison import sqnr_db
    from omni_edge.export.decoder.causal_lm import load_causal_lm
    from omni_edge.export.decoder.graphs import BodyGraph, DecoderShape, EmbedGraph, body_example, body_io_names
    from omni_edge.export.targets import onnx_target, qnn_target
    from tokenizers import Tokenizer

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--sequential", action="store_true",
                   help="the export's HTP form: the prefill chunk token by token (not the chunked rule)")
    args = p.parse_args()
    if args.out.exists() and any(args.out.iterdir()):
        p.error(f"--out {args.out}: not empty (the probe writes its graphs into a directory of its own)")
    args.out.mkdir(parents=True, exist_ok=True)
    model = load_causal_lm(args.checkpoint, ("qwen3_5_text", "qwen3_5"))
    s = DecoderShape.from_config(model.config)
    body = BodyGraph(model, s, reduce="scaled", rope_table=CACHE, htp=args.sequential).eval()  # the HTP's fp16 form
    soc, precision = qnn_target.check_target("x-elite", "fp16")
    sessions: dict[int, tuple[Any, Any]] = {}
    for n in (CHUNK, 1):
        names = body_io_names(s.attention_layers, s.linear_layers, n > 1)
        onnx_target.export_graph(body, body_example(s, n, CACHE), *names, args.out / f"body_n{n}.onnx")
        qnn_target.prepare_graph(args.out / f"body_n{n}.onnx", args.out / f"fp32_body_n{n}.onnx", fuse_norms=False)
        ctx = qnn_target.compile_context(args.out / f"fp32_body_n{n}.onnx", args.out, soc, precision)  # raises, naming ops
        print(f"body of {n} token(s): compiled for the HTP v{soc.htp_arch}, CPU fallback disabled")
        sessions[n] = (ort.InferenceSession(str(args.out / f"body_n{n}.onnx"), providers=["CPUExecutionProvider"]),
                       ort.InferenceSession(str(ctx), qnn_target.htp_session_options()))

    ids = Tokenizer.from_file(str(args.checkpoint / "tokenizer.json")).encode(
        "line 1: the value of x is 1 line 2: the value of x is 4 line 3: the value").ids[:VALID + 1]
    with torch.no_grad():
        embed = EmbedGraph(model).eval()
        hidden = embed(torch.tensor([ids[:VALID] + [0] * (CHUNK - VALID)])).numpy(), embed(torch.tensor([ids[VALID:]])).numpy()

    def feeds(n: int, x: np.ndarray, start: int, past: list[np.ndarray]) -> dict[str, np.ndarray]:
        mask = np.full((1, 1, n, CACHE + n), -10000.0, np.float32)
        for i in range(n):
            mask[0, 0, i, :start] = 0
            mask[0, 0, i, CACHE:CACHE + i + 1] = 0
        values = [x, np.arange(start, start + n, dtype=np.int64)[None], mask, *past]
        return dict(zip(body_io_names(s.attention_layers, s.linear_layers, n > 1)[0],
                        values + ([np.array([VALID], np.int64)] if n > 1 else []), strict=True))

    def compare(n: int, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        cpu, htp = sessions[n]
        got, ref = htp.run(None, inputs), cpu.run(None, inputs)
        rows = slice(0, VALID if n > 1 else 1)
        report = {o.name: round(sqnr_db(r[:, rows] if o.name == "hidden_out" else r, g[:, rows] if o.name == "hidden_out" else g), 1)
                  for o, r, g in zip(cpu.get_outputs(), ref, got, strict=True) if o.name == "hidden_out" or "state" in o.name}
        print(f"body of {n} token(s), HTP emulator vs CPU float32, SQNR dB: {report}")
        return list(ref)

    a = s.attention_layers
    ref = compare(CHUNK, feeds(CHUNK, hidden[0], 0, [x.numpy() for x in body_example(s, 1, CACHE)[3:]]))
    keys = [np.zeros((1, s.kv_heads, s.head_dim, CACHE), np.float32) for _ in range(a)]
    values = [np.zeros((1, s.kv_heads, CACHE, s.head_dim), np.float32) for _ in range(a)]
    for layer in range(a):  # the chunk's valid keys and values in their slots, as the controller writes them
        keys[layer][0, :, :, :VALID] = ref[1 + layer][0, :, :VALID].transpose(0, 2, 1)
        values[layer][0, :, :VALID] = ref[1 + a + layer][0, :, :VALID]
    compare(1, feeds(1, hidden[1], VALID, keys + values + ref[1 + 2 * a:]))


if __name__ == "__main__":
    main()
