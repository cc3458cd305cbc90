"""Python API over the native controller's session (the same code the phone runs): one session
for every plan, and convenience methods per plan kind.

    with Session.open("artifact/plan.json") as s:
        for event in s.generate("Hello", max_new_tokens=32):
            print(event["text"], end="") if event["kind"] == "token" else print(event)

    speech = SpeechSession.open("speech/plan.json")
    utterance = speech.speak("Hello there.", wav="hello.wav")
    print(utterance.metrics["rtf"], utterance.pcm.shape)
"""

from __future__ import annotations

import dataclasses
import json
import queue
import threading
import wave
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from omni_edge import _native
from omni_edge.files import atomic_output
from omni_edge.runtime.request import ChatMessage, Media, Observation, Request, Sampling

# on_event(stream, event, pcm): pcm is a float32 array for audio events, else None; False cancels.
Listener = Callable[[str, dict[str, Any], "np.ndarray | None"], object]
_S = TypeVar("_S", bound="_Plan")


class _Plan:
    """A session over any plan (text, speech, omni): its stages run on their own threads,
    connected by credited streams; one request at a time, its events tagged by stream."""

    def __init__(self, native: Any) -> None:
        self._s = native
        self._info: dict[str, Any] = json.loads(native.info())

    @classmethod
    def open(cls: type[_S], plan: str | Path, *, allow_unqualified: bool = False, threads: int = 0) -> _S:
        """Verifies the artifacts (re-hash), admits the plan's memory budget, loads every stage."""
        return cls(_native.Session.open(str(plan), allow_unqualified, threads))

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(self, request: Request, on_event: Listener | None = None) -> dict[str, dict[str, Any]]:
        """Runs one request to the terminal event of every stream, calling on_event on this
        thread, one event at a time. Returns each stream's terminal fields."""
        dtype = np.float32 if self.pcm_dtype in ("float32", "") else np.int16

        def deliver(stream: str, event_json: str, payload: bytes | None) -> bool:
            pcm = None
            if payload is not None:
                raw = np.frombuffer(payload, dtype)
                pcm = raw if dtype == np.float32 else raw.astype(np.float32) / 32767.0
            return on_event is None or on_event(stream, json.loads(event_json), pcm) is not False

        result: dict[str, dict[str, Any]] = json.loads(self._s.submit(json.dumps(request.to_json()), deliver))
        return result

    def cancel(self) -> None:
        """End the running request at every stage's next step (queued events are withheld)."""
        self._s.cancel()

    def abort(self) -> None:
        """Fence the running request: no more events, the next request starts a new epoch."""
        self._s.abort()

    def reset(self) -> None:
        self._s.reset()

    def info(self) -> dict[str, Any]:
        info: dict[str, Any] = json.loads(self._s.info())
        return info

    def tokenize(self, text: str) -> list[int]:
        return list(self._s.tokenize(text))

    def placements(self) -> list[dict[str, Any]]:
        return [dict(p) for p in self._s.placements()]

    @property
    def epoch(self) -> int:
        return int(self._s.epoch)

    @property
    def sample_rate(self) -> int:
        return int(self._info["streams"].get("audio", {}).get("sample_rate", 0))

    @property
    def pcm_dtype(self) -> str:
        return str(self._info["streams"].get("audio", {}).get("pcm_dtype", ""))

    def _last(self, key: str) -> Any:
        """A stage's view of the last request (its `last_request` field `key`)."""
        for stage in self.info()["stages"]:
            if key in stage["last_request"]:
                return stage["last_request"][key]
        return None

    def codes(self) -> list[list[int]]:
        """The frames the talker spoke in the last request (code_groups codes each)."""
        return [list(f) for f in self._last("codes") or []]


def _request(prompt: str = "", *, chat: bool = False, system_prompt: str = "", prompt_ids: Sequence[int] = (),
             messages: Sequence[ChatMessage | tuple[str, str] | dict[str, str]] = (), media: Sequence[tuple[str, str | Path]] = (),
             continue_conversation: bool = False, max_new_tokens: int = 0,
             sampling: Sampling | dict[str, Any] | None = None, stop_strings: Sequence[str] = (),
             ignore_stop_tokens: bool = False, **speech: Any) -> Request:
    """messages: a whole conversation ending with a user turn, instead of prompt (ChatMessage,
    (role, content) or {"role", "content"} each); media: (kind, path) pairs, "image" or "audio",
    before the text in this order."""
    speech["speech_sampling"] = Sampling.of(speech.get("speech_sampling"))
    return Request(prompt=prompt, chat=chat, system_prompt=system_prompt, prompt_ids=tuple(prompt_ids),
                   messages=tuple(ChatMessage.of(m) for m in messages),
                   media=tuple(Media(kind, str(path)) for kind, path in media),
                   continue_conversation=continue_conversation, max_new_tokens=max_new_tokens,
                   sampling=Sampling.of(sampling), stop_strings=tuple(stop_strings),
                   ignore_stop_tokens=ignore_stop_tokens, **speech)


class Session(_Plan):
    """A text plan's session (any plan works: these methods read its text stream)."""

    def run(self, prompt: str = "", *, on_event: Any, **options: Any) -> dict[str, Any]:
        """Run one request to its terminal event, calling on_event(event) for each text event on
        this thread; on_event may return False to cancel at the next token. Returns the metrics."""
        def text_only(stream: str, event: dict[str, Any], pcm: np.ndarray | None) -> object:
            return on_event(event) if stream == "text" else True

        return self.submit(_request(prompt, **options), text_only)["text"]

    def generate(self, prompt: str = "", **options: Any) -> Iterator[dict[str, Any]]:
        """Yield the events of one request as they arrive (the request runs on a worker thread)."""
        events: queue.Queue[Any] = queue.Queue(maxsize=64)
        done = object()

        def work() -> None:
            try:
                self.run(prompt, on_event=events.put, **options)
            except Exception as exc:
                events.put(exc)
            events.put(done)

        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        while (item := events.get()) is not done:
            if isinstance(item, Exception):
                raise item
            yield item
        thread.join()

    def context(self) -> list[int]:
        """Tokens whose keys/values are resident."""
        return list(self._last("context") or [])

    def pending(self) -> list[int]:
        """The sampled token not yet fed back."""
        return list(self._last("pending") or [])

    def kv_state(self) -> dict[str, Any] | None:
        """The state handle of the resident conversation (None without one)."""
        for stage in self.info()["stages"]:
            if stage["state"] is not None:
                return dict(stage["state"])
        return None


@dataclass
class Utterance:
    """One spoken utterance: its terminal event (metrics), the events in order (pcm events
    without their samples) and the PCM the consumer received, as float32 in [-1, 1]."""

    metrics: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    pcm: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))


class _Audio:
    """The consumer side of an audio stream: events in order, PCM as float32 in [-1, 1]."""

    def __init__(self, on_audio: Any) -> None:
        self.on_audio = on_audio
        self.events: list[dict[str, Any]] = []
        self.chunks: list[np.ndarray] = []

    def __call__(self, event: dict[str, Any], pcm: np.ndarray | None) -> bool:
        self.events.append(event)
        if pcm is not None:
            self.chunks.append(pcm)
        return self.on_audio is None or self.on_audio(event, pcm) is not False

    def pcm(self, wav: str | Path | None, sample_rate: int) -> np.ndarray:
        """All the PCM received; also written to `wav` (16-bit mono) when given, unless the request
        was cancelled before any audio (then the file keeps what it had, as omni-edge-run does)."""
        pcm = np.concatenate(self.chunks) if self.chunks else np.zeros(0, np.float32)
        cancelled = bool(self.events) and self.events[-1].get("kind") == "cancelled"
        if wav is not None and (pcm.size > 0 or not cancelled):
            write_wav(wav, pcm, sample_rate)
        return pcm


class SpeechSession(_Plan):
    """Text -> codes -> PCM through a speech plan (talker stage -> vocoder stage)."""

    def speak(self, text: str = "", *, text_ids: Sequence[int] = (), max_frames: int = 0,
              sampling: Sampling | dict[str, Any] | None = None, prebuffer_ms: float = -1.0,
              wav: str | Path | None = None, on_event: Any = None) -> Utterance:
        """Speak one utterance on this thread. on_event(event, pcm) sees each event (pcm is a
        float32 array for pcm events, else None) and may return False to cancel. With `wav`, the
        PCM is also written there as 16-bit mono."""
        request = Request(prompt=text, prompt_ids=tuple(text_ids), max_frames=max_frames,
                          speech_sampling=Sampling.of(sampling), prebuffer_ms=prebuffer_ms)
        audio = _Audio(on_event)
        metrics = self.submit(request, lambda stream, event, pcm: audio(event, pcm))["audio"]
        return Utterance(metrics, audio.events, audio.pcm(wav, self.sample_rate))


@dataclass
class OmniResult:
    """One omni request: the text stream and the audio stream, each with its terminal metrics."""

    text_metrics: dict[str, Any]
    audio: dict[str, Any]
    text_events: list[dict[str, Any]] = field(default_factory=list)
    audio_events: list[dict[str, Any]] = field(default_factory=list)
    pcm: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))

    @property
    def text(self) -> str:
        return "".join(e.get("text", "") for e in self.text_events if e["kind"] == "token")


class OmniSession(_Plan):
    """Thinker -> talker -> vocoder: one request, a text stream and an audio stream. The talker
    reads the thinker's hidden states as they are made (dual-track), so speech starts after the
    first token."""

    def run(self, prompt: str = "", *, on_text: Any = None, on_audio: Any = None, wav: str | Path | None = None,
            max_frames: int = 0, speech_sampling: Sampling | dict[str, Any] | None = None, prebuffer_ms: float = -1.0,
            **text_options: Any) -> OmniResult:
        """One request; on_text(event) and on_audio(event, pcm) are called one at a time on this
        thread and may return False to cancel. text_options are Session.run's."""
        request = dataclasses.replace(_request(prompt, **text_options), max_frames=max_frames,
                                      speech_sampling=Sampling.of(speech_sampling), prebuffer_ms=prebuffer_ms)
        text_events: list[dict[str, Any]] = []
        audio = _Audio(on_audio)

        def deliver(stream: str, event: dict[str, Any], pcm: np.ndarray | None) -> bool:
            if stream == "audio":
                return audio(event, pcm)
            text_events.append(event)
            return on_text is None or on_text(event) is not False

        metrics = self.submit(request, deliver)
        return OmniResult(metrics["text"], metrics["audio"], text_events, audio.events, audio.pcm(wav, self.sample_rate))


def playback_stats(arrivals: Sequence[tuple[float, int]], sample_rate: int, prebuffer_ms: float) -> dict[str, float]:
    """What the session's playback clock makes of PCM arriving as (ms since the request, samples):
    first PCM, playback start, underruns and their silence, the longest gap. For streams that
    did not come through a session (a benchmark's PyTorch loop)."""
    stats: dict[str, float] = json.loads(_native.playback_stats(list(arrivals), sample_rate, prebuffer_ms))
    return stats


def write_wav(path: str | Path, pcm: np.ndarray, sample_rate: int) -> None:
    """Mono 16-bit PCM, as omni-edge-run writes it (float32 scaling, halves rounded away from
    zero as lround does), so both writers give the same bytes."""
    scaled = np.clip(np.nan_to_num(pcm.astype(np.float32), nan=0.0), -1.0, 1.0) * np.float32(32767.0)
    samples = (np.sign(scaled) * np.floor(np.abs(scaled).astype(np.float64) + 0.5)).astype("<i2")  # exact in float64
    with atomic_output(Path(path)) as part, wave.open(str(part), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(samples.tobytes())


class PolicySession(_Plan):
    """A policy plan's session: one observation in, one action chunk out (or a refusal).
    act() runs one now; post() is a control loop's mailbox, where a newer observation
    supersedes one still waiting."""

    _queue: Any = None

    def act(self, observation: Observation, prompt: str = "", *, deadline_ms: float = 0.0,
            on_event: Callable[[dict[str, Any]], object] | None = None) -> dict[str, Any]:
        """The "action" event merged with its terminal's timings, or the terminal event itself
        ("cancelled", "error") when no action came. A stale observation raises ContractError."""
        events: list[dict[str, Any]] = []

        def deliver(stream: str, event: dict[str, Any], pcm: np.ndarray | None) -> object:
            events.append(event)
            return on_event is None or on_event(event) is not False

        self.submit(Request(prompt=prompt, observation=observation, deadline_ms=deadline_ms), deliver)
        return _action_result(events)

    def post(self, observation: Observation, prompt: str = "", *, deadline_ms: float = 0.0,
             on_done: Callable[[dict[str, Any]], object]) -> None:
        """Queue an observation. on_done(result) runs on the queue's thread, once: what act()
        returns, or {"kind": "error", "reason", "error"} for a request that was refused, or
        superseded (reason "superseded": a newer observation came before it ran)."""
        if self._queue is None:
            self._queue = _native.LatestQueue(self._s)
        events: list[dict[str, Any]] = []

        def deliver(stream: str, event_json: str, payload: bytes | None) -> bool:
            events.append(json.loads(event_json))
            return True

        def done(terminal: str | None, reason: str | None, message: str | None) -> None:
            if terminal is None:
                on_done({"kind": "error", "finish_reason": "error", "reason": reason, "error": message})
            else:
                on_done(_action_result(events))

        request = Request(prompt=prompt, observation=observation, deadline_ms=deadline_ms)
        self._queue.post(json.dumps(request.to_json()), deliver, done)

    def queue_counters(self) -> dict[str, int]:
        counters: dict[str, int] = json.loads(self._queue.counters()) if self._queue is not None else {}
        return counters

    def __exit__(self, *exc: object) -> None:
        if self._queue is not None:
            self._queue.close()  # supersedes what waits, waits for what runs
            self._queue = None


def _action_result(events: list[dict[str, Any]]) -> dict[str, Any]:
    action = next((e for e in events if e["kind"] == "action"), None)
    terminal = next((e for e in events if "finish_reason" in e), {})
    if action is None or terminal.get("kind") != "done":
        return terminal
    return {**action, "timings": terminal.get("timings", action.get("timings", {}))}
