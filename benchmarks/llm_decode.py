#!/usr/bin/env python
"""Text decode benchmark: omni-edge (ONNX Runtime and ExecuTorch backends) against ONNX Runtime
GenAI (its model builder at the same precision) and transformers eager, on the same checkpoint
with the same thread count, in one run, per precision (fp32, int8, int4).

Each system runs in its own process (so peak RSS is its own), warms up once, then generates
`--new-tokens` greedily after a `--prompt-tokens` prompt, `--repeats` times; the median is
reported. Decode speed is also shown as weight traffic (the bytes of weights one token reads)
against this machine's measured memory read bandwidth.

    python benchmarks/llm_decode.py                                 # bench checkpoint, fp32/int8/int4, 2 threads
    python benchmarks/llm_decode.py --precision int4 --repeats 5
    python benchmarks/llm_decode.py --checkpoint CKPT --artifact ART --threads 4
    python benchmarks/llm_decode.py --checkpoint work/demo/smollm2-135m-instruct --artifact work/bench-art-smollm2 \
        --genai-dir work/bench-genai-smollm2 --systems "omni-edge onnxruntime,onnxruntime-genai,transformers eager"
    python benchmarks/llm_decode.py --contexts 256,1024,4096 --precision fp32,int4 \
        --systems "omni-edge onnxruntime,omni-edge onnxruntime masked,onnxruntime-genai"

`--contexts`: one workload per total context (its prompt is the context less `--new-tokens`;
GenAI's `max_length` is the context). Each row also shows its physical limit: the weights and the
valid keys/values one token reads (at the middle of the decode) over the measured bandwidth, and
the share of a token's time that grows with the context (a straight-line fit over the contexts).
"omni-edge onnxruntime masked" is the same export with `--attention masked` (the whole bucket,
the HTP's form), to show what attending over the valid positions only changes.

Needs: `omni-edge make-checkpoint --preset bench --out work/bench-ckpt`, its exports
(`omni-edge export llm ... --format both` for fp32, `--precision int8|int4` for the quantized
ones) and GenAI's builds (run automatically when missing). The bench checkpoint has random
weights, so its quantized exports are not validated here: their quality is measured on trained
checkpoints (the export's reports; tests/export/test_cpu_quant.py).
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import peak_rss_mb  # benchmarks/common.py (the script's folder is on sys.path)
from omni_edge.files import write_text_atomic

ROOT = Path(__file__).resolve().parents[1]
SYSTEMS = ("omni-edge onnxruntime", "omni-edge executorch", "onnxruntime-genai", "transformers eager")
MASKED = "omni-edge onnxruntime masked"  # not run by default: the same export with --attention masked
PRECISIONS = ("fp32", "int8", "int4")
DEFAULT_ARTIFACT = ROOT / "work" / "bench-art"  # this benchmark's own exports (bench-art, bench-art-int8, ...)
QUANTIZED_SYSTEMS = ("omni-edge onnxruntime", MASKED, "omni-edge executorch", "onnxruntime-genai")  # int8/int4 builds
BLOCK_SIZE = 32  # int8/int4 weights per quantization block, for both omni-edge and GenAI (its default)
# Context buckets of the omni-edge exports: each benchmarked context fills one exactly, as GenAI's
# cache holds exactly max_length positions. The fused attention reads only the valid slots, so the
# bucket sets memory, not speed; the masked form attends over its whole bucket.
BUCKETS = (256, 1024, 4096, 16384)



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

    fmt = "pte" if backend == "executorch" else "onnx"
    out = artifact_dir(args, args.precision, masked=backend == "masked")
    plan = out / (f"plan.{fmt}.json" if args.precision == "fp32" else f"plan.{fmt}-{args.precision}.json")
    # Quantized exports of the random-weight bench checkpoint are not validated (see the docstring).
    session = Session.open(plan, threads=args.threads, allow_unqualified=args.precision != "fp32")
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


def artifact_dir(args: argparse.Namespace, precision: str, masked: bool = False) -> Path:
    name = args.artifact.name + ("" if precision == "fp32" else f"-{precision}") + ("-masked" if masked else "")
    return args.artifact.with_name(name)


def genai_dir(args: argparse.Namespace, precision: str) -> Path:
    return args.genai_dir if precision == "fp32" else args.genai_dir.with_name(f"{args.genai_dir.name}-{precision}")


def build_genai_model(checkpoint: Path, out: Path, threads: int, precision: str) -> Path:
    if not (out / "genai_config.json").exists():
        extra = ["--extra_options", f"block_size={BLOCK_SIZE}", "accuracy_level=4"] if precision != "fp32" else []
        subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(checkpoint), "-o", str(out),
                        "-p", precision, "-e", "cpu", *extra], check=True, capture_output=True)
    config = json.loads((out / "genai_config.json").read_text())
    options = config["model"]["decoder"].setdefault("session_options", {})
    options["intra_op_num_threads"] = threads
    (out / "genai_config.json").write_text(json.dumps(config, indent=1))
    return out


def run_genai(args: argparse.Namespace) -> list[dict[str, float]]:
    import onnxruntime_genai as og

    model = og.Model(str(genai_dir(args, args.precision)))
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
        MASKED: lambda: run_omni_edge(args, "masked"),
        "omni-edge executorch": lambda: run_omni_edge(args, "executorch"),
        "transformers eager": lambda: run_transformers(args),
        "onnxruntime-genai": lambda: run_genai(args),
    }[args.worker]
    results = runs()
    print(json.dumps({"runs": results, "peak_rss_mb": peak_rss_mb()}))


# ---- the parent: machine facts, systems, table --------------------------------------
def read_bandwidth_gbs(threads: int, gib: int = 2, passes: int = 5) -> float:
    """Sustained read bandwidth: `threads` threads streaming over a buffer of `gib` GiB (far larger
    than the last-level cache), best of `passes` passes. torch's vectorized float sum keeps the
    cores waiting on memory, not on the arithmetic (the earlier probe, numpy summing one array per
    Python thread, under-read: GenAI came out at 105% of it)."""
    import torch

    torch.set_num_threads(threads)
    # On huge pages where the OS has them, as omni-edge's weights are: on 4 KiB pages every page
    # read is also a TLB miss, and the probe read less than the engines streamed.
    buffer = mmap.mmap(-1, gib << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        buffer.madvise(mmap.MADV_HUGEPAGE)
    data = torch.frombuffer(buffer, dtype=torch.float32)
    data.fill_(1.0)  # fault the pages in
    best = 0.0
    for _ in range(passes):
        start = time.perf_counter()
        data.sum()
        best = max(best, data.numel() * 4 / (time.perf_counter() - start) / 1e9)
    del data
    buffer.close()
    return best


def transparent_hugepage() -> str:
    """The kernel's huge-page mode ([madvise] here): the probe and omni-edge's weights use huge
    pages only where it is not [never]; on 4 KiB pages the probe reads less."""
    path = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    return path.read_text().strip() if path.exists() else "unavailable"


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith(("model name", "Model")):
            return line.split(":", 1)[1].strip()
    import platform

    return platform.processor() or platform.machine()


def last_level_cache() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("L3 cache")), "?")


def _attention_layers(config: dict[str, Any]) -> int:
    """Layers with a KV cache: all of a transformer's, a hybrid's full-attention ones."""
    types = config.get("layer_types") or ["full_attention"] * config["num_hidden_layers"]
    return sum(kind != "linear_attention" for kind in types)


def decode_weight_bytes(checkpoint: Path, precision: str) -> int:
    """Bytes of weights read per decoded token: every layer's projections, the norms and the LM
    head (the embedding contributes one row). int8/int4: the packed values and one float32 scale
    per block of BLOCK_SIZE, as both omni-edge and GenAI store them. A hybrid's Gated DeltaNet
    layers read their in/out projections instead, and its attention a second (gate) query."""
    config = json.loads((checkpoint / "config.json").read_text())
    h, i, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    d = config.get("head_dim") or h // config["num_attention_heads"]
    q, kv = config["num_attention_heads"] * d, config["num_key_value_heads"] * d
    n, n_att = config["num_hidden_layers"], _attention_layers(config)
    gate = q if "linear_num_value_heads" in config else 0
    matrices = n_att * (h * (q + gate) + 2 * h * kv + q * h) + n * 3 * h * i + v * h
    if n > n_att:
        key = config["linear_num_key_heads"] * config["linear_key_head_dim"]
        value, heads = config["linear_num_value_heads"] * config["linear_value_head_dim"], config["linear_num_value_heads"]
        matrices += (n - n_att) * (h * (2 * key + 2 * value + 2 * heads) + value * h)
    norms = n * (2 * h + 2 * d) + h
    bits = {"fp32": 32, "int8": 8, "int4": 4}[precision]
    matrix_bytes = 4 * matrices if bits == 32 else matrices * bits // 8 + 4 * matrices // BLOCK_SIZE
    return matrix_bytes + 4 * norms


def kv_bytes_per_position(checkpoint: Path) -> int:
    """Bytes of float32 keys and values one cached position holds (every layer with a KV cache)."""
    config = json.loads((checkpoint / "config.json").read_text())
    d = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    return 2 * _attention_layers(config) * config["num_key_value_heads"] * d * 4


def recurrent_bytes_per_token(checkpoint: Path) -> int:
    """A hybrid's fixed-size state one token reads and writes (float32 recurrent and conv states of
    every Gated DeltaNet layer, each read once and written once); 0 for a transformer."""
    config = json.loads((checkpoint / "config.json").read_text())
    linear = config["num_hidden_layers"] - _attention_layers(config)
    if not linear:
        return 0
    vh, kd, vd = config["linear_num_value_heads"], config["linear_key_head_dim"], config["linear_value_head_dim"]
    conv = (2 * config["linear_num_key_heads"] * kd + vh * vd) * (config["linear_conv_kernel_dim"] - 1)
    return 2 * linear * (vh * kd * vd + conv) * 4


def context_share(rows: list[dict[str, Any]]) -> None:
    """Per system and precision over the contexts: fits ms/token = a + b * positions and sets each
    row's `context_share`, the part b * positions of its time (what grows with the context: the
    attention and its cache traffic)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        if "error" not in r:
            groups.setdefault((r["system"], r["precision"]), []).append(r)
    for group in groups.values():
        if len({r["mean_positions"] for r in group}) < 2:
            continue
        xs = [r["mean_positions"] for r in group]
        ys = [1000 / r["decode_tok_s"] for r in group]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
        for r, x, y in zip(group, xs, ys, strict=True):
            r["context_share"] = max(0.0, min(1.0, slope * x / y))


def _buckets(plan: Path) -> list[int] | None:
    if not plan.exists():
        return None
    buckets: list[int] = json.loads(plan.read_text())["stages"][0]["llm"]["kv"]["buckets"]
    return buckets


def _attention(plan: Path) -> str:
    kv = json.loads(plan.read_text())["stages"][0]["llm"]["kv"] if plan.exists() else {}
    return str(kv.get("attention", "masked"))


def ensure_inputs(args: argparse.Namespace, precisions: list[str]) -> None:
    cli = str(Path(sys.executable).with_name("omni-edge"))
    if not (args.checkpoint / "model.safetensors").exists():
        subprocess.run([cli, "make-checkpoint", "--preset", "bench", "--out", str(args.checkpoint)], check=True)
    buckets = ",".join(map(str, BUCKETS))
    # ExecuTorch's program only when it is benchmarked: its lowering is most of an export's time
    # (a real model's: minutes per bucket).
    formats = "both" if "omni-edge executorch" in args.systems.split(",") else "onnx"
    checked = "pte" if formats == "both" else "onnx"  # the format whose plan shows an export is complete
    systems = args.systems.split(",")
    for precision in precisions:
        for masked in (False, True) if MASKED in systems else (False,):
            out = artifact_dir(args, precision, masked)
            fmts, checked_fmt = ("onnx", "onnx") if masked else (formats, checked)
            plan = out / (f"plan.{checked_fmt}.json" if precision == "fp32" else f"plan.{checked_fmt}-{precision}.json")
            if _buckets(plan) == list(BUCKETS) and _attention(plan) == ("masked" if masked else "fused"):
                continue
            if out.exists() and not out.name.startswith(DEFAULT_ARTIFACT.name):
                # Never delete an export this benchmark did not make: say what it needs instead.
                raise SystemExit(f"{out}: not this benchmark's export ({plan.name} with KV buckets {list(BUCKETS)}); "
                                 "pass another --artifact to have it made there")
            shutil.rmtree(out, ignore_errors=True)
            flags = ["--format", fmts, "--attention", "masked" if masked else "fused"]
            if precision != "fp32":
                flags += ["--precision", precision, "--block-size", str(BLOCK_SIZE), "--no-validate"]
            subprocess.run([cli, "export", "llm", "--checkpoint", str(args.checkpoint), "--out", str(out), *flags,
                            "--prefill-chunk", "32", "--buckets", buckets], check=True)
        if "onnxruntime-genai" in systems:
            build_genai_model(args.checkpoint, genai_dir(args, precision), args.threads, precision)


def without_option(argv: list[str], option: str) -> list[str]:
    """argv without `option VALUE` / `option=VALUE`."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == option:
            skip = True
        elif not arg.startswith(option + "="):
            out.append(arg)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", type=Path, default=ROOT / "work" / "bench-ckpt")
    p.add_argument("--artifact", type=Path, default=DEFAULT_ARTIFACT)
    p.add_argument("--genai-dir", type=Path, default=ROOT / "work" / "bench-genai")
    p.add_argument("--precision", default=",".join(PRECISIONS), help="comma-separated: fp32,int8,int4")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--contexts", default="", help="comma-separated total contexts (e.g. 256,1024,4096): one workload "
                                                  "each, its prompt the context less --new-tokens")
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "llm_decode.json")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return

    precisions = [x for x in args.precision.split(",") if x]
    if not precisions or any(x not in PRECISIONS for x in precisions):
        p.error(f"--precision takes a comma-separated list of {', '.join(PRECISIONS)}")
    contexts = [int(x) for x in args.contexts.split(",") if x] or [args.prompt_tokens + args.new_tokens]
    if any(c <= args.new_tokens or c > BUCKETS[-1] for c in contexts):
        p.error(f"--contexts: each must exceed --new-tokens and fit the largest bucket ({BUCKETS[-1]})")
    ensure_inputs(args, precisions)
    bandwidth = read_bandwidth_gbs(args.threads)
    rows = []
    for context in contexts:
        for precision in precisions:
            rows += measure(args, context, precision, bandwidth)
    context_share(rows)
    result = {"command": "python " + " ".join([os.path.relpath(__file__, ROOT), *sys.argv[1:]]),
              "machine": {"cpu": cpu_model(), "l3_cache": last_level_cache(), "cpus": os.cpu_count(),
                          "threads": args.threads, "read_bandwidth_gbs": bandwidth,
                          "transparent_hugepage": transparent_hugepage()},
              "workload": {"prompt_tokens": contexts[0] - args.new_tokens, "new_tokens": args.new_tokens,
                           "contexts": contexts, "repeats": args.repeats,
                           "checkpoint": args.checkpoint.name, "block_size": BLOCK_SIZE, "buckets": list(BUCKETS)},
              "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(args.out, json.dumps(result, indent=1) + "\n")
    print(render(result))


def measure(args: argparse.Namespace, context: int, precision: str, bandwidth: float) -> list[dict[str, Any]]:
    """Every system's row at one context and precision, each system in a worker process."""
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    prompt = context - args.new_tokens
    passed = without_option(without_option(sys.argv[1:], "--precision"), "--prompt-tokens")  # each worker gets its own
    weight_bytes = decode_weight_bytes(args.checkpoint, precision)
    # The keys/values a decode step reads, at the middle of the decode: the valid ones.
    mean_positions = prompt + args.new_tokens / 2
    kv_bytes = kv_bytes_per_position(args.checkpoint) * mean_positions + recurrent_bytes_per_token(args.checkpoint)
    rows = []
    for system in args.systems.split(","):
        if precision != "fp32" and system not in QUANTIZED_SYSTEMS:
            continue
        cmd = [sys.executable, __file__, "--worker", system, "--precision", precision, "--prompt-tokens", str(prompt),
               *passed]
        print(f"[bench] {system} {precision} context {context} ...", file=sys.stderr)
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if out.returncode != 0:
            rows.append({"system": system, "precision": precision, "context": context,
                         "error": out.stderr.strip().splitlines()[-1] if out.stderr else "failed"})
            continue
        data = json.loads(out.stdout.strip().splitlines()[-1])
        runs = data["runs"]
        row = {"system": system, "precision": precision, "context": context, "mean_positions": mean_positions,
               "peak_rss_mb": data["peak_rss_mb"], "n_runs": len(runs), "decode_weight_bytes": weight_bytes,
               "decode_kv_bytes": kv_bytes, "decode_runs_tok_s": [r["decode_tok_s"] for r in runs]}
        for key in ("ttft_ms", "prefill_tok_s", "decode_tok_s", "controller_ms_per_token"):
            if key in runs[0]:
                row[key] = statistics.median(r[key] for r in runs)
        row["weight_gbs"] = row["decode_tok_s"] * weight_bytes / 1e9
        row["limit_tok_s"] = bandwidth * 1e9 / (weight_bytes + kv_bytes)
        rows.append(row)
    return rows


def render(result: dict[str, Any]) -> str:
    m, w = result["machine"], result["workload"]
    lines = [f"`{result['command']}`", "",
             f"{m['cpu']} (L3 {m['l3_cache']}), {m['threads']} threads on {m['cpus']} CPUs; measured read bandwidth "
             f"{m['read_bandwidth_gbs']:.1f} GB/s (transparent huge pages: {m.get('transparent_hugepage', '?')}). "
             f"{w['checkpoint']}: contexts {w.get('contexts', [w['prompt_tokens'] + w['new_tokens']])} (prompt = "
             f"context - {w['new_tokens']} new tokens), median of {w['repeats']} runs after a warm-up; int8/int4 in "
             f"blocks of {w['block_size']}; omni-edge KV buckets {w.get('buckets', '?')}. Limit: (weights + valid "
             "keys/values at the middle of the decode) read once per token at the measured bandwidth.", "",
             "| context | precision | system | decode tok/s | vs GenAI | vs own fp32 | limit tok/s (% reached) | "
             "context share | weight MB/token | weight traffic GB/s (% of bandwidth) | prefill tok/s | TTFT ms | "
             "peak RSS MB | controller ms/token |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    rows = result["rows"]
    ok = [r for r in rows if "error" not in r]
    for r in rows:
        context = r.get("context", w["prompt_tokens"] + w["new_tokens"])
        if "error" in r:
            lines.append(f"| {context} | {r['precision']} | {r['system']} | failed: {r['error']} |" + " |" * 10)
            continue
        same = [g for g in ok if g.get("context") == r.get("context")]
        genai = next((g for g in same if g["system"] == "onnxruntime-genai" and g["precision"] == r["precision"]), None)
        fp32 = next((g for g in same if g["system"] == r["system"] and g["precision"] == "fp32"), None)
        vs_genai = f"{r['decode_tok_s'] / genai['decode_tok_s']:.2f}x" if genai else "-"
        vs_fp32 = f"{r['decode_tok_s'] / fp32['decode_tok_s']:.2f}x" if fp32 else "-"
        ctrl = f"{r['controller_ms_per_token']:.3f}" if "controller_ms_per_token" in r else "-"
        limit = (f"{r['limit_tok_s']:.1f} ({100 * r['decode_tok_s'] / r['limit_tok_s']:.0f}%)"
                 if "limit_tok_s" in r else "-")
        share = f"{100 * r['context_share']:.0f}%" if "context_share" in r else "-"
        lines.append(f"| {context} | {r['precision']} | {r['system']} | {r['decode_tok_s']:.2f} | {vs_genai} | {vs_fp32} | "
                     f"{limit} | {share} | {r['decode_weight_bytes'] / 1e6:.0f} | {r['weight_gbs']:.1f} "
                     f"({100 * r['weight_gbs'] / m['read_bandwidth_gbs']:.0f}%) | {r['prefill_tok_s']:.1f} | "
                     f"{r['ttft_ms']:.0f} | {r['peak_rss_mb']:.0f} | {ctrl} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
