#!/usr/bin/env python
"""Quality per precision on one checkpoint: each precision exported for the CPU (ONNX Runtime,
optionally ExecuTorch too) with the export's own validation against transformers fp32, and the
reports' numbers as the README's table rows (logit SQNR and top-1 teacher-forced, greedy
agreement over 64 tokens to the near-tie rule, perplexity change on held-out text).

    python benchmarks/quality.py                                   # the main job's SmolLM2-135M-Instruct
    python benchmarks/quality.py --checkpoint CKPT --precision int8,int4 --format both

Exports go to work/quality/<checkpoint>/<precision>-<format> and are reused when present.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from common import omni_edge  # benchmarks/common.py (the script's folder is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
NUMERICAL = ("logit_sqnr_db", "top1_agreement")
TASK = ("greedy_agreement_64", "perplexity_rel_delta")


def checks(component: Path, report: str) -> dict[str, float]:
    data = json.loads((component / "reports" / f"{report}.json").read_text())
    return {c["name"]: float(c["observed"]) for c in data["checks"]}


def measure(checkpoint: Path, precision: str, fmt: str, work: Path) -> dict[str, float]:
    out = work / f"{precision}-{fmt}"
    if not (out / "plan.json").exists():
        print(f"exporting {checkpoint.name} at {precision} ({fmt}) to {out}", file=sys.stderr)
        omni_edge("export", "llm", "--checkpoint", str(checkpoint), "--out", str(out), "--format", fmt,
                  "--precision", precision, "--buckets", "128,512", "--prefill-chunk", "16")
    component = out / json.loads((out / "plan.json").read_text())["stages"][0]["artifact"]
    got = checks(component, "numerical") | checks(component, "task")
    return {k: got[k] for k in NUMERICAL + TASK if k in got} | {"positions": got.get("positions_compared", 0.0)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", type=Path, default=ROOT / "work" / "demo" / "smollm2-135m-instruct",
                   help="default: the main job's SmolLM2-135M-Instruct (run ./scripts/setup.sh first)")
    p.add_argument("--precision", default="fp32,int8,int4")
    p.add_argument("--format", choices=["onnx", "pte", "both"], default="onnx")
    args = p.parse_args()
    if not (args.checkpoint / "config.json").is_file():
        p.error(f"{args.checkpoint}: not a checkpoint directory (the main job makes the default one)")
    work = ROOT / "work" / "quality" / args.checkpoint.name
    formats = ["onnx", "pte"] if args.format == "both" else [args.format]
    print("| precision | checkpoint | runtime | logit SQNR dB | top-1 | greedy agreement (64) | perplexity delta |")
    print("|---|---|---|---|---|---|---|")
    for precision in args.precision.split(","):
        for fmt in formats:
            m = measure(args.checkpoint, precision, fmt, work)
            runtime = {"onnx": "ONNX Runtime", "pte": "ExecuTorch"}[fmt]
            print(f"| {precision} | {args.checkpoint.name} | {runtime} | {m['logit_sqnr_db']:.1f} | "
                  f"{m['top1_agreement']:.2f} | {m['greedy_agreement_64']:.2f} | {100 * m['perplexity_rel_delta']:.1f}% |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
