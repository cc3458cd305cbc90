"""Render a profile: PNG plots a person can read at a glance and a Markdown summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omni_edge.files import write_text_atomic
from omni_edge.harness.profiling.kinds import kind_named


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _huge_pages(p: dict[str, Any]) -> str:
    """What a graph's load allocated and how much of it is on huge pages (older reports: –)."""
    if "load_bytes" not in p:
        return "–"
    text = f"{p['load_bytes'] / 1e6:.1f} ({p['huge_page_bytes'] / 1e6:.1f})"
    return f"{text}: {p['pages']}" if p.get("pages") else text


def _save(plt: Any, fig: Any, out: Path, name: str) -> str:
    fig.tight_layout()
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return name


def write_plots(report: dict[str, Any], samples: dict[str, Any], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files: list[str] = []
    title = f"{report['device']['serial']} · {report['workload']['name']} workload"

    # Latency distributions: startup split and per-group TTFT / total.
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    startup = samples["startup_rows"][report["workload"]["warmup"]:]
    keys = ("process_start_ms", "load_ms", "first_output_ms")
    axes[0].boxplot([[r[k] for r in startup] for k in keys], tick_labels=["process start", "load", "first output"])
    axes[0].set_title(f"startup (warm restarts, n={len(startup)})")
    axes[0].set_ylabel("ms")
    kind = kind_named(report.get("kind"))
    for ax, metric in zip(axes[1:], (kind.first_output_metric, "total_ms"), strict=True):
        names = list(samples["groups"])
        data = [[r[metric] for r in samples["groups"][g]["rows"] if r.get(metric) is not None] for g in names]
        ax.boxplot(data, tick_labels=[f"{g.split('-')[-1]}× (n={len(d)})" for g, d in zip(names, data, strict=True)])
        ax.set_title(metric.replace("_ms", "").upper() + " by concurrency")
        ax.set_xlabel("concurrent processes")
        ax.set_ylabel("ms")
    fig.suptitle(title)
    files.append(_save(plt, fig, out, "latency.png"))

    if "text" in kind.streams:  # token-interval timeline: inter-token gaps along each request
        fig, ax = plt.subplots(figsize=(10, 4.5))
        for g, data in samples["groups"].items():
            for tl in data["timelines"][:4]:
                ax.plot(range(1, len(tl["intervals_ms"]) + 1), tl["intervals_ms"], lw=1, alpha=0.8,
                        label=f"{g} p{tl['process']} r{tl['request']}")
        ax.set_xlabel("token index")
        ax.set_ylabel("interval since previous token (ms, at the harness)")
        ax.set_title(f"token intervals · {title}")
        ax.legend(fontsize=7, ncol=2)
        files.append(_save(plt, fig, out, "token_intervals.png"))
    if report.get("speech"):
        files.append(_pcm_arrivals(plt, report, samples, out, title))
    if samples.get("sustained"):
        from omni_edge.harness.profiling.sustained import plot_sustained

        files.append(_save(plt, plot_sustained(plt, {"summary": report["sustained"], "series": samples["sustained"]},
                                               title), out, "sustained.png"))

    # Memory over time per process, with the ledger's prediction as a line.
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for m in samples["memory"]:
        if not m["samples"] or (m["group"] == "startup" and m["process"] > 2):
            continue
        ax.plot([s[0] for s in m["samples"]], [s[1] / 1024 for s in m["samples"]], lw=1,
                label=f"{m['group']} #{m['process']}")
    predicted = report["ledger"]["predicted_mb"]
    if predicted:
        ax.axhline(predicted, color="k", ls="--", lw=1, label=f"ledger prediction {predicted:.0f} MB")
    ax.set_xlabel("seconds since spawn")
    ax.set_ylabel("RSS (MB)")
    ax.set_title(f"memory · {title}")
    ax.legend(fontsize=7, ncol=2)
    files.append(_save(plt, fig, out, "memory.png"))
    return files


def _pcm_arrivals(plt: Any, report: dict[str, Any], samples: dict[str, Any], out: Path, title: str) -> str:
    """Audio delivered against the playback clock: while a request's step line stays above its
    playback line the speaker has sound queued; where it dips below, playback stalls."""
    fig, ax = plt.subplots(figsize=(10, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    shown = [(g, tl) for g, data in samples["groups"].items() for tl in data["timelines"][:2] if tl["pcm_arrivals"]]
    for i, (g, tl) in enumerate(shown[:4]):
        color = colors[i % len(colors)]
        t = [0.0] + [a[0] for a in tl["pcm_arrivals"]]
        delivered = [0.0] + [a[1] for a in tl["pcm_arrivals"]]
        ax.step(t, delivered, where="post", color=color, lw=1.2, label=f"delivered · {g} p{tl['process']} r{tl['request']}")
        start = tl.get("playback_start_ms")
        if start is not None:  # the controller's clock; the harness's arrivals trail it by the pipe
            ax.plot([start, start + delivered[-1]], [0.0, delivered[-1]], color=color, ls="--", lw=1,
                    label=f"played from {start:.0f} ms")
    ax.set_xlabel("ms since the request started (at the harness)")
    ax.set_ylabel("audio (ms)")
    ax.set_title(f"PCM arrival vs playback clock (prebuffer {report['speech']['prebuffer_ms']} ms) · {title}")
    ax.legend(fontsize=7, ncol=2)
    return _save(plt, fig, out, "pcm_arrival.png")


def _speech_lines(report: dict[str, Any]) -> list[str]:
    speech = report.get("speech")
    if not speech:
        return []
    stop = speech["interruption"]
    m = stop["metrics"]
    return [
        "",
        "## Speech",
        "",
        f"- prebuffer {speech['prebuffer_ms']} ms, chunk schedule {speech.get('chunk_schedule') or 'fixed'}; {speech['clock']}.",
        f"- interruption: {stop['stopped']} of {stop['runs']} requests stopped (SIGTERM) as a random one of their first "
        f"{stop['stop_within_outputs']} outputs arrived ({stop['finished_before_the_stop']} finished first): "
        f"stop -> terminal line p50 "
        f"{_fmt(m['stop_to_terminal_ms']['p50'])} ms (p95 {_fmt(m['stop_to_terminal_ms']['p95'])}), stop -> last PCM "
        f"p50 {_fmt(m['stop_to_last_pcm_ms']['p50'])} ms, PCM chunks after the stop p95 "
        f"{_fmt(m['pcm_after_stop']['p95'], 0)}.",
    ]


def _sustained_lines(report: dict[str, Any]) -> list[str]:
    s = report.get("sustained")
    if not s:
        return []
    lat, thr = s["latency_metric"], s["throughput_metric"]
    first, last, ratio = s["first_quarter"], s["last_quarter"], s["last_over_first"]
    return [
        "",
        "## Sustained",
        "",
        f"{s['requests']} requests back to back in {s['duration_s']:.0f} s, sampled every {s['interval_s']:.0f} s "
        f"({s['sensor_samples']} sensor samples).",
        "",
        "| metric | first quarter | last quarter | last / first |",
        "|---|---|---|---|",
        *[f"| {k} | {_fmt(first[k], 2)} | {_fmt(last[k], 2)} | {_fmt(ratio[k], 3)} |" for k in (lat, thr, "wall_ms")],
        "",
        f"- RSS {_fmt(s['rss_mb']['first'])} -> {_fmt(s['rss_mb']['last'])} MB (max {_fmt(s['rss_mb']['max'])}, "
        f"slope {_fmt(s['rss_mb']['slope_mb_per_min'], 3)} MB/min); mean CPU clock {_fmt(s['cpu_mhz']['first'], 0)} -> "
        f"{_fmt(s['cpu_mhz']['last'], 0)} MHz (min {_fmt(s['cpu_mhz']['min'], 0)}); hottest zone "
        f"{_fmt(s['max_temperature_c'])} °C",
        *[f"- {k}: {v}" for k, v in s["covers"].items()],
    ]


def _trace_lines(report: dict[str, Any]) -> list[str]:
    t = report.get("trace")
    if not t:
        return []
    devices = ", ".join(f"{d} {ms:.1f} ms" for d, ms in t["graph_ms_by_device"].items())
    return [
        "",
        "## Trace",
        "",
        f"[{t['file']}]({t['file']}) (open it in ui.perfetto.dev): one request traced in a separate process, "
        f"{_fmt(t['request_ms'])} ms, {t['graph_runs']} graph runs ({devices}), {t['wait_ms']:.1f} ms waiting on "
        f"queues and credit, threads {', '.join(t['threads'])}. Traced timings are not part of the tables above.",
        "",
        "| stage (traced request) | waiting for input (ms) | emitting, credit wait included (ms) |",
        "|---|---|---|",
        *[f"| {stage} | {q['input_wait_ms']:.1f} | {q['emit_ms']:.1f} |" for stage, q in t["queueing_by_stage"].items()],
    ]


def _reliability_lines(report: dict[str, Any]) -> list[str]:
    r = report.get("reliability")
    if not r:
        return []
    rows = []
    for name, sc in r["scenarios"].items():
        shown = {k: v for k, v in sc.items() if k not in ("passed", "faults")}
        faults = "; ".join(sc.get("faults") or []) or "–"
        rows.append(f"| {name} | {'pass' if sc['passed'] else '**FAIL**'} | `{json.dumps(shown)}` | {faults} |")
    return ["", "## Reliability", "", "| scenario | result | evidence | faults |", "|---|---|---|---|", *rows,
            *[f"- not run here: {k}: {v}" for k, v in r["not_run_here"].items()]]


def _serving_lines(report: dict[str, Any]) -> list[str]:
    s = report.get("serving")
    if not s:
        return []
    t, here = s["transport"], s["in_process"]
    return [
        "",
        "## Through the server",
        "",
        f"{s['requests']} requests through the device's `omni-edge-run serve` (port forwarded), streamed and read as "
        "an OpenAI client reads them; the server's clock is its own metrics comment on the same responses.",
        "",
        "| metric | p50 | p95 | n |",
        "|---|---|---|---|",
        *[f"| {k} | {_fmt(v['p50'], 2)} | {_fmt(v['p95'], 2)} | {v['n']} |" for k, v in s["metrics"].items()],
        "",
        f"- the transport adds: TTFT {_fmt(t['ttft_ms'], 2)} ms, first PCM {_fmt(t['first_pcm_ms'], 2)} ms, "
        f"{_fmt(t['per_token_ms'], 3)} ms per token (client p50 - server p50)",
        f"- in process (the first concurrency group, omni-edge-run): TTFT {_fmt(here['ttft_ms'], 2)} ms, decode "
        f"{_fmt(here['decode_tok_s'], 2)} tok/s, first PCM {_fmt(here['first_pcm_ms'], 2)} ms",
    ]


def _duplex_lines(report: dict[str, Any]) -> list[str]:
    d = report.get("duplex")
    if not d:
        return []
    return [
        "",
        "## Voice (duplex)",
        "",
        f"{d['conversations']} spoken conversations through the device's `/v1/realtime` (espeak-ng speech streamed "
        f"in real time, the reply played in real time with playback acknowledgements), each interrupted at a random "
        f"point of the reply's playback ({d['cancelled']} while it was still being generated: cancelled; the others "
        "cut back after it was all sent). Client-clock rows: voice_to_voice (the question's last audible sample sent "
        "-> first audio delta) and barge_in_* (the barge-in's first audible sample sent -> speech_started, -> the "
        "reply's last audio delta, -> its cancelled response.done, -> conversation.item.truncated); the others are "
        "the server's own parts.",
        "",
        "| metric | p50 | p95 | n |",
        "|---|---|---|---|",
        *[f"| {k} | {_fmt(v['p50'], 1)} | {_fmt(v['p95'], 1)} | {v['n']} |" for k, v in d["metrics"].items()],
    ]


def write_markdown(report: dict[str, Any], path: Path) -> None:
    d, w = report["device"], report["workload"]
    lines = [
        f"# Profile: {w['name']} workload on {d['serial']}",
        "",
        f"- device: {d['kind']} · SoC {_fmt(d['soc'])} · HTP {_fmt(d['htp_arch'])} · ABI {_fmt(d['abi'])} · "
        f"{_fmt(d['os'])} · RAM {_fmt((d['ram_bytes'] or 0) / 2**30, 1)} GiB",
        f"- runtimes: {', '.join(f'{k} {v}' for k, v in d['runtimes'].items()) or '–'}",
        "- artifacts verified on the target: "
        + ", ".join(f"{v['component']} ({'qualified' if v['qualified'] else 'NOT qualified'})"
                    for v in report["verified_on_target"]),
        f"- workload ({report.get('kind', 'text')} plan): {w['prompt_chars']} prompt chars, "
        f"{_fmt(w['max_new_tokens'])} new tokens, {_fmt(w.get('max_frames'))} frames at most, "
        f"{w['warmup']} warm-up + {w['runs']} measured runs per group",
        f"- pushed: {report['deployment']['files_sent']} files sent ({report['deployment']['bytes_sent']} bytes), "
        f"{report['deployment']['files_skipped']} unchanged files skipped",
        "",
        "## Placement",
        "",
        "| graph | backend | device | engine | nodes elsewhere | loaded MB (on huge pages) |",
        "|---|---|---|---|---|---|",
        *[f"| {p['graph']} | {p['backend']} | {p['device']} | {p['engine']} | {p['nodes_elsewhere']} | "
          f"{_huge_pages(p)} |" for p in report["placement"]],
        "",
        "## Startup",
        "",
        f"Cold (first launch after the push): process start {_fmt(report['startup']['cold']['process_start_ms'])} ms, "
        f"load {_fmt(report['startup']['cold']['load_ms'])} ms, first output "
        f"{_fmt(report['startup']['cold']['first_output_ms'])} ms "
        f"(page cache {report['protocol']['cold_start_page_cache']}).",
        *([f"**Below the protocol:** {report['protocol']['measured_per_group']} measured requests per group, "
           f"fewer than {report['protocol']['minimum']}."] if not report["protocol"]["met"] else []),
        "",
        "| warm restart | p50 | p95 | n |",
        "|---|---|---|---|",
        *[f"| {k} | {_fmt(v['p50'])} | {_fmt(v['p95'])} | {v['n']} |"
          for k, v in report["startup"]["warm_restart"].items()],
        "",
        "## Requests",
        "",
        "| group | metric | p50 | p95 | n |",
        "|---|---|---|---|---|",
    ]
    for g, data in report["groups"].items():
        for k, v in data["metrics"].items():
            lines.append(f"| {g} | {k} | {_fmt(v['p50'], 2)} | {_fmt(v['p95'], 2)} | {v['n']} |")
    lines += _speech_lines(report) + _sustained_lines(report) + _trace_lines(report) + _reliability_lines(report)
    lines += _serving_lines(report) + _duplex_lines(report)
    mem, led = report["memory"], report["ledger"]
    lines += [
        "",
        "## Memory",
        "",
        f"- loading RSS peak {_fmt(mem['loading_rss_mb']['max'])} MB, steady RSS p50 {_fmt(mem['steady_rss_mb']['p50'])} MB "
        f"(p95 {_fmt(mem['steady_rss_mb']['p95'])}), process peak (VmHWM) {_fmt(mem['process_peak_rss_mb']['max'])} MB, "
        f"PSS p50 {_fmt(mem['pss_mb']['p50'])} MB ({mem['samples']} samples)",
        f"- admission ledger predicted {_fmt(led['predicted_mb'])} MB; measured peak / predicted = "
        f"{_fmt(led['measured_over_predicted'], 2)}",
        "",
        "## Plots",
        "",
        *[f"![{p}]({p})" for p in report.get("plots", [])],
        "",
        "Token intervals are measured at the harness (they include the transport from the device); "
        "TTFT, decode rate and total come from the controller's own clock.",
        "",
    ]
    write_text_atomic(path, "\n".join(lines))
