"""A sustained run: one loaded session answers requests back to back for a fixed time while the
harness samples, every few seconds, the process's RSS and the device's sensors (devices/sensors.py).

What a short profile cannot show: throttling (clocks fall, temperatures rise, latency drifts) and
slow growth (RSS creeping up request after request). The report compares the first and the last
quarter of the requests and fits RSS against time; every series is kept raw.
"""

from __future__ import annotations

import re
import statistics
from typing import TYPE_CHECKING, Any

from omni_edge.harness.devices.sensors import SensorSample, coverage

if TYPE_CHECKING:
    from omni_edge.harness.profiling.profiler import Profiler

_UNITS = {"s": 1, "m": 60, "h": 3600}


def parse_duration(text: str) -> float:
    """"30m", "2m", "45s", "1h" or plain seconds -> seconds (positive)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if m is None or float(m.group(1)) <= 0:
        raise ValueError(f"a duration is a positive number with s, m or h (e.g. 30m), not {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or a == 0 else b / a


def _slope_per_minute(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of value against time, per minute."""
    if len(points) < 3:
        return None
    mt = statistics.fmean(t for t, _ in points)
    mv = statistics.fmean(v for _, v in points)
    den = sum((t - mt) ** 2 for t, _ in points)
    return None if den == 0 else 60 * sum((t - mt) * (v - mv) for t, v in points) / den


def run_sustained(profiler: Profiler, duration_s: float, interval_s: float = 2.0) -> dict[str, Any]:
    device, kind = profiler.d.device, profiler.kind
    samples: list[SensorSample] = []
    run = profiler.launch("sustained", 0, 1_000_000, profiler.workload, stop_after_spawn_s=duration_s,
                          sample_interval=interval_s, on_sample=lambda t: samples.append(device.sensors(t)))
    session = run.session()
    start = session[0] if session else 0.0
    rows: list[dict[str, Any]] = []
    for k, request in enumerate(run.requests(profiler.n_streams)):
        done_t = request[-1][0]
        row = kind.request_row(request, start)
        if row is not None and k >= profiler.warmup:  # the one the stop cut short is not a measurement
            rows.append({"request": k, "t_s": round(done_t, 3)} | {key: v for key, v in row.items()
                                                                    if not isinstance(v, list)})
        start = done_t
    latency, throughput = kind.latency_metric, kind.throughput_metric
    quarter = max(1, len(rows) // 4)
    first, last = rows[:quarter], rows[-quarter:]

    def med(part: list[dict[str, Any]], key: str) -> float | None:
        return _median([float(r[key]) for r in part if r.get(key) is not None])

    loaded = session[0] if session else 0.0
    rss = [(m.t, m.rss_kb / 1024) for m in run.memory if m.t >= loaded]  # growth while serving, not loading
    clocks = [(s.t, statistics.fmean(s.cpu_mhz.values())) for s in samples if s.cpu_mhz]
    temps = [max(s.thermal_c.values()) for s in samples if s.thermal_c]
    keys = (latency, throughput, "wall_ms")
    first_q, last_q = {k: med(first, k) for k in keys}, {k: med(last, k) for k in keys}
    summary: dict[str, Any] = {
        "duration_s": duration_s, "interval_s": interval_s, "requests": len(rows),
        "latency_metric": latency, "throughput_metric": throughput,
        "first_quarter": first_q, "last_quarter": last_q,
        "last_over_first": {k: _ratio(first_q[k], last_q[k]) for k in keys},
        "rss_mb": {"first": rss[0][1] if rss else None, "last": rss[-1][1] if rss else None,
                   "max": max((v for _, v in rss), default=None), "slope_mb_per_min": _slope_per_minute(rss)},
        "cpu_mhz": {"first": clocks[0][1] if clocks else None, "last": clocks[-1][1] if clocks else None,
                    "min": min((v for _, v in clocks), default=None)},
        "max_temperature_c": max(temps, default=None),
        "sensor_samples": len(samples),
        "covers": coverage(samples),
    }
    series = {"requests": rows, "memory": [[round(t, 3), round(v, 3)] for t, v in rss],
              "sensors": [s.to_dict() for s in samples]}
    return {"summary": summary, "series": series}


def plot_sustained(plt: Any, sustained: dict[str, Any], title: str) -> Any:
    """Three panels over the run's time: the request metrics, RSS, clocks and temperatures."""
    s, series = sustained["summary"], sustained["series"]
    fig, axes = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
    rows = series["requests"]
    t = [r["t_s"] for r in rows]
    axes[0].plot(t, [r.get(s["latency_metric"]) for r in rows], ".", ms=3, label=s["latency_metric"])
    axes[0].set_ylabel(s["latency_metric"].replace("_ms", " (ms)"))
    twin = axes[0].twinx()
    twin.plot(t, [r.get(s["throughput_metric"]) for r in rows], ".", ms=3, color="tab:orange",
              label=s["throughput_metric"])
    twin.set_ylabel(s["throughput_metric"])
    axes[0].set_title(f"{s['requests']} requests back to back · {title}")
    axes[1].plot([m[0] for m in series["memory"]], [m[1] for m in series["memory"]], lw=1)
    axes[1].set_ylabel("RSS (MB)")
    sensors = series["sensors"]
    st = [x["t"] for x in sensors]
    axes[2].plot(st, [statistics.fmean(x["cpu_mhz"].values()) if x["cpu_mhz"] else None for x in sensors], lw=1,
                 label=f"mean CPU MHz ({s['covers']['cpu_mhz']})")
    axes[2].set_ylabel("CPU MHz")
    if any(x["thermal_c"] for x in sensors):
        hot = axes[2].twinx()
        hot.plot(st, [max(x["thermal_c"].values()) if x["thermal_c"] else None for x in sensors], lw=1,
                 color="tab:red", label="hottest zone")
        hot.set_ylabel("°C")
    axes[2].set_xlabel("seconds since the process started")
    axes[2].legend(fontsize=7)
    return fig
