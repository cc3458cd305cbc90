"""The server under AddressSanitizer and UndefinedBehaviorSanitizer (scripts/test.sh's clang
build, build/asan): connections over the cap refused (one silent until the timer closes it),
chat plain, streamed and dropped, bodies refused, speech whole, as events and
left by its client, OpenPI observations good, stale and malformed, a spoken conversation with
barge-in over /v1/realtime, then SIGTERM. Each server must exit 0 with no sanitizer report."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
from openpi_client.websocket_client_policy import WebsocketClientPolicy
from paths import ROOT
from serving import client, serving

ASAN_BUILD = ROOT / "build" / "asan"
SANITIZERS = {"ASAN_OPTIONS": "halt_on_error=1:detect_leaks=0", "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}


@pytest.fixture(scope="module")
def sanitized() -> Path:
    """build/asan's omni-edge-run (scripts/test.sh configures the tree; built here if missing)."""
    if not (ASAN_BUILD / "CMakeCache.txt").is_file():
        pytest.fail("build/asan is not configured: scripts/test.sh's sanitizer step configures it")
    done = subprocess.run(["cmake", "--build", str(ASAN_BUILD), "--target", "omni-edge-run"], capture_output=True,
                          text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:]
    return ASAN_BUILD / "controller_cpp" / "omni-edge-run"


def _clean(stderr: str) -> None:
    assert "Sanitizer" not in stderr and "runtime error" not in stderr, stderr[-4000:]


def _post(server: dict[str, Any], path: str, body: bytes) -> int:
    request = urllib.request.Request(server["url"] + path, data=body, headers={
        "Authorization": "Bearer secret", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as page:
            return int(page.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_chat_and_speech_under_the_sanitizers(sanitized: Path, tiny_artifact: Path, tts_artifact: Path) -> None:
    with serving(tiny_artifact / "plan.json", "--max-connections", "1", binary=sanitized, env=SANITIZERS) as server:
        host, port = server["url"].removeprefix("http://").removesuffix("/v1").split(":")
        with socket.create_connection((host, int(port))):
            time.sleep(0.2)  # accepted: a second is refused on the accept thread (async read, 429, drained)
            assert _post(server, "/chat/completions", b"{}") == 429
            with socket.create_connection((host, int(port))) as silent:  # refused, then closed by the timer
                silent.settimeout(10)
                assert silent.recv(1) == b""
    _clean(server["stderr"])
    with serving(tiny_artifact / "plan.json", binary=sanitized, env=SANITIZERS) as server:
        api, model = client(server), server["model"]
        messages: Any = [{"role": "user", "content": "def greet(name):"}]
        assert api.chat.completions.create(model=model, messages=messages, max_tokens=5).usage is not None
        assert len(list(api.chat.completions.create(model=model, messages=messages, max_tokens=5, stream=True))) > 2
        dropped = api.chat.completions.create(model=model, messages=messages, max_tokens=200, stream=True,
                                              extra_body={"ignore_eos": True})
        next(iter(dropped))
        dropped.close()
        for bad in (b"{", b"[]", b'{"model": 1}', b'{"model": "m", "messages": [{"role": "user", "content": [{"type": '
                    b'"image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]}'):
            assert _post(server, "/chat/completions", bad) in (400, 404)
    _clean(server["stderr"])
    with serving(tts_artifact, binary=sanitized, env=SANITIZERS) as server:
        api, model = client(server), server["model"]
        assert len(api.audio.speech.create(model=model, voice="default", input="Hello.",
                                           extra_body={"max_new_tokens": 6}).content) > 44
        body = json.dumps({"model": model, "input": "Hello.", "stream_format": "sse", "max_new_tokens": 6}).encode()
        assert _post(server, "/audio/speech", body) == 200
        host, port = server["url"].removeprefix("http://").removesuffix("/v1").split(":")
        with socket.create_connection((host, int(port))) as raw:  # left while it runs: cancelled
            body = json.dumps({"model": model, "input": "Hello.", "max_new_tokens": 400}).encode()
            raw.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\nContent-Type: "
                        b"application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            time.sleep(0.3)
    _clean(server["stderr"])


def test_openpi_under_the_sanitizers(sanitized: Path, policy_plan: Path) -> None:
    with serving(policy_plan, binary=sanitized, env=SANITIZERS) as server:
        host, port = server["url"].removeprefix("http://").removesuffix("/v1").split(":")
        policy = WebsocketClientPolicy(host=host, port=int(port), api_key="secret")
        image = np.zeros((64, 80, 3), np.uint8)
        obs = {"images": {"front": image, "wrist": image.transpose(2, 0, 1).copy()}, "state": np.zeros(3, np.float32),
               "prompt": "pick"}
        assert policy.infer(obs)["actions"].shape == (12, 7)
        for bad in ({**obs, "timestamp_ms": 1.0}, {**obs, "images": {"front": np.zeros((2, 2), np.float32)}}):
            with pytest.raises(RuntimeError):
                policy.infer(bad)
        for frame in (b"\xc1\xff", msgpack.packb({"images": {"front": {b"__ndarray__": True, b"data": b"\0" * 5,
                                                                          b"dtype": "|u1", b"shape": [1, 1, 3]}}})):
            policy._ws.send(frame)
            assert "invalid_request" in policy._ws.recv()
        policy._ws.close()
    _clean(server["stderr"])


def test_a_spoken_conversation_with_barge_in_under_the_sanitizers(sanitized: Path, voice_plan: Path) -> None:
    """/v1/realtime: a spoken turn, speech over its reply (cancelled and cut back to what was
    acknowledged), bad events, and the client leaving while the second reply streams; then SIGTERM."""
    from omni_edge.harness.profiling.spoken import spoken
    from realtime_client import Heard, append, is_type, open_realtime, read_until, send

    with serving(voice_plan, binary=sanitized, env=SANITIZERS) as server, open_realtime(server, max_queue=None) as ws:
        read_until(ws, is_type("session.created"))
        send(ws, type="session.update", session={"max_output_tokens": 24})
        append(ws, spoken([0.4, "What is the capital of France?", 0.9]).pcm16())
        heard = read_until(ws, is_type("response.output_audio.delta"), Heard())
        send(ws, type="playback.ack", played_ms=len(heard.audio) // 48 - 1)  # less than was sent: a cut
        append(ws, spoken(["Wait, stop.", 0.9]).pcm16())
        read_until(ws, is_type("conversation.item.truncated"), heard)
        ws.send("{broken")
        send(ws, type="conversation.item.truncate", item_id="nope", audio_end_ms=5)
        read_until(ws, is_type("error"))
        read_until(ws, is_type("response.output_audio.delta"))  # the second turn's reply: left mid-stream
    _clean(server["stderr"])
