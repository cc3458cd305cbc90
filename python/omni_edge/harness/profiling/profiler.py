"""The profiler: launches omni-edge-run on a deployment and measures the protocol's groups.

Groups, in order, each with warm-up runs that are discarded:
  startup        RUNS process launches of one short request each: process start (spawn until
                 main() has run: spawn-to-session-line minus load), load (plan, verify, graphs),
                 first output (spawn to first token). The first launch after the push is
                 reported as "cold", the rest as "warm restart" (the OS file cache is warm).
  concurrency C  C processes at once, each repeating the workload on its loaded session, until
                 at least RUNS measured requests: what the plan's kind measures (kinds/: TTFT,
                 token intervals, decode rate, total; the speech dimensions; a policy's timings).
  interruption   kinds with audio: RUNS processes, each cancelled (SIGTERM, as a user's stop) at a
                 random moment after its first PCM: cancel -> terminal line and -> last PCM.
Memory of every process is sampled while it runs (RSS and, where the OS reports it, PSS):
loading peak (until the session line) vs steady (during measured requests), and compared with
the admission ledger's prediction. Every process's lines (with arrival times) and stderr are
kept under OUT/raw/logs.
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
from pathlib import Path
from typing import Any

from omni_edge.harness.deploy.deploy import Deployment
from omni_edge.harness.devices.base import DeviceError, MemorySample
from omni_edge.harness.profiling.kinds import TERMINAL_KINDS, PlanKind, Workload, is_first_output
from omni_edge.harness.profiling.kinds.text import Text
from omni_edge.harness.profiling.process import ProcessRun, summarize

# A row's per-request series: summarized over every value, kept in the timelines, not in the rows.
SERIES_KEYS = ("token_intervals_ms", "chunk_gaps_ms", "pcm_arrivals", "step_ms")


def _event(line: str) -> dict[str, Any]:
    """One stdout line as its JSON object, or kept as text."""
    try:
        event = json.loads(line)
    except ValueError:
        event = None
    return event if isinstance(event, dict) else {"kind": "unparsed", "text": line}


def _stop_delay(event: dict[str, Any], outputs: int, after_first_output_s: float | None,
                after_outputs: int | None) -> float | None:
    """Whether the event just read (the `outputs`-th output so far, if it is one) starts the
    stop's timer, and its delay: the first output starts a timed stop, the n-th a stop at once."""
    if not is_first_output(event):
        return None
    if after_first_output_s is not None:
        return after_first_output_s
    if after_outputs is not None and outputs >= after_outputs:
        return 0.0
    return None


class Profiler:
    """Launches omni-edge-run for one kind of plan on a deployment and measures the protocol's groups."""

    def __init__(self, deployment: Deployment, workload: Workload, out: Path, *, kind: PlanKind | None = None,
                 runs: int = 20, warmup: int = 1, threads: int = 0, prebuffer_ms: int | None = None,
                 sample_interval: float = 0.05, timeout: float = 900.0) -> None:
        if runs < 1 or warmup < 0:
            raise ValueError("--runs must be at least 1 and --warmup at least 0")
        self.d, self.workload, self.out, self.kind = deployment, workload, out, kind or Text()
        self.n_streams, self.prebuffer_ms = len(self.kind.streams), prebuffer_ms
        self.runs, self.warmup, self.threads = runs, warmup, threads
        self.sample_interval, self.timeout = sample_interval, timeout
        self.processes: list[ProcessRun] = []
        (out / "raw" / "logs").mkdir(parents=True, exist_ok=True)

    def _argv(self, group: str, index: int, repeat: int, workload: Workload, info: bool = False,
              trace: str | None = None) -> list[str]:
        wav = f"{self.d.root}/out-{group}-{index:03d}.wav"  # one per process: concurrent ones do not share it
        argv = [*self.kind.run_argv(self.d.binary, self.d.plan, workload, wav), "--repeat", str(repeat)]
        if trace is not None:
            argv += ["--trace", trace]
        if self.threads:
            argv += ["--threads", str(self.threads)]
        argv += self.kind.prebuffer_argv(self.prebuffer_ms)
        return argv + (["--info"] if info else [])

    def launch(self, group: str, index: int, repeat: int, workload: Workload, info: bool = False,
               stop_after_first_output_s: float | None = None, stop_after_spawn_s: float | None = None,
               stop_after_outputs: int | None = None,
               sample_interval: float | None = None, on_sample: Callable[[float], None] | None = None,
               trace: str | None = None, extra: tuple[str, ...] = (), hard_stop: bool = False,
               expect_failure: bool = False) -> ProcessRun:
        """One process. With `stop_after_first_output_s` (or `stop_after_spawn_s`) it is stopped
        (SIGTERM, a user's stop) that long after its first output (or its start), the stop's time
        kept as a "stop" line; with `stop_after_outputs` it is stopped as its n-th output (token,
        PCM chunk, action) arrives, wherever the host's load puts that in time. Memory is sampled
        every `sample_interval` s, and `on_sample(t)` is called after each sample (the sustained
        run reads the device's sensors there)."""
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

        outputs = [0]  # tokens, PCM chunks, actions read so far

        def on_line(line: str) -> None:
            event = _event(line)
            run.lines.append((time.perf_counter() - run.spawn_t, event))
            outputs[0] += is_first_output(event)
            delay = None if stopper else _stop_delay(event, outputs[0], stop_after_first_output_s, stop_after_outputs)
            if delay is not None:
                stopper.append(threading.Timer(delay, stop_now))  # off the reader thread: a device's kill is a command
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
                "placement": launches[0].placement()}

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
                row = self.kind.request_row(request, start) if k >= self.warmup else None
                if row is not None:
                    rows.append({"process": run.index, "request": k} | row)
                    steady_rss += [m.rss_kb / 1024 for m in run.memory if start <= m.t <= done_t]
                start = done_t
        metrics = {k: summarize([float(r[k]) for r in rows if r.get(k) is not None])
                   for k in self.kind.metric_names()}
        for metric, key in self.kind.series:
            metrics[metric] = summarize([v for r in rows for v in r[key]])
        metrics["steady_rss_mb"] = summarize(steady_rss)
        timelines = [{"process": r["process"], "request": r["request"], "intervals_ms": r.get("token_intervals_ms", []),
                      "pcm_arrivals": r.get("pcm_arrivals", []), "playback_start_ms": r.get("playback_start_ms")}
                     for r in rows]
        flat = [{k: v for k, v in r.items() if k not in SERIES_KEYS} for r in rows]
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

    def interruption(self, measured_group: str, seed: int = 0) -> dict[str, Any]:
        """Stop each of RUNS processes (SIGTERM, a user's stop) as a random one of its outputs
        arrives, within the first 80% of the outputs a request of `measured_group` made: every stop
        lands mid-stream however loaded the host is (a stop at a random time after the first output
        finds the stream already ended when the host runs faster than it did for the measured
        group). The protocol's interruption latency is the stop to the last PCM and to the terminal."""
        counts = [sum(is_first_output(e) for _, e in request)
                  for run in self.processes if run.group == measured_group
                  for request in run.requests(self.n_streams)[self.warmup:]]
        if not counts:
            raise DeviceError(f"interruption: no measured request in {measured_group}")
        within = max(1, math.floor(0.8 * statistics.median(counts)))
        rng = random.Random(seed)
        rows: list[dict[str, Any]] = []
        for i in range(self.runs):
            after = rng.randint(1, within)
            run = self.launch("interruption", i, 1, self.workload, stop_after_outputs=after)
            stop_t = next((t for t, e in run.lines if e.get("kind") == "stop"), None)
            terminals = [(t, e) for t, e in run.lines if e.get("kind") in TERMINAL_KINDS]
            pcm = [t for t, e in run.lines if e.get("kind") == "pcm"]
            row: dict[str, Any] = {"run": i, "stop_after_outputs": after, "stopped": stop_t is not None,
                                   "endings": sorted({str(e.get("kind")) for _, e in terminals}),
                                   "returncode": run.returncode}
            if stop_t is not None and terminals:
                row["stop_to_terminal_ms"] = (max(t for t, _ in terminals) - stop_t) * 1000
                row["stop_to_last_pcm_ms"] = max(0.0, (pcm[-1] - stop_t) * 1000) if pcm else None
                row["pcm_after_stop"] = sum(t > stop_t for t in pcm)
            rows.append(row)
        stopped = [r for r in rows if r["stopped"] and "stop_to_terminal_ms" in r]
        return {"runs": len(rows), "stopped": len(stopped), "stop_within_outputs": within,
                "outputs_per_request": statistics.median(counts),
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
