"""What every benchmark here shares: a worker process's peak RSS, the `omni-edge` CLI for making
and exporting checkpoints, and running one system in a worker process of its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return float(line.split()[1]) / 1024
    return 0.0


def omni_edge(*argv: str) -> None:
    """`omni-edge ARGV...` with this interpreter, its output hidden, failing loudly."""
    subprocess.run([sys.executable, "-m", "omni_edge.cli", *argv], check=True, stdout=subprocess.DEVNULL)


def run_worker(cmd: list[str]) -> dict[str, Any]:
    """A worker process's result: the JSON object on its last output line."""
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result
