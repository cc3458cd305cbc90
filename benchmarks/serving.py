#!/usr/bin/env python
"""Serving overhead: the same plan and chat, greedy, through `omni-edge-run serve` with the
official `openai` client streaming (what a client sees: time to the first content chunk, the
decode rate between the first and the last), against the same controller in-process
(`omni-edge-run --chat --json --repeat`: each request's own ttft_ms and decode rate, warm as the
server's session is). Both in one run, same threads; the server's own metrics for each response
(GET /metrics after it) separate the controller's time from the transport's.

    python benchmarks/serving.py                       # the main job's SmolLM2, results/serving.json
    python benchmarks/serving.py --plan PLAN --tokens 64 --requests 10 --threads 2

Reported: medians over the requests after a warm-up one, and the server's overhead per response
(TTFT) and per token (1 / rate through the server - 1 / rate in-process).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from omni_edge.files import write_text_atomic

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / ".venv" / "bin" / "omni-edge-run"
PROMPT = "Write a short story about a robot who learns to paint."


def in_process(plan: Path, tokens: int, threads: int, requests: int) -> list[dict[str, float]]:
    """The same chat `requests` times in one omni-edge-run process (--repeat), the first a warm-up:
    each request's own ttft_ms and decode rate, as the server's session runs them (warm)."""
    done = subprocess.run([str(RUN), "--plan", str(plan), "--chat", "--prompt", PROMPT, "--max-new-tokens", str(tokens),
                           "--ignore-stop-tokens", "--temperature", "0", "--threads", str(threads), "--json", "--repeat",
                           str(requests + 1)], capture_output=True, text=True, check=True)
    ends = [json.loads(line) for line in done.stdout.splitlines() if '"kind":"done"' in line]
    return [{"ttft_ms": e["ttft_ms"], "decode_tok_s": e["decode_tok_s"]} for e in ends[1:]]


def through_server(client: Any, model: str, tokens: int) -> dict[str, float]:
    """One streamed request as the client sees it, and the server's metrics of it."""
    start = time.perf_counter()
    stamps: list[float] = []
    stream = client.chat.completions.create(model=model, messages=[{"role": "user", "content": PROMPT}], max_tokens=tokens,
                                            temperature=0, stream=True, extra_body={"ignore_eos": True})
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            stamps.append(time.perf_counter())
    # The last response's metrics, as /metrics has them (the stream's comment is skipped by the client).
    n = len(stamps)
    return {"ttft_ms": (stamps[0] - start) * 1000, "decode_tok_s": (n - 1) / (stamps[-1] - stamps[0]) if n > 1 else 0.0,
            "tokens": n}


def _server_metrics(url: str) -> dict[str, float]:
    import urllib.request

    with urllib.request.urlopen(url.removesuffix("/v1") + "/metrics", timeout=30) as page:
        rows = [line.split() for line in page.read().decode().splitlines() if line and not line.startswith("#")]
    return {row[0]: float(row[1]) for row in rows if len(row) == 2}


def median(rows: list[dict[str, float]], key: str) -> float:
    return float(statistics.median(r[key] for r in rows))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--plan", type=Path, default=ROOT / "work" / "demo" / "artifact" / "plan.json")
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--requests", type=int, default=6)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "serving.json")
    args = p.parse_args()
    if not args.plan.is_file():
        p.error(f"{args.plan}: no plan (the default is the main job's: run ./scripts/setup.sh first)")
    import openai

    local = in_process(args.plan, args.tokens, args.threads, args.requests)
    server = subprocess.Popen([str(RUN), "serve", "--plan", str(args.plan), "--port", "0", "--threads", str(args.threads)],
                              stdout=subprocess.PIPE, text=True, env={k: v for k, v in os.environ.items()
                                                                       if k != "OMNI_EDGE_API_KEY"})
    try:
        assert server.stdout is not None
        listening = json.loads(server.stdout.readline())
        client = openai.OpenAI(base_url=listening["url"], api_key="none", max_retries=0, timeout=600)
        remote, controller = [], []
        for i in range(args.requests + 1):
            row = through_server(client, listening["model"], args.tokens)
            metrics = _server_metrics(listening["url"])
            if i:
                remote.append(row)
                controller.append({"ttft_ms": metrics["omni_edge_last_ttft_ms"],
                                   "decode_tok_s": metrics["omni_edge_last_decode_tokens_per_second"]})
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    result = {
        "plan": str(args.plan), "tokens": args.tokens, "requests": args.requests, "threads": args.threads,
        "in_process": {k: median(local, k) for k in ("ttft_ms", "decode_tok_s")},
        "server_client_side": {k: median(remote, k) for k in ("ttft_ms", "decode_tok_s")},
        "server_controller_side": {k: median(controller, k) for k in ("ttft_ms", "decode_tok_s")},
    }
    inproc, client_side = result["in_process"], result["server_client_side"]
    result["overhead"] = {
        "ttft_ms": client_side["ttft_ms"] - inproc["ttft_ms"],
        "ttft_ratio": client_side["ttft_ms"] / inproc["ttft_ms"],
        "decode_rate_ratio": client_side["decode_tok_s"] / inproc["decode_tok_s"],
        "per_token_ms": 1000 / client_side["decode_tok_s"] - 1000 / inproc["decode_tok_s"],
    }
    write_text_atomic(args.out, json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
