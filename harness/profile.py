"""The profiling protocol: deploy, verify, then measure startup and requests on a device.

Groups, in order, each with warm-up runs that are discarded:
  startup        RUNS process launches of one short request each: process start (spawn until
                 main() has run: spawn-to-session-line minus load), load (plan, verify, graphs),
                 first output (spawn to first token). The first launch after the push is
                 reported as "cold", the rest as "warm restart" (the OS file cache is warm).
  concurrency C  C processes at once, each repeating the workload on its loaded session, until
                 at least RUNS measured requests: TTFT, token intervals, decode rate, total.
Memory of every process is sampled while it runs (RSS and, where the OS reports it, PSS):
loading peak (until the session line) vs steady (during measured requests), and compared with
the admission ledger's prediction. Every raw sample, stdout/stderr log and generated text is
kept under OUT/raw; report.json has p50/p95 and n per metric; report.md and PNG plots render it.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omni_edge.files import write_text_atomic
from omni_edge.harness.deploy import Deployment, verify_on_target
from omni_edge.harness.devices.base import DeviceError, MemorySample

_PARAGRAPH = ("The module provides a small set of tools for working with text, files and numbers. "
              "Each function documents its arguments, what it returns and which errors it raises. ")


@dataclass(frozen=True)
class Workload:
    name: str
    prompt: str
    max_new_tokens: int


MIN_RUNS = 20  # measured requests per group the protocol asks for; fewer is reported as not met
WORKLOADS = {
    "short": Workload("short", "The module provides", 32),
    "medium": Workload("medium", _PARAGRAPH * 3 + "In short,", 96),
    "long": Workload("long", _PARAGRAPH * 8 + "To summarize,", 160),
}


@dataclass
class ProcessRun:
    """One launched omni-edge-run: its lines with arrival times, memory samples and exit."""

    group: str
    index: int
    spawn_t: float = 0.0
    lines: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    memory: list[MemorySample] = field(default_factory=list)
    returncode: int | None = None
    stderr: str = ""
    timed_out: bool = False
    memory_error: str = ""

    def session(self) -> tuple[float, dict[str, Any]] | None:
        return next(((t, e) for t, e in self.lines if e.get("kind") == "session"), None)

    def requests(self) -> list[list[tuple[float, dict[str, Any]]]]:
        """Lines split per request (each ends with a terminal event)."""
        out: list[list[tuple[float, dict[str, Any]]]] = []
        current: list[tuple[float, dict[str, Any]]] = []
        for t, e in self.lines:
            if e.get("kind") == "session":
                continue
            current.append((t, e))
            if e.get("kind") in ("done", "cancelled", "error"):
                out.append(current)
                current = []
        return out


def summarize(values: list[float]) -> dict[str, float | int | None]:
    """p50/p95 (nearest-rank on sorted samples), mean, min, max and the sample count."""
    if not values:
        return {"n": 0, "p50": None, "p95": None, "mean": None, "min": None, "max": None}
    s = sorted(values)

    def rank(q: float) -> float:
        return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]

    return {"n": len(s), "p50": rank(0.50), "p95": rank(0.95), "mean": statistics.fmean(s), "min": s[0], "max": s[-1]}


class Profiler:
    def __init__(self, deployment: Deployment, workload: Workload, out: Path, *, runs: int = 20, warmup: int = 1,
                 threads: int = 0, sample_interval: float = 0.05, timeout: float = 900.0) -> None:
        if runs < 1 or warmup < 0:
            raise ValueError("--runs must be at least 1 and --warmup at least 0")
        self.d, self.workload, self.out = deployment, workload, out
        self.runs, self.warmup, self.threads = runs, warmup, threads
        self.sample_interval, self.timeout = sample_interval, timeout
        self.processes: list[ProcessRun] = []
        (out / "raw" / "logs").mkdir(parents=True, exist_ok=True)

    def _argv(self, repeat: int, max_new_tokens: int, info: bool = False) -> list[str]:
        argv = [self.d.binary, "--plan", self.d.plan, "--prompt", self.workload.prompt, "--json", "--profile",
                "--max-new-tokens", str(max_new_tokens), "--ignore-stop-tokens", "--repeat", str(repeat)]
        if self.threads:
            argv += ["--threads", str(self.threads)]
        return argv + (["--info"] if info else [])

    def launch(self, group: str, index: int, repeat: int, max_new_tokens: int, info: bool = False) -> ProcessRun:
        run = ProcessRun(group, index)
        stop = threading.Event()
        pid_box: list[int] = []

        def sample() -> None:
            while not stop.is_set():
                if pid_box:
                    try:
                        m = self.d.device.memory(pid_box[0])
                    except (DeviceError, OSError) as exc:  # keep the run; say why its memory trace ends
                        run.memory_error = str(exc)
                        return
                    if m is not None:
                        run.memory.append(MemorySample(t=time.perf_counter() - run.spawn_t, rss_kb=m.rss_kb,
                                                       pss_kb=m.pss_kb))
                stop.wait(self.sample_interval)

        def on_line(line: str) -> None:
            t = time.perf_counter() - run.spawn_t
            try:
                event = json.loads(line)
            except ValueError:
                event = {"kind": "unparsed", "text": line}
            run.lines.append((t, event if isinstance(event, dict) else {"kind": "unparsed", "text": line}))

        sampler = threading.Thread(target=sample, daemon=True)
        run.spawn_t = time.perf_counter()
        sampler.start()
        result = self.d.device.stream(self._argv(repeat, max_new_tokens, info), on_line, timeout=self.timeout,
                                      env=self.d.env, on_start=pid_box.append)
        stop.set()
        sampler.join()
        run.returncode, run.stderr, run.timed_out = result.returncode, result.stderr, result.timed_out
        stem = self.out / "raw" / "logs" / f"{group}-{index:03d}"
        stem.with_suffix(".stdout.jsonl").write_text(  # arrival times kept: intervals can be recomputed
            "".join(json.dumps({"t_s": round(t, 6), "event": e}) + "\n" for t, e in run.lines))
        stem.with_suffix(".stderr.txt").write_text(run.stderr)
        self.processes.append(run)
        if run.returncode != 0:
            raise DeviceError(f"{self.d.device.serial}: omni-edge-run exited {run.returncode}"
                              f"{' (timed out)' if run.timed_out else ''}: {run.stderr.strip()[-800:]}")
        return run

    # ---- groups ------------------------------------------------------------------------------

    def startup(self) -> dict[str, Any]:
        launches = [self.launch("startup", i, 1, 4, info=(i == 0)) for i in range(self.warmup + self.runs)]
        rows: list[dict[str, Any]] = []
        for i, run in enumerate(launches):
            session = run.session()
            first = next((t for t, e in run.lines if e.get("kind") == "token"), None)
            if session is None or first is None:
                raise DeviceError(f"startup run {i}: no session line or no token in the output")
            t_session, s = session
            load = float(s["load_ms"])
            rows.append({"run": i, "process_start_ms": max(0.0, t_session * 1000 - load), "load_ms": load,
                         "first_output_ms": first * 1000, "ledger": s.get("ledger")})
        measured = rows[self.warmup:]
        metrics = {k: summarize([r[k] for r in measured]) for k in ("process_start_ms", "load_ms", "first_output_ms")}
        return {"cold": rows[0], "warm_restart": metrics, "n_launches": len(rows), "rows": rows,
                "placement": _placement(launches[0].stderr)}

    def concurrency(self, c: int) -> dict[str, Any]:
        per_process = self.warmup + math.ceil(self.runs / c)
        group = f"concurrency-{c}"
        results: list[ProcessRun | BaseException] = [RuntimeError("not run")] * c

        def worker(i: int) -> None:
            try:
                results[i] = self.launch(group, i, per_process, self.workload.max_new_tokens)
            except BaseException as exc:
                results[i] = exc

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(c)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for r in results:
            if isinstance(r, BaseException):
                raise r
        rows: list[dict[str, Any]] = []
        intervals_all: list[float] = []
        timelines: list[dict[str, Any]] = []
        steady_rss: list[float] = []
        for run in results:
            assert isinstance(run, ProcessRun)
            session = run.session()
            start = session[0] if session else 0.0
            for k, request in enumerate(run.requests()):
                done_t, done = request[-1]
                token_ts = [t for t, e in request if e.get("kind") == "token"]
                if k >= self.warmup and done.get("kind") == "done":
                    intervals = [(b - a) * 1000 for a, b in itertools.pairwise(token_ts)]
                    intervals_all += intervals
                    timelines.append({"process": run.index, "request": k, "intervals_ms": intervals})
                    rows.append({"process": run.index, "request": k, "ttft_ms": done.get("ttft_ms"),
                                 "total_ms": done.get("total_ms"), "decode_tok_s": done.get("decode_tok_s"),
                                 "prefill_tok_s": done.get("prefill_tok_s"), "n_prompt_tokens": done.get("n_prompt_tokens"),
                                 "n_generated_tokens": done.get("n_generated_tokens"),
                                 "wall_ms": (done_t - start) * 1000, "peak_rss_mb": done.get("peak_rss_mb")})
                    steady_rss += [m.rss_kb / 1024 for m in run.memory if start <= m.t <= done_t]
                start = done_t
        metrics = {k: summarize([float(r[k]) for r in rows if r[k] is not None])
                   for k in ("ttft_ms", "total_ms", "decode_tok_s", "prefill_tok_s", "wall_ms")}
        metrics["token_interval_ms"] = summarize(intervals_all)
        metrics["steady_rss_mb"] = summarize(steady_rss)
        return {"concurrency": c, "requests": len(rows), "metrics": metrics, "rows": rows, "timelines": timelines}

    def memory(self) -> dict[str, Any]:
        loading, steady, pss = [], [], []
        for run in self.processes:
            session = run.session()
            t_loaded = session[0] if session else math.inf
            loading += [m.rss_kb / 1024 for m in run.memory if m.t <= t_loaded]
            steady += [m.rss_kb / 1024 for m in run.memory if m.t > t_loaded]
            pss += [m.pss_kb / 1024 for m in run.memory if m.pss_kb is not None]
        peaks = [float(e["peak_rss_mb"]) for run in self.processes for _, e in run.lines if "peak_rss_mb" in e]
        return {"loading_rss_mb": summarize(loading), "steady_rss_mb": summarize(steady), "pss_mb": summarize(pss),
                "process_peak_rss_mb": summarize(peaks), "samples": sum(len(r.memory) for r in self.processes),
                "pss_readable": bool(pss)}


def _placement(stderr: str) -> list[dict[str, Any]]:
    """The placements of `omni-edge-run --info` (its session info, one JSON line on stderr)."""
    for line in stderr.splitlines():
        if line.startswith("{") and '"placements"' in line:
            try:
                return list(json.loads(line)["placements"])
            except (ValueError, KeyError):
                return []
    return []


def run_profile(deployment: Deployment, workload: Workload, out: Path, *, runs: int = 20, warmup: int = 1,
                concurrency: list[int] | None = None, threads: int = 0, progress: Any = None) -> dict[str, Any]:
    """The whole protocol; writes OUT/report.json, OUT/report.md, OUT/*.png and OUT/raw/."""
    if runs < 1 or warmup < 0 or any(c < 1 for c in (concurrency or [1])):
        raise ValueError(f"runs >= 1, warmup >= 0 and concurrency >= 1 (got {runs}, {warmup}, {concurrency})")
    out.mkdir(parents=True, exist_ok=True)
    facts = deployment.device.facts()
    verified = verify_on_target(deployment)
    # Verification just read every artifact byte: evict it, or the "cold" start is a warm one.
    cold_cache = deployment.device.drop_page_cache()
    profiler = Profiler(deployment, workload, out, runs=runs, warmup=warmup, threads=threads)
    steps = [("startup", profiler.startup)] + [(f"concurrency-{c}", lambda c=c: profiler.concurrency(c))
                                               for c in (concurrency or [1])]
    groups: dict[str, Any] = {}
    for name, step in steps:
        if progress is not None:
            progress.set_description(f"profile: {name}")
        groups[name] = step()
        if progress is not None:
            progress.update(1)
    memory = profiler.memory()
    memory["sampling_errors"] = sorted({r.memory_error for r in profiler.processes if r.memory_error})
    ledger = groups["startup"]["cold"].get("ledger") or {}
    predicted = sum(r["bytes"].get("device_ram", 0) + r["bytes"].get("wsl_quota", 0)
                    for r in ledger.get("reservations", []))
    measured = memory["process_peak_rss_mb"]["max"]
    report = {
        "schema": "omni-edge.profile/1",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "device": facts.to_dict(),
        "deployment": deployment.to_dict(),
        "verified_on_target": [{"component": v["manifest"]["component"], "qualified": v["qualified"]} for v in verified],
        "workload": {"name": workload.name, "prompt_chars": len(workload.prompt),
                     "max_new_tokens": workload.max_new_tokens, "runs": runs, "warmup": warmup},
        "protocol": {"measured_per_group": runs, "minimum": MIN_RUNS, "met": runs >= MIN_RUNS,
                     "cold_start_page_cache": "dropped" if cold_cache else "warm (could not drop it: needs root)"},
        "placement": groups["startup"]["placement"],
        "startup": {k: v for k, v in groups["startup"].items() if k not in ("placement", "rows")},
        "groups": {k: {kk: vv for kk, vv in v.items() if kk not in ("rows", "timelines")}
                   for k, v in groups.items() if k != "startup"},
        "memory": memory,
        "ledger": {"predicted_mb": predicted / (1 << 20) if predicted else None, "measured_peak_rss_mb": measured,
                   "measured_over_predicted": (measured / (predicted / (1 << 20))) if predicted and measured else None},
        "speech": None,  # the plan has no speech stage; filled when it does
        "raw": "raw/",
    }
    (out / "raw" / "samples.json").write_text(json.dumps({
        "startup_rows": groups["startup"]["rows"],
        "groups": {k: {"rows": v["rows"], "timelines": v["timelines"]} for k, v in groups.items() if k != "startup"},
        "memory": [{"group": r.group, "process": r.index, "samples": [[m.t, m.rss_kb, m.pss_kb] for m in r.memory]}
                   for r in profiler.processes],
    }) + "\n")
    outputs = out / "raw" / "outputs.txt"
    outputs.write_text("".join(
        f"[{r.group} #{r.index} request {k}] " + "".join(str(e.get("text", "")) for _, e in req if e.get("kind") == "token")
        + "\n" for r in profiler.processes for k, req in enumerate(r.requests())))
    write_text_atomic(out / "report.json", json.dumps(report, indent=2) + "\n")
    from omni_edge.harness.report import write_markdown, write_plots

    report["plots"] = write_plots(report, json.loads((out / "raw" / "samples.json").read_text()), out)
    write_text_atomic(out / "report.json", json.dumps(report, indent=2) + "\n")
    write_markdown(report, out / "report.md")
    return report
