"""The profiling protocol: verify the deployment on the target, measure its groups (profiler.py)
in the order `group_names` gives for the plan's kind, then write what was measured: report.json
(p50/p95 and n per metric), every raw sample, stdout/stderr log and generated text under OUT/raw,
and report.md with PNG plots (report.py).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omni_edge.files import write_text_atomic
from omni_edge.harness.deploy.deploy import Deployment, verify_on_target
from omni_edge.harness.devices.base import DeviceFacts
from omni_edge.harness.profiling.kinds import PlanKind, Workload
from omni_edge.harness.profiling.kinds.text import Text
from omni_edge.harness.profiling.profiler import Profiler
from omni_edge.harness.profiling.serving import serving_summary

MIN_RUNS = 20  # measured requests per group the protocol asks for; fewer is reported as not met
APART = ("interruption", "sustained", "traced", "reliability", "serving", "duplex")  # groups reported in their own sections


def group_names(kind: PlanKind, concurrency: list[int], *, trace: bool = False, reliability: bool = False,
                sustained: bool = False, serving: bool = False, duplex: bool = False) -> list[str]:
    """The protocol's groups for a plan of this kind, in the order they run."""
    names = ["startup", *(f"concurrency-{c}" for c in concurrency)]
    if kind.has_audio:  # a stream of audio to stop
        names.append("interruption")
    if serving:
        names.append("serving")
    if duplex:
        names.append("duplex")
    if trace:
        names.append("traced")
    if reliability:
        names.append("reliability")
    if sustained:
        names.append("sustained")
    return names


def _run_groups(profiler: Profiler, names: list[str], duration_s: float | None, progress: Any) -> dict[str, Any]:
    groups: dict[str, Any] = {}

    def interruption() -> dict[str, Any]:  # within the outputs of the first concurrency group's requests
        return profiler.interruption(names[1])

    def reliability() -> dict[str, Any]:
        from omni_edge.harness.profiling.reliability import run_reliability

        return run_reliability(profiler)

    def sustained() -> dict[str, Any]:
        from omni_edge.harness.profiling.sustained import run_sustained

        assert duration_s is not None
        return run_sustained(profiler, duration_s)

    def serving() -> dict[str, Any]:
        from omni_edge.harness.profiling.serving import run_serving

        return run_serving(profiler)

    def duplex() -> dict[str, Any]:
        from omni_edge.harness.profiling.duplex import run_duplex

        return run_duplex(profiler)

    runners: dict[str, Callable[[], dict[str, Any]]] = {
        "startup": profiler.startup, "interruption": interruption, "traced": profiler.traced,
        "reliability": reliability, "sustained": sustained, "serving": serving, "duplex": duplex}
    for name in names:
        if progress is not None:
            progress.set_description(f"profile: {name}")
        step = runners[name] if name in runners else functools.partial(profiler.concurrency, int(name.split("-")[-1]))
        groups[name] = step()
        if progress is not None:
            progress.update(1)
    return groups


def _reported(groups: dict[str, Any], field: str) -> Any:
    """A field the controller reported on the measured requests' audio terminals (the first seen)."""
    return next((row[field] for group in groups.values() for row in group.get("rows", ())
                 if isinstance(row, dict) and row.get(field) is not None), None)


def _memory_and_ledger(profiler: Profiler, startup: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Memory over every process, and the admission ledger's prediction against the peak RSS."""
    memory = profiler.memory()
    memory["sampling_errors"] = sorted({r.memory_error for r in profiler.processes if r.memory_error})
    ledger = startup["cold"].get("ledger") or {}
    predicted = sum(r["bytes"].get("device_ram", 0) + r["bytes"].get("wsl_quota", 0)
                    for r in ledger.get("reservations", []))
    measured = memory["process_peak_rss_mb"]["max"]
    return memory, {"predicted_mb": predicted / (1 << 20) if predicted else None, "measured_peak_rss_mb": measured,
                    "measured_over_predicted": (measured / (predicted / (1 << 20))) if predicted and measured else None}


def _speech(profiler: Profiler, groups: dict[str, Any], interruption: dict[str, Any] | None) -> dict[str, Any] | None:
    if interruption is None:
        return None
    return {
        # The request's, else the one the plan's chunk schedule gave (the controller reports it).
        "prebuffer_ms": profiler.prebuffer_ms if profiler.prebuffer_ms is not None else _reported(groups, "prebuffer_ms"),
        "chunk_schedule": _reported(groups, "chunk_schedule"),
        "clock": "first PCM, playback start, underruns (deficits), RTF and tail are the controller's playback "
                 "clock under the prebuffer; chunk gaps and the arrival plot are the harness's reading of the pipe",
        "interruption": {k: v for k, v in interruption.items() if k != "rows"}}


def _report(profiler: Profiler, groups: dict[str, Any], apart: dict[str, Any], facts: DeviceFacts,
            verified: list[dict[str, Any]], cold_cache: bool) -> dict[str, Any]:
    """report.json (without its plots)."""
    p, w = profiler, profiler.workload
    memory, ledger = _memory_and_ledger(p, groups["startup"])
    return {
        "schema": "omni-edge.profile/1",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "device": facts.to_dict(),
        "deployment": p.d.to_dict(),
        "verified_on_target": [{"component": v["manifest"]["component"], "qualified": v["qualified"]} for v in verified],
        "kind": p.kind.name,
        "workload": {"name": w.name, "prompt_chars": len(w.prompt), "media": [m for m, _ in w.media],
                     **p.kind.report_workload(w), "runs": p.runs, "warmup": p.warmup},
        "protocol": {"measured_per_group": p.runs, "minimum": MIN_RUNS, "met": p.runs >= MIN_RUNS,
                     "cold_start_page_cache": "dropped" if cold_cache else "warm (could not drop it: needs root)"},
        "placement": groups["startup"]["placement"],
        "startup": {k: v for k, v in groups["startup"].items() if k not in ("placement", "rows")},
        "groups": {k: {kk: vv for kk, vv in v.items() if kk not in ("rows", "timelines")}
                   for k, v in groups.items() if k != "startup"},
        "memory": memory,
        "ledger": ledger,
        "speech": _speech(p, groups, apart["interruption"]),
        "sustained": None if apart["sustained"] is None else apart["sustained"]["summary"],
        "trace": apart["traced"],  # a separate traced run: none of the groups' timings above were traced
        "reliability": apart["reliability"],
        # The same workload through the device's server (--serving), beside the first concurrency group.
        "serving": serving_summary(apart["serving"], next(v for k, v in groups.items() if k != "startup")["metrics"]),
        # Spoken conversations with barge-in through the device's /v1/realtime (--duplex).
        "duplex": None if apart["duplex"] is None else {k: v for k, v in apart["duplex"].items() if k != "rows"},
        "raw": "raw/",
    }


def _write_raw(profiler: Profiler, groups: dict[str, Any], apart: dict[str, Any], out: Path) -> None:
    """OUT/raw/samples.json (every row, timeline and memory sample) and OUT/raw/outputs.txt."""
    interruption, sustained = apart["interruption"], apart["sustained"]
    (out / "raw" / "samples.json").write_text(json.dumps({
        "startup_rows": groups["startup"]["rows"],
        "groups": {k: {"rows": v["rows"], "timelines": v["timelines"]} for k, v in groups.items() if k != "startup"},
        "interruption_rows": interruption["rows"] if interruption else [],
        "sustained": sustained["series"] if sustained else None,
        "serving_rows": apart["serving"]["rows"] if apart["serving"] else [],
        "duplex_rows": apart["duplex"]["rows"] if apart["duplex"] else [],
        "memory": [{"group": r.group, "process": r.index, "samples": [[m.t, m.rss_kb, m.pss_kb] for m in r.memory]}
                   for r in profiler.processes],
    }) + "\n")
    outputs = out / "raw" / "outputs.txt"
    outputs.write_text("".join(
        f"[{r.group} #{r.index} request {k}] " + "".join(str(e.get("text", "")) for _, e in req if e.get("kind") == "token")
        + "\n" for r in profiler.processes for k, req in enumerate(r.requests(profiler.n_streams))))


def run_profile(deployment: Deployment, workload: Workload, out: Path, *, kind: PlanKind | None = None, runs: int = 20,
                warmup: int = 1, concurrency: list[int] | None = None, threads: int = 0, prebuffer_ms: int | None = None,
                duration_s: float | None = None, trace: bool = False, reliability: bool = False,
                serving: bool = False, duplex: bool = False, progress: Any = None) -> dict[str, Any]:
    """The whole protocol; writes OUT/report.json, OUT/report.md, OUT/*.png and OUT/raw/."""
    if runs < 1 or warmup < 0 or any(c < 1 for c in (concurrency or [1])):
        raise ValueError(f"runs >= 1, warmup >= 0 and concurrency >= 1 (got {runs}, {warmup}, {concurrency})")
    kind = kind or Text()
    out.mkdir(parents=True, exist_ok=True)
    facts = deployment.device.facts()
    verified = verify_on_target(deployment)
    # Verification just read every artifact byte: evict it, or the "cold" start is a warm one.
    cold_cache = deployment.device.drop_page_cache()
    profiler = Profiler(deployment, workload, out, kind=kind, runs=runs, warmup=warmup, threads=threads,
                        prebuffer_ms=prebuffer_ms)
    names = group_names(kind, concurrency or [1], trace=trace, reliability=reliability, sustained=duration_s is not None,
                        serving=serving, duplex=duplex)
    groups = _run_groups(profiler, names, duration_s, progress)
    apart = {name: groups.pop(name, None) for name in APART}
    report = _report(profiler, groups, apart, facts, verified, cold_cache)
    _write_raw(profiler, groups, apart, out)
    write_text_atomic(out / "report.json", json.dumps(report, indent=2) + "\n")
    from omni_edge.harness.profiling.report import write_markdown, write_plots

    report["plots"] = write_plots(report, json.loads((out / "raw" / "samples.json").read_text()), out)
    write_text_atomic(out / "report.json", json.dumps(report, indent=2) + "\n")
    write_markdown(report, out / "report.md")
    return report
