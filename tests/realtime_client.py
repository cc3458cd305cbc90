"""A plain websockets client of /v1/realtime for tests and the duplex profile: connect, append
audio in chunks as a microphone would, and read events until one of a kind."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from websockets.sync.client import ClientConnection, connect


def open_realtime(server: dict[str, Any], **kwargs: Any) -> ClientConnection:
    url = server["url"].replace("http://", "ws://") + f"/realtime?model={server['model']}"
    return connect(url, additional_headers={"Authorization": f"Bearer {server['key']}"}, max_size=None,
                   open_timeout=30, **kwargs)


def send(ws: ClientConnection, **event: Any) -> None:
    ws.send(json.dumps(event))


def append(ws: ClientConnection, pcm16: bytes, chunk_ms: int = 100, rate: int = 24000) -> None:
    step = rate * 2 * chunk_ms // 1000
    for at in range(0, len(pcm16), step):
        send(ws, type="input_audio_buffer.append", audio=base64.b64encode(pcm16[at:at + step]).decode())


@dataclass
class Heard:
    """Events in order (audio deltas as their byte counts), and the audio they carried."""

    events: list[dict[str, Any]] = field(default_factory=list)
    audio: bytearray = field(default_factory=bytearray)

    def types(self) -> list[str]:
        return [e["type"] for e in self.events]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]

    def index(self, kind: str) -> int:
        return self.types().index(kind)


def read_until(ws: ClientConnection, done: Callable[[dict[str, Any]], bool], heard: Heard | None = None,
               timeout: float = 120) -> Heard:
    heard = heard or Heard()
    while True:
        event = json.loads(ws.recv(timeout=timeout))
        if event["type"] == "response.output_audio.delta":
            chunk = base64.b64decode(event["delta"])
            heard.audio += chunk
            event = {**event, "delta": len(chunk)}
        heard.events.append(event)
        if done(event):
            return heard


def is_type(kind: str) -> Callable[[dict[str, Any]], bool]:
    return lambda event: event["type"] == kind
