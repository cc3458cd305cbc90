"""The profiling protocol: deploy, verify, then measure startup and requests on a device.

Groups, in order, each with warm-up runs that are discarded:
  startup        RUNS process launches of one short request each: process start (spawn until
                 main() has run: spawn-to-session-line minus load), load (plan, verify, graphs),
                 first output (spawn to first token). The first launch after the push is
                 reported as "cold", the rest as "warm restart" (the OS file cache is warm).
  concurrency C  C processes at once, each repeating the workload on its loaded session, until
                 at least RUNS measured requests: TTFT, token intervals, decode rate, total; for
                 speech and omni plans also the speech dimensions (harness/profile_kinds.py).
  interruption   speech and omni: RUNS processes, each cancelled (SIGTERM, as a user's stop) at a
                 random moment after its first PCM: cancel -> terminal line and -> last PCM.
Memory of every process is sampled while it runs (RSS and, where the OS reports it, PSS):
loading peak (until the session line) vs steady (during measured requests), and compared with
the admission ledger's prediction. Every raw sample, stdout/stderr log and generated text is
kept under OUT/raw; report.json has p50/p95 and n per metric; report.md and PNG plots render it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omni_edge.files import write_text_atomic
from omni_edge.harness.deploy import Deployment, verify_on_target
from omni_edge.harness.devices.base import DeviceError, MemorySample
from omni_edge.harness.profile_kinds import (
    OMNI,
    POLICY,
    SPEECH,
    TERMINAL_KINDS,
    TEXT,
    Workload,
    is_first_output,
    metric_names,
    request_row,
    run_argv,
    streams_of,
)

MIN_RUNS = 20  # measured requests per group the protocol asks for; fewer is reported as not met


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

    def outputs(self) -> list[dict[str, Any]]:
        """The process's own lines (not the harness's "stop" mark)."""
        return [e for _, e in self.lines if e.get("kind") != "stop"]

    def session(self) -> tuple[float, dict[str, Any]] | None:
        return next(((t, e) for t, e in self.lines if e.get("kind") == "session"), None)

    def requests(self, n_streams: int = 1) -> list[list[tuple[float, dict[str, Any]]]]:
        """Lines split per request (each ends once every stream had its terminal event)."""
        out: list[list[tuple[float, dict[str, Any]]]] = []
        current: list[tuple[float, dict[str, Any]]] = []
        ended = 0
        for t, e in self.lines:
            if e.get("kind") in ("session", "session_closed"):
                continue
            current.append((t, e))
            ended += e.get("kind") in TERMINAL_KINDS
            if ended == n_streams:
                out.append(current)
                current, ended = [], 0
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
    def __init__(self, deployment: Deployment, workload: Workload, out: Path, *, kind: str = TEXT, runs: int = 20,
                 warmup: int = 1, threads: int = 0, prebuffer_ms: int | None = None, sample_interval: float = 0.05,
                 timeout: float = 900.0) -> None:
        if runs < 1 or warmup < 0:
            raise ValueError("--runs must be at least 1 and --warmup at least 0")
        self.d, self.workload, self.out, self.kind = deployment, workload, out, kind
        self.n_streams, self.prebuffer_ms = len(streams_of(kind)), prebuffer_ms
        self.runs, self.warmup, self.threads = runs, warmup, threads
        self.sample_interval, self.timeout = sample_interval, timeout
        self.processes: list[ProcessRun] = []
        (out / "raw" / "logs").mkdir(parents=True, exist_ok=True)

    def _argv(self, group: str, index: int, repeat: int, workload: Workload, info: bool = False,
              trace: str | None = None) -> list[str]:
        wav = f"{self.d.root}/out-{group}-{index:03d}.wav"  # one per process: concurrent ones do not share it
        argv = [*run_argv(self.kind, self.d.binary, self.d.plan, workload, wav), "--repeat", str(repeat)]
        if trace is not None:
            argv += ["--trace", trace]
        if self.threads:
            argv += ["--threads", str(self.threads)]
        if self.kind != TEXT and self.prebuffer_ms is not None:
            argv += ["--prebuffer-ms", str(self.prebuffer_ms)]
        return argv + (["--info"] if info else [])

    def launch(self, group: str, index: int, repeat: int, workload: Workload, info: bool = False,
               stop_after_first_output_s: float | None = None, stop_after_spawn_s: float | None = None,
               sample_interval: float | None = None, on_sample: Callable[[float], None] | None = None,
               trace: str | None = None, extra: tuple[str, ...] = (), hard_stop: bool = False,
               expect_failure: bool = False) -> ProcessRun:
        """One process. With `stop_after_first_output_s` (or `stop_after_spawn_s`) it is stopped
        (SIGTERM, a user's stop) that long after its first output (or its start), the stop's time
        kept as a "stop" line. Memory is sampled every `sample_interval` s, and `on_sample(t)`
        is called after each sample (the sustained run reads the device's sensors there)."""
        run = ProcessRun(group, index)
        stop = threading.Event()
        pid_box: list[int] = []
        interval = self.sample_interval if sample_interval is None else sample_interval

        def sample() -> None:
            while not stop.is_set():
                if pid_box:
                    t = time.perf_counter() - run.spawn_t
                    try:
                        m = self.d.device.memory(pid_box[0])
                    except (DeviceError, OSError) as exc:  # keep the run; say why its memory trace ends
                        run.memory_error = str(exc)
                        return
                    if m is not None:
                        run.memory.append(MemorySample(t=t, rss_kb=m.rss_kb, pss_kb=m.pss_kb))
                    if on_sample is not None:
                        on_sample(t)
                stop.wait(interval)

        stopper: list[threading.Timer] = []

        def stop_now() -> None:
            run.lines.append((time.perf_counter() - run.spawn_t, {"kind": "stop"}))
            self.d.device.kill(pid_box[0], hard=hard_stop)

        def on_line(line: str) -> None:
            t = time.perf_counter() - run.spawn_t
            try:
                event = json.loads(line)
            except ValueError:
                event = {"kind": "unparsed", "text": line}
            run.lines.append((t, event if isinstance(event, dict) else {"kind": "unparsed", "text": line}))
            if stop_after_first_output_s is not None and not stopper and is_first_output(run.lines[-1][1]):
                stopper.append(threading.Timer(stop_after_first_output_s, stop_now))
                stopper[0].start()

        def started(pid: int) -> None:
            pid_box.append(pid)
            if stop_after_spawn_s is not None:
                stopper.append(threading.Timer(stop_after_spawn_s, stop_now))
                stopper[-1].start()

        sampler = threading.Thread(target=sample, daemon=True)
        run.spawn_t = time.perf_counter()
        sampler.start()
        timeout = self.timeout + (stop_after_spawn_s or 0.0)
        result = self.d.device.stream([*self._argv(group, index, repeat, workload, info, trace), *extra], on_line,
                                      timeout=timeout, env=self.d.env, on_start=started)
        stop.set()
        sampler.join()
        for timer in stopper:
            timer.cancel()
            timer.join()
        run.returncode, run.stderr, run.timed_out = result.returncode, result.stderr, result.timed_out
        stem = self.out / "raw" / "logs" / f"{group}-{index:03d}"
        stem.with_suffix(".stdout.jsonl").write_text(  # arrival times kept: intervals can be recomputed
            "".join(json.dumps({"t_s": round(t, 6), "event": e}) + "\n" for t, e in run.lines))
        stem.with_suffix(".stderr.txt").write_text(run.stderr)
        self.processes.append(run)
        stopped = any(e.get("kind") == "stop" for _, e in run.lines)
        # 143: ended by the stop; -15: the stop came before main() installed its handler (nothing ran)
        ended_by_stop = stopped and (run.returncode == 128 + 15 or (run.returncode == -15 and not run.outputs()))
        if run.returncode != 0 and not ended_by_stop and not expect_failure:
            raise DeviceError(f"{self.d.device.serial}: omni-edge-run exited {run.returncode}"
                              f"{' (timed out)' if run.timed_out else ''}: {run.stderr.strip()[-800:]}")
        return run

    # ---- groups ------------------------------------------------------------------------------

    def startup(self) -> dict[str, Any]:
        first_only = dataclasses.replace(self.workload, name="startup", max_new_tokens=4, max_frames=4)  # one short request
        launches = [self.launch("startup", i, 1, first_only, info=(i == 0)) for i in range(self.warmup + self.runs)]
        rows: list[dict[str, Any]] = []
        for i, run in enumerate(launches):
            session = run.session()
            first = next((t for t, e in run.lines if is_first_output(e)), None)
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
                results[i] = self.launch(group, i, per_process, self.workload)
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
        steady_rss: list[float] = []
        for run in results:
            assert isinstance(run, ProcessRun)
            session = run.session()
            start = session[0] if session else 0.0
            for k, request in enumerate(run.requests(self.n_streams)):
                done_t = request[-1][0]
                row = request_row(self.kind, request, start) if k >= self.warmup else None
                if row is not None:
                    rows.append({"process": run.index, "request": k} | row)
                    steady_rss += [m.rss_kb / 1024 for m in run.memory if start <= m.t <= done_t]
                start = done_t
        metrics = {k: summarize([float(r[k]) for r in rows if r.get(k) is not None])
                   for k in metric_names(self.kind, bool(self.workload.media))}
        if self.kind in (TEXT, OMNI):
            metrics["token_interval_ms"] = summarize([v for r in rows for v in r["token_intervals_ms"]])
        if self.kind in (SPEECH, OMNI):
            metrics["chunk_gap_ms"] = summarize([v for r in rows for v in r["chunk_gaps_ms"]])
        if self.kind == POLICY:
            metrics["step_ms"] = summarize([v for r in rows for v in r["step_ms"]])
        metrics["steady_rss_mb"] = summarize(steady_rss)
        timelines = [{"process": r["process"], "request": r["request"], "intervals_ms": r.get("token_intervals_ms", []),
                      "pcm_arrivals": r.get("pcm_arrivals", []), "playback_start_ms": r.get("playback_start_ms")}
                     for r in rows]
        flat = [{k: v for k, v in r.items() if k not in ("token_intervals_ms", "chunk_gaps_ms", "pcm_arrivals", "step_ms")}
                for r in rows]
        return {"concurrency": c, "requests": len(rows), "metrics": metrics, "rows": flat, "timelines": timelines}

    def traced(self) -> dict[str, Any]:
        """One more process, its last request traced (the warm-up before it is not): the trace
        comes back as OUT/trace.json. Its timings are the traced run's own and are reported apart:
        the measured groups above ran untraced."""
        remote = f"{self.d.root}/trace.json"
        run = self.launch("traced", 0, self.warmup + 1, self.workload, trace=remote)
        local = self.out / "trace.json"
        self.d.device.pull(remote, local)
        events = json.loads(local.read_text())["traceEvents"]
        spans = [e for e in events if e.get("ph") == "X"]
        graphs = [e for e in spans if e.get("cat") == "graph"]
        by_device: dict[str, float] = {}
        for e in graphs:
            device = str(e["args"].get("device", "?"))
            by_device[device] = by_device.get(device, 0.0) + float(e["dur"]) / 1000
        request = next((e for e in spans if e.get("cat") == "session" and e["name"] == "request"), None)
        names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
        queueing: dict[str, dict[str, float]] = {}  # per stage: waiting for input, emitting (credit included)
        for e in spans:
            if e.get("cat") == "queue":
                kind = "input_wait_ms" if e["name"].startswith("wait input") else "emit_ms"
                stage = queueing.setdefault(names.get(e["tid"], str(e["tid"])), {"input_wait_ms": 0.0, "emit_ms": 0.0})
                stage[kind] += float(e["dur"]) / 1000
        return {"file": "trace.json", "events": len(events), "graph_runs": len(graphs),
                "graph_ms_by_device": by_device, "request_ms": float(request["dur"]) / 1000 if request else None,
                "threads": sorted(e["args"]["name"] for e in events if e.get("name") == "thread_name"),
                "wait_ms": sum(float(e["dur"]) for e in spans if e.get("cat") == "queue") / 1000,
                "queueing_by_stage": queueing,
                "returncode": run.returncode}

    def interruption(self, within_ms: float, seed: int = 0) -> dict[str, Any]:
        """Stop each of RUNS processes at a random moment within `within_ms` after its first output
        (the caller passes most of a measured request's length); the protocol's interruption
        latency is the stop to the last PCM and to the terminal line."""
        rng = random.Random(seed)
        rows: list[dict[str, Any]] = []
        for i in range(self.runs):
            delay = rng.uniform(0.0, within_ms / 1000)
            run = self.launch("interruption", i, 1, self.workload, stop_after_first_output_s=delay)
            stop_t = next((t for t, e in run.lines if e.get("kind") == "stop"), None)
            terminals = [(t, e) for t, e in run.lines if e.get("kind") in TERMINAL_KINDS]
            pcm = [t for t, e in run.lines if e.get("kind") == "pcm"]
            row: dict[str, Any] = {"run": i, "delay_ms": delay * 1000, "stopped": stop_t is not None,
                                   "endings": sorted({str(e.get("kind")) for _, e in terminals}),
                                   "returncode": run.returncode}
            if stop_t is not None and terminals:
                row["stop_to_terminal_ms"] = (max(t for t, _ in terminals) - stop_t) * 1000
                row["stop_to_last_pcm_ms"] = max(0.0, (pcm[-1] - stop_t) * 1000) if pcm else None
                row["pcm_after_stop"] = sum(t > stop_t for t in pcm)
            rows.append(row)
        stopped = [r for r in rows if r["stopped"] and "stop_to_terminal_ms" in r]
        return {"runs": len(rows), "stopped": len(stopped), "stop_within_ms": within_ms,
                "finished_before_the_stop": sum(not r["stopped"] for r in rows),
                "one_terminal_per_stream": all(len(r["endings"]) >= 1 for r in rows),
                "metrics": {k: summarize([float(r[k]) for r in stopped if r.get(k) is not None])
                            for k in ("stop_to_terminal_ms", "stop_to_last_pcm_ms", "pcm_after_stop")},
                "rows": rows}

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


def _reported(groups: dict[str, Any], field: str) -> Any:
    """A field the controller reported on the measured requests' audio terminals (the first seen)."""
    return next((row[field] for group in groups.values() for row in group.get("rows", ())
                 if isinstance(row, dict) and row.get(field) is not None), None)


def _placement(stderr: str) -> list[dict[str, Any]]:
    """The placements of `omni-edge-run --info` (its session info, one JSON line on stderr)."""
    for line in stderr.splitlines():
        if line.startswith("{") and '"placements"' in line:
            try:
                return list(json.loads(line)["placements"])
            except (ValueError, KeyError):
                return []
    return []


def run_profile(deployment: Deployment, workload: Workload, out: Path, *, kind: str = TEXT, runs: int = 20,
                warmup: int = 1, concurrency: list[int] | None = None, threads: int = 0, prebuffer_ms: int | None = None,
                duration_s: float | None = None, trace: bool = False, reliability: bool = False,
                progress: Any = None) -> dict[str, Any]:
    """The whole protocol; writes OUT/report.json, OUT/report.md, OUT/*.png and OUT/raw/."""
    if runs < 1 or warmup < 0 or any(c < 1 for c in (concurrency or [1])):
        raise ValueError(f"runs >= 1, warmup >= 0 and concurrency >= 1 (got {runs}, {warmup}, {concurrency})")
    out.mkdir(parents=True, exist_ok=True)
    facts = deployment.device.facts()
    verified = verify_on_target(deployment)
    # Verification just read every artifact byte: evict it, or the "cold" start is a warm one.
    cold_cache = deployment.device.drop_page_cache()
    profiler = Profiler(deployment, workload, out, kind=kind, runs=runs, warmup=warmup, threads=threads,
                        prebuffer_ms=prebuffer_ms)
    steps = [("startup", profiler.startup)] + [(f"concurrency-{c}", lambda c=c: profiler.concurrency(c))
                                               for c in (concurrency or [1])]
    groups: dict[str, Any] = {}

    def interrupt() -> dict[str, Any]:  # within 80% of a measured request: most stops land mid-speech
        wall = groups[steps[1][0]]["metrics"]["wall_ms"]["p50"] or 1000.0
        return profiler.interruption(0.8 * wall)

    if kind in (SPEECH, OMNI):
        steps.append(("interruption", interrupt))
    if trace:
        steps.append(("traced", profiler.traced))
    if reliability:
        from omni_edge.harness.reliability import run_reliability

        steps.append(("reliability", lambda: run_reliability(profiler)))
    if duration_s is not None:
        from omni_edge.harness.sustained import run_sustained

        steps.append(("sustained", lambda: run_sustained(profiler, duration_s)))
    for name, step in steps:
        if progress is not None:
            progress.set_description(f"profile: {name}")
        groups[name] = step()
        if progress is not None:
            progress.update(1)
    interruption = groups.pop("interruption", None)
    sustained = groups.pop("sustained", None)
    traced = groups.pop("traced", None)
    reliable = groups.pop("reliability", None)
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
        "kind": kind,
        "workload": {"name": workload.name, "prompt_chars": len(workload.prompt), "media": [m for m, _ in workload.media],
                     **({"deadline_ms": workload.deadline_ms, "capture_age_ms": workload.capture_age_ms}
                        if kind == POLICY else {}),
                     "max_new_tokens": workload.max_new_tokens if kind != SPEECH else None,
                     "max_frames": workload.max_frames if kind != TEXT else None, "runs": runs, "warmup": warmup},
        "protocol": {"measured_per_group": runs, "minimum": MIN_RUNS, "met": runs >= MIN_RUNS,
                     "cold_start_page_cache": "dropped" if cold_cache else "warm (could not drop it: needs root)"},
        "placement": groups["startup"]["placement"],
        "startup": {k: v for k, v in groups["startup"].items() if k not in ("placement", "rows")},
        "groups": {k: {kk: vv for kk, vv in v.items() if kk not in ("rows", "timelines")}
                   for k, v in groups.items() if k != "startup"},
        "memory": memory,
        "ledger": {"predicted_mb": predicted / (1 << 20) if predicted else None, "measured_peak_rss_mb": measured,
                   "measured_over_predicted": (measured / (predicted / (1 << 20))) if predicted and measured else None},
        "speech": None if interruption is None else {
            # The request's, else the one the plan's chunk schedule gave (the controller reports it).
            "prebuffer_ms": prebuffer_ms if prebuffer_ms is not None else _reported(groups, "prebuffer_ms"),
            "chunk_schedule": _reported(groups, "chunk_schedule"),
            "clock": "first PCM, playback start, underruns (deficits), RTF and tail are the controller's playback "
                     "clock under the prebuffer; chunk gaps and the arrival plot are the harness's reading of the pipe",
            "interruption": {k: v for k, v in interruption.items() if k != "rows"}},
        "sustained": None if sustained is None else sustained["summary"],
        "trace": traced,  # a separate traced run: none of the groups' timings above were traced
        "reliability": reliable,
        "raw": "raw/",
    }
    (out / "raw" / "samples.json").write_text(json.dumps({
        "startup_rows": groups["startup"]["rows"],
        "groups": {k: {"rows": v["rows"], "timelines": v["timelines"]} for k, v in groups.items() if k != "startup"},
        "interruption_rows": interruption["rows"] if interruption else [],
        "sustained": sustained["series"] if sustained else None,
        "memory": [{"group": r.group, "process": r.index, "samples": [[m.t, m.rss_kb, m.pss_kb] for m in r.memory]}
                   for r in profiler.processes],
    }) + "\n")
    outputs = out / "raw" / "outputs.txt"
    outputs.write_text("".join(
        f"[{r.group} #{r.index} request {k}] " + "".join(str(e.get("text", "")) for _, e in req if e.get("kind") == "token")
        + "\n" for r in profiler.processes for k, req in enumerate(r.requests(profiler.n_streams))))
    write_text_atomic(out / "report.json", json.dumps(report, indent=2) + "\n")
    from omni_edge.harness.report import write_markdown, write_plots

    report["plots"] = write_plots(report, json.loads((out / "raw" / "samples.json").read_text()), out)
    write_text_atomic(out / "report.json", json.dumps(report, indent=2) + "\n")
    write_markdown(report, out / "report.md")
    return report
