"""The duplex group (`omni-edge profile --duplex`): spoken conversations through the device's own
server on /v1/realtime, as a voice client has them. Each run streams a question in real time
(20 ms appends of espeak-ng speech, so the server's VAD waits as long as it would for a person),
plays the reply in real time (acknowledging what was played, `playback.ack`), and barges in at a
random point of the reply with a second utterance.

Measured per run, on the client's clock: voice to voice (the question's last audible sample sent
-> the first audio delta), and the interruption (the barge-in's first audible sample sent -> the
server's speech_started, -> the last audio delta, -> the cancelled response.done); and the
server's own parts from its response.done timing (the VAD's end-of-turn wait, audio encoder,
thinker prefill, first text, first PCM out of the pipeline, commit -> first audio delta).
"""

from __future__ import annotations

import base64
import json
import random
import threading
import time
from typing import Any

from omni_edge.harness.deploy.remote_serve import remote_server
from omni_edge.harness.devices.base import DeviceError
from omni_edge.harness.profiling.process import summarize
from omni_edge.harness.profiling.spoken import Utterance, spoken

CHUNK_MS = 20
QUESTIONS = ("What is the capital of France?", "Tell me about the weather today.", "How far away is the moon?",
             "Can you recommend a good book?")
BARGE_INS = ("Wait, stop.", "Hold on a second.", "No, tell me something else.")
METRICS = ("voice_to_voice_ms", "server_voice_to_voice_ms", "end_of_turn_wait_ms", "commit_to_first_audio_ms",
           "audio_encode_ms", "prefill_ms", "first_text_ms", "pipeline_first_pcm_ms", "barge_in_detected_ms",
           "barge_in_to_last_audio_ms", "barge_in_to_cancelled_ms", "server_interrupt_to_done_ms",
           "barge_in_to_truncated_ms", "kept_tokens")


class _Conversation:
    """One websocket conversation: a reader thread timestamps every event as it arrives."""

    def __init__(self, url: str, model: str) -> None:
        from websockets.exceptions import InvalidStatus
        from websockets.sync.client import connect

        ws_url = url.replace("http://", "ws://").rstrip("/") + f"/realtime?model={model}"
        deadline = time.monotonic() + 30
        while True:  # the last conversation's session may still be closing
            try:
                self.ws = connect(ws_url, max_size=None, max_queue=None, open_timeout=60)
                break
            except InvalidStatus as exc:
                if exc.response.status_code != 429 or time.monotonic() > deadline:
                    raise DeviceError(f"/v1/realtime: {exc}") from exc
                time.sleep(0.05)
        self.events: list[tuple[float, dict[str, Any]]] = []
        self.cv = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        try:
            for text in self.ws:
                event = json.loads(text)
                with self.cv:
                    self.events.append((time.perf_counter(), event))
                    self.cv.notify_all()
        except Exception:  # the connection closed
            pass

    def send(self, **event: Any) -> None:
        self.ws.send(json.dumps(event))

    def wait(self, kind: str, after: int = 0, timeout: float = 300) -> tuple[int, float, dict[str, Any]]:
        """The first event of `kind` at index >= after: (index, arrival, event)."""
        deadline = time.monotonic() + timeout
        with self.cv:
            while True:
                for i in range(after, len(self.events)):
                    if self.events[i][1]["type"] == kind:
                        return i, self.events[i][0], self.events[i][1]
                    if self.events[i][1]["type"] == "error":
                        raise DeviceError(f"/v1/realtime: {self.events[i][1]['error']}")
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [e["type"] for _, e in self.events[after:] if not e["type"].endswith(".delta")]
                    raise DeviceError(f"/v1/realtime: no {kind} within {timeout:.0f} s (after it: {seen})")
                self.cv.wait(left)

    def stream(self, u: Utterance, mark_ms: float | None = None) -> float | None:
        """Sends `u` in real time; returns when the chunk holding `mark_ms` of it was sent."""
        pcm, step = u.pcm16(), u.rate * 2 * CHUNK_MS // 1000
        start, marked = time.perf_counter(), None
        for k, at in enumerate(range(0, len(pcm), step)):
            lag = start + k * CHUNK_MS / 1000 - time.perf_counter()
            if lag > 0:
                time.sleep(lag)
            self.send(type="input_audio_buffer.append", audio=base64.b64encode(pcm[at:at + step]).decode())
            if marked is None and mark_ms is not None and (k + 1) * CHUNK_MS >= mark_ms:
                marked = time.perf_counter()
        return marked

    def close(self) -> None:
        self.ws.close()
        self.reader.join(timeout=10)


def _interruption(c: _Conversation, at: int, onset: float) -> dict[str, Any]:
    """The barge-in's latencies: the reply was cancelled (still generating) or cut back (all sent,
    still playing); either way no audio of it may come after speech_started."""
    i, detected, _ = c.wait("input_audio_buffer.speech_started", after=at)
    row: dict[str, Any] = {"barge_in_detected_ms": (detected - onset) * 1000}
    reply = next(e for _, e in c.events[at:] if e["type"] == "response.output_audio.delta")["response_id"]
    deltas = [t for t, e in c.events[at:] if e["type"] == "response.output_audio.delta" and e["response_id"] == reply]
    row["barge_in_to_last_audio_ms"] = max(0.0, (deltas[-1] - onset) * 1000)
    done = [(k, t, e) for k, (t, e) in enumerate(c.events) if e["type"] == "response.done"
            and e["response"]["id"] == reply]
    if done and done[0][0] > i:  # the reply was still being generated
        row |= {"cancelled": True, "barge_in_to_cancelled_ms": (done[0][1] - onset) * 1000,
                "server_interrupt_to_done_ms": done[0][2].get("timing", {}).get("interrupt_to_done_ms")}
    _, cut_at, cut = c.wait("conversation.item.truncated", after=i, timeout=30)
    row |= {"barge_in_to_truncated_ms": (cut_at - onset) * 1000, "kept_tokens": cut.get("kept_tokens")}
    return row


def _one_run(url: str, model: str, rng: random.Random, max_tokens: int) -> dict[str, Any]:
    question = spoken([0.3, rng.choice(QUESTIONS), 0.7])
    barge = spoken([rng.choice(BARGE_INS), 0.7])
    c = _Conversation(url, model)
    try:
        c.wait("session.created")
        c.send(type="session.update", session={"max_output_tokens": max_tokens})
        c.wait("session.updated")
        spoke_end = c.stream(question, mark_ms=question.spans_ms[0][1])
        at, first_audio, _ = c.wait("response.output_audio.delta")
        row: dict[str, Any] = {"voice_to_voice_ms": (first_audio - spoke_end) * 1000 if spoke_end else None}
        # Play the reply in real time for a random while (what it sent covers it: the talker runs
        # ahead of real time), saying what was played, then barge in.
        listen = rng.uniform(0.2, 1.2)
        while True:  # at least one acknowledgement, however late this thread got here
            c.send(type="playback.ack", played_ms=int((time.perf_counter() - first_audio) * 1000))
            if time.perf_counter() - first_audio >= listen:
                break
            time.sleep(0.05)
        listen = time.perf_counter() - first_audio
        onset = c.stream(barge, mark_ms=barge.spans_ms[0][0])
        assert onset is not None
        row |= _interruption(c, at, onset) | {"played_ms": int(listen * 1000)}
        first_done = next(e for _, e in c.events[at:] if e["type"] == "response.done")
        timing = first_done.get("timing", {})
        row |= {k: timing.get(k) for k in ("end_of_turn_wait_ms", "commit_to_first_audio_ms", "audio_encode_ms",
                                            "prefill_ms", "first_text_ms", "pipeline_first_pcm_ms")}
        row["server_voice_to_voice_ms"] = timing.get("voice_to_voice_ms")
        return row
    finally:
        c.close()  # the barge-in turn's own reply is cancelled with the connection


def run_duplex(profiler: Any, max_tokens: int = 48, seed: int = 0) -> dict[str, Any]:
    """`runs` conversations (warm-up first, discarded) through the device's server, one at a time."""
    flags = ["--threads", str(profiler.threads)] if profiler.threads else []
    rng, rows = random.Random(seed), []
    with remote_server(profiler.d, flags) as server:
        for i in range(profiler.warmup + profiler.runs):
            row = _one_run(server.url, server.model, rng, max_tokens)
            memory = profiler.d.device.memory(server.pid)
            row["server_rss_mb"] = memory.rss_kb / 1024 if memory is not None else None
            if i >= profiler.warmup:
                rows.append(row)
    metrics = {k: summarize([float(r[k]) for r in rows if r.get(k) is not None]) for k in (*METRICS, "server_rss_mb")}
    return {"conversations": len(rows), "cancelled": sum(1 for r in rows if r.get("cancelled")),
            "metrics": {k: v for k, v in metrics.items() if v["n"]}, "rows": rows}
