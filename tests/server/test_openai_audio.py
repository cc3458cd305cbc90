"""Audio through the official `openai` client: /v1/audio/speech on a speech plan equal to
`omni-edge-run speak`'s samples (a whole WAV, the raw pcm bytes as they are made, vLLM-Omni's
speech.audio.* events), and chat completions with modalities ["text", "audio"] on an omni plan
equal to `omni-edge-run --speak`'s text and samples, whole (a WAV) and streamed (pcm16 pieces)."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import urllib.request
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import openai
import pytest
from paths import RUN
from serving import client, serving

TEXT = "Hello from the server."
FRAMES = 12
SAMPLES_PER_FRAME = 1920  # the tiny vocoder's hop: 24 kHz at 12.5 frames per second


@pytest.fixture(scope="module")
def speech_server(tts_artifact: Path) -> Iterator[dict[str, Any]]:
    with serving(tts_artifact) as running:
        yield running


@pytest.fixture(scope="module")
def omni_server(omni_plan: Path) -> Iterator[dict[str, Any]]:
    with serving(omni_plan) as running:
        yield running


def _wav(data: bytes) -> tuple[int, np.ndarray]:
    with wave.open(io.BytesIO(data)) as w:
        assert (w.getnchannels(), w.getsampwidth()) == (1, 2)
        return w.getframerate(), np.frombuffer(w.readframes(w.getnframes()), "<i2")


def _same_audio(got: np.ndarray, want: np.ndarray) -> bool:
    """The same samples, up to one step of 16-bit rounding: the adaptive vocoder schedule cuts
    chunks by the clock, and a window recomputed at another cut differs in float by ~1e-7
    (measured: two native runs cut [1, 2, 4, 5] and [1, 1, 2, 4, 4] frames differ by 1 at most,
    108 dB)."""
    return got.shape == want.shape and int(np.abs(got.astype(np.int32) - want).max(initial=0)) <= 1


def _native(args: list[str], out: Path) -> tuple[list[dict[str, Any]], np.ndarray]:
    """omni-edge-run's events and the samples of the WAV it wrote."""
    done = subprocess.run([str(RUN), *args, "--threads", "1", "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines()], _wav(out.read_bytes())[1]


def test_speech_equals_speak_whole_streamed_and_as_events(speech_server: dict[str, Any], tmp_path: Path) -> None:
    api, model = client(speech_server), speech_server["model"]
    _, want = _native(["speak", "--plan", str(speech_server["plan"]), "--text", TEXT, "--max-frames", str(FRAMES),
                       "--out", str(tmp_path / "speak.wav")], tmp_path / "speak.wav")
    assert len(want) > 0
    frames: Any = {"max_new_tokens": FRAMES}  # vLLM-Omni's name for the talker's frame limit
    rate, whole = _wav(api.audio.speech.create(model=model, voice="default", input=TEXT, response_format="wav",
                                               extra_body=frames).content)
    assert rate == 24000 and _same_audio(whole, want)
    with api.audio.speech.with_streaming_response.create(model=model, voice="default", input=TEXT, response_format="pcm",
                                                         stream_format="audio", extra_body=frames) as streamed:
        assert streamed.headers["content-type"] == "audio/pcm"
        pieces = list(streamed.iter_bytes())
    assert _same_audio(np.frombuffer(b"".join(pieces), "<i2"), want)
    body = json.dumps({"model": model, "input": TEXT, "response_format": "pcm", "stream_format": "sse", **frames})
    request = urllib.request.Request(speech_server["url"] + "/audio/speech", data=body.encode(), headers={
        "Authorization": "Bearer secret", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as page:
        events = [json.loads(line[6:]) for line in page.read().decode().splitlines() if line.startswith("data: ")]
    assert [e["type"] for e in events] == ["speech.audio.delta"] * (len(events) - 1) + ["speech.audio.done"]
    pcm = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    assert _same_audio(np.frombuffer(pcm, "<i2"), want) and events[-1]["usage"]["output_tokens"] == FRAMES


def test_speech_refusals_name_the_param(speech_server: dict[str, Any]) -> None:
    api, model = client(speech_server), speech_server["model"]
    for kwargs, param in (({"voice": "alloy"}, "voice"), ({"response_format": "mp3"}, "response_format"),
                          ({"speed": 1.5}, "speed"), ({"input": ""}, "input")):
        args: Any = {"model": model, "voice": "default", "input": TEXT, **kwargs}
        with pytest.raises(openai.BadRequestError) as bad:
            api.audio.speech.create(**args)
        assert bad.value.param == param, bad.value.message
    with pytest.raises(openai.BadRequestError, match="/v1/audio/speech"):  # a speech plan makes no chat replies
        api.chat.completions.create(model=model, messages=[{"role": "user", "content": TEXT}])


def test_chat_with_audio_on_the_omni_plan_equals_the_native_run(omni_server: dict[str, Any], tmp_path: Path) -> None:
    api, model = client(omni_server), omni_server["model"]
    [card] = api.models.list().data
    assert card.model_extra is not None and card.model_extra["output_modalities"] == ["text", "audio"]
    events, want = _native(["--plan", str(omni_server["plan"]), "--chat", "--prompt", TEXT, "--max-new-tokens", "8",
                            "--ignore-stop-tokens", "--temperature", "0", "--speak", str(tmp_path / "native.wav"),
                            "--max-frames", str(FRAMES)], tmp_path / "native.wav")
    text = "".join(e["text"] for e in events if e["stream"] == "text" and e["kind"] == "token")
    extra: Any = {"ignore_eos": True, "max_audio_frames": FRAMES}
    messages: Any = [{"role": "user", "content": TEXT}]
    reply = api.chat.completions.create(model=model, messages=messages, max_tokens=8, temperature=0,
                                        modalities=["text", "audio"], audio={"voice": "default", "format": "wav"},
                                        extra_body=extra)
    audio = reply.choices[0].message.audio
    assert audio is not None and audio.transcript == text and reply.choices[0].message.content is None
    rate, samples = _wav(base64.b64decode(audio.data))
    assert rate == 24000 and len(samples) % SAMPLES_PER_FRAME == 0
    assert _same_audio(samples, want)
    assert reply.usage is not None and reply.usage.completion_tokens == 8
    chunks = list(api.chat.completions.create(model=model, messages=messages, max_tokens=8, temperature=0, stream=True,
                                              modalities=["text", "audio"], audio={"voice": "default", "format": "pcm16"},
                                              extra_body=extra))
    deltas: list[Any] = [c.choices[0].delta.audio for c in chunks if c.choices and c.choices[0].delta.audio]
    assert "".join(d.transcript or "" for d in deltas) == text
    pcm = b"".join(base64.b64decode(d.data) for d in deltas if d.data)
    assert _same_audio(np.frombuffer(pcm, "<i2"), want)
    assert deltas[-1].expires_at is not None and len({d.id for d in deltas}) == 1
    with pytest.raises(openai.BadRequestError) as bad:  # OpenAI's rule: a stream's audio is pcm16
        api.chat.completions.create(model=model, messages=messages, stream=True, modalities=["text", "audio"],
                                    audio={"voice": "default", "format": "wav"})
    assert bad.value.param == "audio.format"


def test_a_client_that_leaves_a_whole_response_cancels_it(speech_server: dict[str, Any]) -> None:
    """Not streamed, the response is written at the end: the server sees the client close its
    side while the request runs, and cancels it at the next frame (its session is free at once)."""
    import socket
    import time

    host, port = speech_server["url"].removeprefix("http://").removesuffix("/v1").split(":")
    before = _cancelled(speech_server)
    body = json.dumps({"model": speech_server["model"], "input": TEXT, "max_new_tokens": 1500}).encode()
    with socket.create_connection((host, int(port))) as raw:  # 1500 frames: two minutes of audio, seconds of work
        raw.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\n"
                    b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        time.sleep(0.3)
    api = client(speech_server)
    deadline = time.monotonic() + 30
    while True:
        try:
            api.audio.speech.create(model=speech_server["model"], voice="default", input=TEXT, extra_body={"max_new_tokens": 2})
            break
        except openai.RateLimitError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert _cancelled(speech_server) == before + 1


def _cancelled(server: dict[str, Any]) -> int:
    """The server's count of requests cancelled before their end (GET /metrics)."""
    request = urllib.request.Request(server["url"].removesuffix("/v1") + "/metrics", headers={"Authorization": "Bearer secret"})
    with urllib.request.urlopen(request, timeout=30) as page:
        [line] = [row for row in page.read().decode().splitlines() if row.startswith("omni_edge_cancelled_total ")]
    return int(line.split()[1])
