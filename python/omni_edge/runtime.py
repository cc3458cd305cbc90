"""Python API over the native controller's sessions (the same code the phone runs).

    with Session.open("artifact/plan.json") as s:
        for event in s.generate("Hello", max_new_tokens=32):
            print(event["text"], end="") if event["kind"] == "token" else print(event)

    speech = SpeechSession.open("speech/plan.json")
    utterance = speech.speak("Hello there.", wav="hello.wav")
    print(utterance.metrics["rtf"], utterance.pcm.shape)
"""

from __future__ import annotations

import json
import queue
import threading
import wave
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from omni_edge import _native


class Session:
    def __init__(self, native: Any) -> None:
        self._s = native

    @classmethod
    def open(cls, plan: str | Path, *, allow_unqualified: bool = False, threads: int = 0) -> Session:
        return cls(_native.LlmSession.open(str(plan), allow_unqualified, threads))

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def run(self, prompt: str = "", *, on_event: Any, **options: Any) -> dict[str, Any]:
        """Run one request to its terminal event, calling on_event(event) for each event on this
        thread; on_event may return False to cancel at the next token. Returns the metrics."""
        request = _request(prompt, **options)
        metrics: dict[str, Any] = json.loads(
            self._s.generate(json.dumps(request), lambda text: on_event(json.loads(text)) is not False))
        return metrics

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

    def cancel(self) -> None:
        """End the running request at its next token (a terminal "cancelled" event)."""
        self._s.cancel()

    def abort(self) -> None:
        """Fence the running request: no more events, the next request starts a new epoch."""
        self._s.abort()

    def reset(self) -> None:
        self._s.reset()

    def context(self) -> list[int]:
        return list(self._s.context())

    def pending(self) -> list[int]:
        return list(self._s.pending())

    def kv_state(self) -> dict[str, Any] | None:
        text = self._s.kv_state()
        return None if text is None else dict(json.loads(text))

    def tokenize(self, text: str) -> list[int]:
        return list(self._s.tokenize(text))

    def placements(self) -> list[dict[str, Any]]:
        return [dict(p) for p in self._s.placements()]

    @property
    def epoch(self) -> int:
        return int(self._s.epoch)


def _request(prompt: str, *, chat: bool = False, system_prompt: str = "", prompt_ids: Sequence[int] = (),
             continue_conversation: bool = False, max_new_tokens: int = 0, sampling: dict[str, Any] | None = None,
             stop_strings: Sequence[str] = (), ignore_stop_tokens: bool = False) -> dict[str, Any]:
    request: dict[str, Any] = {
        "prompt": prompt, "chat": chat, "system_prompt": system_prompt, "prompt_ids": list(prompt_ids),
        "continue_conversation": continue_conversation, "max_new_tokens": max_new_tokens,
        "stop_strings": list(stop_strings), "ignore_stop_tokens": ignore_stop_tokens,
    }
    if sampling is not None:
        request["sampling"] = sampling
    return request


@dataclass
class Utterance:
    """One spoken utterance: its terminal event (metrics), the events in order (pcm events
    without their samples) and the PCM the consumer received, as float32 in [-1, 1]."""

    metrics: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    pcm: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))


class _Audio:
    """The consumer side of an audio stream: events in order, PCM as float32 in [-1, 1]."""

    def __init__(self, pcm_dtype: str, on_audio: Any) -> None:
        self.dtype = np.float32 if pcm_dtype == "float32" else np.int16
        self.on_audio = on_audio
        self.events: list[dict[str, Any]] = []
        self.chunks: list[np.ndarray] = []

    def __call__(self, text_json: str, data: bytes | None) -> bool:
        event = json.loads(text_json)
        self.events.append(event)
        pcm = None
        if data is not None:
            raw = np.frombuffer(data, self.dtype)
            pcm = raw if self.dtype == np.float32 else raw.astype(np.float32) / 32767.0
            self.chunks.append(pcm)
        return self.on_audio is None or self.on_audio(event, pcm) is not False

    def pcm(self, wav: str | Path | None, sample_rate: int) -> np.ndarray:
        """All the PCM received; also written to `wav` (16-bit mono) when given."""
        pcm = np.concatenate(self.chunks) if self.chunks else np.zeros(0, np.float32)
        if wav is not None:
            write_wav(wav, pcm, sample_rate)
        return pcm


_Session = TypeVar("_Session", bound="_AudioSession")


class _AudioSession:
    """What the speech and omni sessions share: opening a plan, the audio format, cancel, and
    the last request's codes. `_native_type` is the binding's session class."""

    _native_type: Any = None

    def __init__(self, native: Any) -> None:
        self._s = native

    @classmethod
    def open(cls: type[_Session], plan: str | Path, *, allow_unqualified: bool = False, threads: int = 0) -> _Session:
        return cls(cls._native_type.open(str(plan), allow_unqualified, threads))

    @property
    def sample_rate(self) -> int:
        return int(self._s.sample_rate)

    def cancel(self) -> None:
        """End the request at its next frame (a terminal "cancelled" event, no more PCM)."""
        self._s.cancel()

    def codes(self) -> list[list[int]]:
        """The frames of the last request (code_groups codes each)."""
        return [list(f) for f in self._s.codes()]

    def tokenize(self, text: str) -> list[int]:
        return list(self._s.tokenize(text))


class SpeechSession(_AudioSession):
    """Text -> codes -> PCM through a speech plan (talker stage -> vocoder stage)."""

    _native_type = _native.SpeechSession

    def speak(self, text: str = "", *, text_ids: Sequence[int] = (), max_frames: int = 0,
              sampling: dict[str, Any] | None = None, prebuffer_ms: float = 200.0, wav: str | Path | None = None,
              on_event: Any = None) -> Utterance:
        """Speak one utterance on this thread. on_event(event, pcm) sees each event (pcm is a
        float32 array for pcm events, else None) and may return False to cancel. With `wav`, the
        PCM is also written there as 16-bit mono."""
        request: dict[str, Any] = {"text": text, "text_ids": list(text_ids), "max_frames": max_frames,
                                   "prebuffer_ms": prebuffer_ms}
        if sampling is not None:
            request["sampling"] = sampling
        audio = _Audio(self._s.pcm_dtype, on_event)
        metrics = json.loads(self._s.speak(json.dumps(request), audio))
        return Utterance(metrics, audio.events, audio.pcm(wav, self.sample_rate))

    def placements(self) -> list[dict[str, Any]]:
        return [dict(p) for p in self._s.placements()]


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


class OmniSession(_AudioSession):
    """Thinker -> talker -> vocoder: one request, a text stream and an audio stream. The talker
    reads the thinker's hidden states as they are made (dual-track), so speech starts after the
    first token."""

    _native_type = _native.OmniSession

    def run(self, prompt: str = "", *, on_text: Any = None, on_audio: Any = None, wav: str | Path | None = None,
            max_frames: int = 0, speech_sampling: dict[str, Any] | None = None, prebuffer_ms: float = 200.0,
            **text_options: Any) -> OmniResult:
        """One request; on_text(event) and on_audio(event, pcm) are called one at a time (from two
        threads) and may return False to cancel. text_options are Session.run's."""
        speak: dict[str, Any] = {"max_frames": max_frames, "prebuffer_ms": prebuffer_ms}
        if speech_sampling is not None:
            speak["sampling"] = speech_sampling
        text_events: list[dict[str, Any]] = []

        def handle_text(text_json: str) -> bool:
            event = json.loads(text_json)
            text_events.append(event)
            return on_text is None or on_text(event) is not False

        audio = _Audio(self._s.pcm_dtype, on_audio)
        metrics = json.loads(self._s.run(json.dumps(_request(prompt, **text_options)), json.dumps(speak),
                                         handle_text, audio))
        return OmniResult(metrics["text"], metrics["audio"], text_events, audio.events,
                          audio.pcm(wav, self.sample_rate))


def playback_stats(arrivals: Sequence[tuple[float, int]], sample_rate: int, prebuffer_ms: float) -> dict[str, float]:
    """What the speech session's playback clock makes of PCM arriving as (ms since the request,
    samples): first PCM, playback start, underruns and their silence, the longest gap. For
    streams that did not come through a SpeechSession (a benchmark's PyTorch loop)."""
    stats: dict[str, float] = json.loads(_native.playback_stats(list(arrivals), sample_rate, prebuffer_ms))
    return stats


def write_wav(path: str | Path, pcm: np.ndarray, sample_rate: int) -> None:
    """Mono 16-bit PCM, as omni-edge-run writes it (float32 scaling, halves rounded away from
    zero as lround does), so both writers give the same bytes."""
    scaled = np.clip(np.nan_to_num(pcm.astype(np.float32), nan=0.0), -1.0, 1.0) * np.float32(32767.0)
    samples = (np.sign(scaled) * np.floor(np.abs(scaled).astype(np.float64) + 0.5)).astype("<i2")  # exact in float64
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(samples.tobytes())
