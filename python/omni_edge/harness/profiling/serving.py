"""The serving group (`omni-edge profile --serving`): the workload sent through the device's own
server (`omni-edge-run serve`, its port forwarded to this host as `serve --device` does), read as
an OpenAI client reads it (streamed, server-sent events, over the standard library's HTTP).

Each request gives two clocks: the client's (request sent -> first content / first audio delta,
and the rate between the first and the last token) and the server's own (the `: metrics` comment
ending every stream: the controller's TTFT, decode rate, first PCM). Their difference is what the
HTTP transport and the forward add, per response and per token; the report also sets them beside
the in-process numbers of the first concurrency group (omni-edge-run, no server).
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

from omni_edge.harness.deploy.remote_serve import RemoteServer, remote_server
from omni_edge.harness.devices.base import DeviceError
from omni_edge.harness.profiling.kinds import Workload
from omni_edge.harness.profiling.process import summarize

SERVED_KINDS = ("text", "speech", "omni")
METRICS = ("client_ttft_ms", "server_ttft_ms", "client_decode_tok_s", "server_decode_tok_s", "client_first_pcm_ms",
           "server_first_pcm_ms", "wall_ms", "server_rss_mb")


def _events(url: str, path: str, body: dict[str, Any]) -> Iterator[tuple[float, str, Any]]:
    """A streamed POST's events as they arrive: (time, "data" | "metrics", payload)."""
    where = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(where.hostname or "127.0.0.1", where.port, timeout=900)
    try:
        conn.request("POST", where.path.rstrip("/") + path, json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        if response.status != 200:
            raise DeviceError(f"{path}: HTTP {response.status}: {response.read()[:600].decode(errors='replace')}")
        for raw in response:  # to the end of the chunked body: the metrics comment comes last
            line = raw.decode().rstrip("\r\n")
            if line.startswith("data: ") and line != "data: [DONE]":
                yield time.perf_counter(), "data", json.loads(line[6:])
            elif line.startswith(": metrics "):
                yield time.perf_counter(), "metrics", json.loads(line[len(": metrics "):])
    finally:
        conn.close()


def _rate(times: list[float], tokens: int) -> float | None:
    return (tokens - 1) / (times[-1] - times[0]) if tokens > 1 and len(times) > 1 and times[-1] > times[0] else None


def _chat_row(server: RemoteServer, workload: Workload, audio: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": server.model, "messages": [{"role": "user", "content": workload.prompt}],
                            "max_tokens": workload.max_new_tokens, "temperature": 0, "stream": True,
                            "ignore_eos": True, "stream_options": {"include_usage": True}}
    if audio:
        body |= {"modalities": ["text", "audio"], "audio": {"format": "pcm16", "voice": "default"}}
        body |= {"max_audio_frames": workload.max_frames} if workload.max_frames else {}
    start = time.perf_counter()
    content: list[float] = []
    pcm: list[float] = []
    tokens, metrics = 0, {}
    for t, kind, payload in _events(server.url, "/chat/completions", body):
        if kind == "metrics":
            metrics = payload
            continue
        if "error" in payload:  # a failure after the stream began comes as an event
            raise DeviceError(f"/chat/completions: {payload['error']}")
        tokens = (payload.get("usage") or {}).get("completion_tokens", tokens)
        delta = payload["choices"][0].get("delta", {}) if payload.get("choices") else {}
        content += [t] if delta.get("content") or (delta.get("audio") or {}).get("transcript") else []
        pcm += [t] if (delta.get("audio") or {}).get("data") else []
    text, speech = metrics.get("text", {}), metrics.get("audio", {})
    return {"wall_ms": (time.perf_counter() - start) * 1000,
            "client_ttft_ms": (content[0] - start) * 1000 if content else None, "server_ttft_ms": text.get("ttft_ms"),
            "client_decode_tok_s": _rate(content, tokens), "server_decode_tok_s": text.get("decode_tok_s"),
            "client_first_pcm_ms": (pcm[0] - start) * 1000 if pcm else None,
            "server_first_pcm_ms": speech.get("first_pcm_ms"), "tokens": tokens}


def _speech_row(server: RemoteServer, workload: Workload) -> dict[str, Any]:
    body: dict[str, Any] = {"model": server.model, "input": workload.prompt, "voice": "default",
                            "response_format": "pcm", "stream_format": "sse"}
    body |= {"max_new_tokens": workload.max_frames} if workload.max_frames else {}
    start = time.perf_counter()
    pcm: list[float] = []
    metrics: dict[str, Any] = {}
    for t, kind, payload in _events(server.url, "/audio/speech", body):
        if kind == "metrics":
            metrics = payload
        elif payload.get("type") == "speech.audio.delta":
            pcm.append(t)
        elif payload.get("type") == "speech.audio.error":
            raise DeviceError(f"/audio/speech: {payload}")
    return {"wall_ms": (time.perf_counter() - start) * 1000,
            "client_first_pcm_ms": (pcm[0] - start) * 1000 if pcm else None,
            "server_first_pcm_ms": metrics.get("audio", {}).get("first_pcm_ms")}


def run_serving(profiler: Any) -> dict[str, Any]:
    """The workload's requests (warm-up first, discarded) through the device's server, one at a time."""
    kind, workload = profiler.kind, profiler.workload
    if kind.name not in SERVED_KINDS:
        raise ValueError(f"the serving group sends text, speech and omni workloads, not a {kind.name} plan's")
    flags = ["--threads", str(profiler.threads)] if profiler.threads else []
    rows: list[dict[str, Any]] = []
    with remote_server(profiler.d, flags) as server:
        for i in range(profiler.warmup + profiler.runs):
            row = _speech_row(server, workload) if kind.name == "speech" else _chat_row(server, workload,
                                                                                          kind.name == "omni")
            memory = profiler.d.device.memory(server.pid)
            row["server_rss_mb"] = memory.rss_kb / 1024 if memory is not None else None
            if i >= profiler.warmup:
                rows.append(row)
    metrics = {k: summarize([float(r[k]) for r in rows if r.get(k) is not None]) for k in METRICS}
    return {"requests": len(rows), "metrics": {k: v for k, v in metrics.items() if v["n"]}, "rows": rows}


def serving_summary(serving: dict[str, Any] | None, in_process: dict[str, Any]) -> dict[str, Any] | None:
    """report.json's "serving": the server group's metrics, what the transport adds (client p50
    minus the server's own, the same requests), and the in-process group's p50s beside them."""
    if serving is None:
        return None
    m = serving["metrics"]

    def p50(metrics: dict[str, Any], key: str) -> float | None:
        return metrics[key]["p50"] if key in metrics and metrics[key]["n"] else None

    def minus(a: float | None, b: float | None) -> float | None:
        return a - b if a is not None and b is not None else None

    client_rate, server_rate = p50(m, "client_decode_tok_s"), p50(m, "server_decode_tok_s")
    per_token = (1000 / client_rate - 1000 / server_rate) if client_rate and server_rate else None
    return {"requests": serving["requests"], "metrics": m,
            "transport": {"ttft_ms": minus(p50(m, "client_ttft_ms"), p50(m, "server_ttft_ms")),
                          "first_pcm_ms": minus(p50(m, "client_first_pcm_ms"), p50(m, "server_first_pcm_ms")),
                          "per_token_ms": per_token},
            "in_process": {k: p50(in_process, k) for k in ("ttft_ms", "decode_tok_s", "first_pcm_ms")}}
