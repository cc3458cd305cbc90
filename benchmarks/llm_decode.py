#!/usr/bin/env python
"""Text decode benchmark: omni-edge (ONNX Runtime and ExecuTorch backends) against transformers
eager and ONNX Runtime GenAI, on the same fp32 checkpoint with the same thread count, in one run.

Each system runs in its own process (so peak RSS is its own), warms up once, then generates
`--new-tokens` greedily after a `--prompt-tokens` prompt, `--repeats` times; the median is
reported. Decode speed is also shown as weight traffic (every weight is read once per token)
against this machine's measured memory read bandwidth.

    python benchmarks/llm_decode.py                       # bench checkpoint, 2 threads
    python benchmarks/llm_decode.py --checkpoint CKPT --artifact ART --threads 4

Needs: `omni-edge make-checkpoint --preset bench --out work/bench-ckpt` and
`omni-edge export llm --checkpoint work/bench-ckpt --out work/bench-art --format both`
(run automatically when missing).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SYSTEMS = ("omni-edge onnxruntime", "omni-edge executorch", "onnxruntime-genai", "transformers eager")


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return float(line.split()[1]) / 1024
    return 0.0


def prompt_ids(checkpoint: Path, n: int) -> list[int]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(checkpoint / "tokenizer.json"))
    ids: list[int] = []
    text = "The controller streams tokens to the consumer, which acknowledges each event. " * 4
    while len(ids) < n:
        ids += tok.encode(text).ids
    return ids[:n]


# ---- workers (one process per system) ----------------------------------------------
def run_omni_edge(args: argparse.Namespace, backend: str) -> list[dict[str, float]]:
    from omni_edge.runtime import Session

    plan = args.artifact / ("plan.onnx.json" if backend == "onnxruntime" else "plan.pte.json")
    session = Session.open(plan, threads=args.threads)
    prompt = prompt_ids(args.checkpoint, args.prompt_tokens)
    results = []
    for i in range(args.repeats + 1):
        m = session.run(prompt_ids=prompt, max_new_tokens=args.new_tokens, ignore_stop_tokens=True, on_event=lambda e: True)
        if i:  # the first run warms up
            results.append({"ttft_ms": m["ttft_ms"], "prefill_tok_s": m["prefill_tok_s"], "decode_tok_s": m["decode_tok_s"],
                            "controller_ms_per_token": m["controller_ms_per_token"]})
    return results


def run_transformers(args: argparse.Namespace) -> list[dict[str, float]]:
    import torch
    from transformers import AutoModelForCausalLM, LogitsProcessor, LogitsProcessorList

    torch.set_num_threads(args.threads)
    model = AutoModelForCausalLM.from_pretrained(str(args.checkpoint), dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    prompt = torch.tensor([prompt_ids(args.checkpoint, args.prompt_tokens)])

    class Clock(LogitsProcessor):  # called once per generated token, right after its forward pass
        def __init__(self) -> None:
            self.times: list[float] = []

        def __call__(self, input_ids: Any, scores: Any) -> Any:
            self.times.append(time.perf_counter())
            return scores

    results = []
    for i in range(args.repeats + 1):
        clock = Clock()
        start = time.perf_counter()
        with torch.no_grad():
            model.generate(prompt, do_sample=False, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens,
                           logits_processor=LogitsProcessorList([clock]), pad_token_id=0)
        if i:
            ttft = clock.times[0] - start
            decode = (clock.times[-1] - clock.times[0]) / (len(clock.times) - 1)
            results.append({"ttft_ms": 1000 * ttft, "prefill_tok_s": args.prompt_tokens / ttft, "decode_tok_s": 1 / decode})
    return results


def build_genai_model(checkpoint: Path, out: Path, threads: int) -> Path:
    if not (out / "genai_config.json").exists():
        subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(checkpoint), "-o", str(out),
                        "-p", "fp32", "-e", "cpu"], check=True, capture_output=True)
    config = json.loads((out / "genai_config.json").read_text())
    options = config["model"]["decoder"].setdefault("session_options", {})
    options["intra_op_num_threads"] = threads
    (out / "genai_config.json").write_text(json.dumps(config, indent=1))
    return out


def run_genai(args: argparse.Namespace) -> list[dict[str, float]]:
    import onnxruntime_genai as og

    model = og.Model(str(args.genai_dir))
    prompt = prompt_ids(args.checkpoint, args.prompt_tokens)
    total = args.prompt_tokens + args.new_tokens
    results = []
    for i in range(args.repeats + 1):
        params = og.GeneratorParams(model)
        params.set_search_options(do_sample=False, max_length=total, min_length=total)
        start = time.perf_counter()
        generator = og.Generator(model, params)
        generator.append_tokens(prompt)
        times = []
        while not generator.is_done():
            generator.generate_next_token()
            times.append(time.perf_counter())
        if i:
            ttft = times[0] - start
            decode = (times[-1] - times[0]) / (len(times) - 1)
            results.append({"ttft_ms": 1000 * ttft, "prefill_tok_s": args.prompt_tokens / ttft, "decode_tok_s": 1 / decode})
        del generator
    return results


def worker(args: argparse.Namespace) -> None:
    runs = {
        "omni-edge onnxruntime": lambda: run_omni_edge(args, "onnxruntime"),
        "omni-edge executorch": lambda: run_omni_edge(args, "executorch"),
        "transformers eager": lambda: run_transformers(args),
        "onnxruntime-genai": lambda: run_genai(args),
    }[args.worker]
    results = runs()
    print(json.dumps({"runs": results, "peak_rss_mb": peak_rss_mb()}))


# ---- the parent: machine facts, systems, table --------------------------------------
def read_bandwidth_gbs(threads: int) -> float:
    """Sustained read bandwidth: `threads` threads each summing its own 512 MiB array."""
    import numpy as np

    arrays = [np.ones(128 * 1024 * 1024, dtype=np.float32) for _ in range(threads)]
    best = 0.0
    def read(a: Any, barrier: threading.Barrier) -> None:
        barrier.wait()
        a.sum()

    for _ in range(3):
        barrier = threading.Barrier(threads)
        pool = [threading.Thread(target=read, args=(a, barrier)) for a in arrays]
        start = time.perf_counter()
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        best = max(best, sum(a.nbytes for a in arrays) / (time.perf_counter() - start) / 1e9)
    return best


def decode_weight_bytes(checkpoint: Path) -> int:
    """Bytes of weights read per decoded token: every layer, the final norm and the LM head
    (the embedding contributes one row)."""
    config = json.loads((checkpoint / "config.json").read_text())
    h, i, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    d = config.get("head_dim") or h // config["num_attention_heads"]
    q, kv = config["num_attention_heads"] * d, config["num_key_value_heads"] * d
    layer = h * q + 2 * h * kv + q * h + 3 * h * i + 2 * h + 2 * d
    return 4 * (config["num_hidden_layers"] * layer + h + v * h)


def ensure_inputs(args: argparse.Namespace) -> None:
    cli = str(Path(sys.executable).with_name("omni-edge"))
    if not (args.checkpoint / "model.safetensors").exists():
        subprocess.run([cli, "make-checkpoint", "--preset", "bench", "--out", str(args.checkpoint)], check=True)
    if not (args.artifact / "plan.pte.json").exists():
        subprocess.run([cli, "export", "llm", "--checkpoint", str(args.checkpoint), "--out", str(args.artifact),
                        "--format", "both", "--prefill-chunk", "32", "--buckets", "512,1024"], check=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", type=Path, default=ROOT / "work" / "bench-ckpt")
    p.add_argument("--artifact", type=Path, default=ROOT / "work" / "bench-art")
    p.add_argument("--genai-dir", type=Path, default=ROOT / "work" / "bench-genai")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "llm_decode.json")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return

    ensure_inputs(args)
    build_genai_model(args.checkpoint, args.genai_dir, args.threads)
    bandwidth = read_bandwidth_gbs(args.threads)
    weight_bytes = decode_weight_bytes(args.checkpoint)
    rows = []
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    for system in args.systems.split(","):
        cmd = [sys.executable, __file__, "--worker", system, *sys.argv[1:]]
        print(f"[bench] {system} ...", file=sys.stderr)
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if out.returncode != 0:
            rows.append({"system": system, "error": out.stderr.strip().splitlines()[-1] if out.stderr else "failed"})
            continue
        data = json.loads(out.stdout.strip().splitlines()[-1])
        runs = data["runs"]
        row = {"system": system, "peak_rss_mb": data["peak_rss_mb"], "n_runs": len(runs)}
        for key in ("ttft_ms", "prefill_tok_s", "decode_tok_s", "controller_ms_per_token"):
            if key in runs[0]:
                row[key] = statistics.median(r[key] for r in runs)
        row["weight_gbs"] = row["decode_tok_s"] * weight_bytes / 1e9
        rows.append(row)
    reference = next((r for r in rows if r["system"] == "onnxruntime-genai" and "decode_tok_s" in r), None)
    result = {"command": "python " + " ".join([os.path.relpath(__file__, ROOT), *sys.argv[1:]]),
              "machine": {"cpus": os.cpu_count(), "threads": args.threads, "read_bandwidth_gbs": bandwidth},
              "workload": {"prompt_tokens": args.prompt_tokens, "new_tokens": args.new_tokens, "repeats": args.repeats,
                           "checkpoint": args.checkpoint.name, "decode_weight_bytes": weight_bytes},
              "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(render(result, reference))


def render(result: dict[str, Any], reference: dict[str, Any] | None) -> str:
    m, w = result["machine"], result["workload"]
    lines = [f"`{result['command']}`", "",
             f"{w['checkpoint']}: {w['decode_weight_bytes'] / 1e6:.0f} MB of fp32 weights read per decoded token; prompt "
             f"{w['prompt_tokens']} tokens, {w['new_tokens']} new tokens, median of {w['repeats']} runs after a warm-up; "
             f"{m['threads']} threads on {m['cpus']} CPUs; measured read bandwidth {m['read_bandwidth_gbs']:.1f} GB/s.", "",
             "| system | decode tok/s | vs GenAI | weight traffic GB/s (% of bandwidth) | prefill tok/s | TTFT ms | "
             "peak RSS MB | controller ms/token |",
             "|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        if "error" in r:
            lines.append(f"| {r['system']} | failed: {r['error']} | | | | | | |")
            continue
        ratio = f"{r['decode_tok_s'] / reference['decode_tok_s']:.2f}x" if reference else "-"
        ctrl = f"{r['controller_ms_per_token']:.3f}" if "controller_ms_per_token" in r else "-"
        lines.append(f"| {r['system']} | {r['decode_tok_s']:.2f} | {ratio} | {r['weight_gbs']:.1f} "
                     f"({100 * r['weight_gbs'] / m['read_bandwidth_gbs']:.0f}%) | {r['prefill_tok_s']:.1f} | "
                     f"{r['ttft_ms']:.0f} | {r['peak_rss_mb']:.0f} | {ctrl} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
