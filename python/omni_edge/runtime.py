"""Python API over the native controller's text session (the same code the phone runs).

    with Session.open("artifact/plan.json") as s:
        for event in s.generate("Hello", max_new_tokens=32):
            print(event["text"], end="") if event["kind"] == "token" else print(event)
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

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
