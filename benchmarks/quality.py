#!/usr/bin/env python
"""Quality per precision on one checkpoint: each precision exported for the CPU (ONNX Runtime,
optionally ExecuTorch too) or for the HTP (QNN context binaries, validated on the emulator that
the onnxruntime-qnn wheel carries) with the export's own validation against transformers fp32,
and the reports' numbers as the README's table rows (logit SQNR and top-1 teacher-forced, greedy
agreement over 64 tokens to the near-tie rule, perplexity change on held-out text).

    python benchmarks/quality.py                                   # the main job's SmolLM2-135M-Instruct
    python benchmarks/quality.py --checkpoint CKPT --precision int8,int4 --format both
    python benchmarks/quality.py --target qnn-htp --precision w8a16,w4a16,a16w16 [--soc sm8750]
    python benchmarks/quality.py --target qnn-htp --teacher-forced-only   # SQNR and top-1 alone

The HTP emulator takes seconds per step of a real model: the HTP route exports without validation
and measures on the export afterwards, the task report's gated numbers without its reported-only
free runs (about 290 emulated steps, ~45 min per precision here); `--teacher-forced-only` measures
the numerical report's 36 teacher-forced positions alone (greedy and perplexity not measured).

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


def _component(plan: Path) -> Path:
    return plan.parent / json.loads(plan.read_text())["stages"][0]["artifact"]


def _reports_written(component: Path) -> bool:
    """An export that was stopped may have written its plan before its validation ended, and one
    made for --teacher-forced-only has a skipped task report."""
    return (component / "reports" / "task.json").is_file() and "greedy_agreement_64" in checks(component, "task")


def _on_plan(checkpoint: Path, plan: Path, component: Path, task: bool) -> dict[str, float]:
    import torch
    from omni_edge.export.decoder.validation import measure_on_plan
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(checkpoint), dtype=torch.float32).eval()
    return measure_on_plan(model, plan, component / "tokenizer.json", task=task, free_run=False)


def measure(checkpoint: Path, precision: str, fmt: str, work: Path, forced_only: bool) -> dict[str, float]:
    """fmt: onnx, pte, or qnn-SOC (the HTP route for that SoC: exported unvalidated, measured after)."""
    out = work / f"{precision}-{fmt}"
    plan = out / (f"plan.{fmt}-{precision}.json" if fmt.startswith("qnn-") else "plan.json")
    after = fmt.startswith("qnn-") or forced_only
    if not (plan.exists() and (after or _reports_written(_component(plan)))):
        print(f"exporting {checkpoint.name} at {precision} ({fmt}) to {out}", file=sys.stderr)
        route = (["--target", "qnn-htp", "--soc", fmt.removeprefix("qnn-")] if fmt.startswith("qnn-")
                 else ["--format", fmt])
        omni_edge("export", "llm", "--checkpoint", str(checkpoint), "--out", str(out), *route,
                  "--precision", precision, "--buckets", "128,512", "--prefill-chunk", "16",
                  *(["--no-validate"] if after else []))
    component = _component(plan)
    if after:
        got = _on_plan(checkpoint, plan, component, task=not forced_only)
    else:
        got = checks(component, "numerical") | checks(component, "task")
    return {k: got[k] for k in NUMERICAL + TASK if k in got} | {"positions": got.get("positions_compared", 0.0)}


def _task_cells(m: dict[str, float]) -> str:
    if "greedy_agreement_64" not in m:
        return "not measured | not measured"
    return f"{m['greedy_agreement_64']:.2f} | {100 * m['perplexity_rel_delta']:.1f}%"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", type=Path, default=ROOT / "work" / "demo" / "smollm2-135m-instruct",
                   help="default: the main job's SmolLM2-135M-Instruct (run ./scripts/setup.sh first)")
    p.add_argument("--precision", default="fp32,int8,int4")
    p.add_argument("--format", choices=["onnx", "pte", "both"], default="onnx", help="the CPU route's formats")
    p.add_argument("--target", choices=["cpu", "qnn-htp"], default="cpu")
    p.add_argument("--soc", default="sm8750", help="qnn-htp: the SoC to compile for")
    p.add_argument("--teacher-forced-only", action="store_true",
                   help="export without validation and measure SQNR and top-1 on 36 teacher-forced positions alone")
    args = p.parse_args()
    if "," in args.soc:
        p.error("--soc names one SoC (run once per SoC)")
    if not (args.checkpoint / "config.json").is_file():
        p.error(f"{args.checkpoint}: not a checkpoint directory (the main job makes the default one)")
    work = ROOT / "work" / "quality" / args.checkpoint.name
    formats = ["onnx", "pte"] if args.format == "both" else [args.format]
    if args.target == "qnn-htp":
        formats = [f"qnn-{args.soc}"]
    print("| precision | checkpoint | runtime | logit SQNR dB | top-1 | greedy agreement (64) | perplexity delta |")
    print("|---|---|---|---|---|---|---|")
    for precision in args.precision.split(","):
        for fmt in formats:
            m = measure(args.checkpoint, precision, fmt, work, args.teacher_forced_only)
            runtime = {"onnx": "ONNX Runtime", "pte": "ExecuTorch"}.get(fmt, f"QNN HTP emulator ({args.soc})")
            print(f"| {precision} | {args.checkpoint.name} | {runtime} | {m['logit_sqnr_db']:.1f} | "
                  f"{m['top1_agreement']:.2f} | {_task_cells(m)} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
