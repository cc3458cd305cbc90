"""`omni-edge-run serve` through the official `openai` client: the model list, plain and
streamed chat completions equal to `omni-edge-run --json` on the same conversation (text and
usage), OpenAI's error types with the param named, 429 at once when every session is busy, a
client that drops its stream freeing the session, and a signal ending the server cleanly."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from paths import RUN
from serving import client, serving

QUESTION = "def greet(name):"


@pytest.fixture(scope="module")
def server(tiny_artifact: Path) -> Iterator[dict[str, Any]]:
    with serving(tiny_artifact / "plan.json", "--max-sessions", "2") as running:
        yield running


def _client(server: dict[str, Any], key: str = "secret") -> openai.OpenAI:
    return client(server, key)


def _native(plan: Path, prompt: str, n: int) -> tuple[str, dict[str, Any]]:
    """omni-edge-run's reply to the same one-turn chat, greedy: its text and terminal event."""
    done = subprocess.run([str(RUN), "--plan", str(plan), "--chat", "--prompt", prompt, "--max-new-tokens", str(n),
                           "--temperature", "0", "--threads", "1", "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    events = [json.loads(line) for line in done.stdout.splitlines()]
    return "".join(e["text"] for e in events if e["kind"] == "token"), events[-1]


def test_completions_plain_and_streamed_equal_the_native_run(server: dict[str, Any]) -> None:
    client, model = _client(server), server["model"]
    assert [m.id for m in client.models.list()] == [model]
    text, terminal = _native(server["plan"], QUESTION, 12)
    messages: Any = [{"role": "user", "content": QUESTION}]
    reply = client.chat.completions.create(model=model, messages=messages, max_tokens=12, temperature=0)
    assert reply.choices[0].message.content == text and reply.choices[0].message.role == "assistant"
    assert reply.choices[0].finish_reason == ("length" if terminal["finish_reason"] == "length" else "stop")
    assert reply.usage is not None and reply.usage.prompt_tokens == terminal["n_prompt_tokens"]
    assert reply.usage.completion_tokens == terminal["n_generated_tokens"]
    chunks = list(client.chat.completions.create(model=model, messages=messages, max_tokens=12, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == text
    assert chunks[0].choices[0].delta.role == "assistant" and len({c.id for c in chunks}) == 1
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == reply.usage.total_tokens
    # The request's metrics: in a header of a whole reply; the server's counters in Prometheus text.
    raw = client.chat.completions.with_raw_response.create(model=model, messages=messages, max_tokens=12, temperature=0)
    metrics = json.loads(raw.headers["x-omni-edge-metrics"])["text"]
    assert metrics["n_generated_tokens"] == terminal["n_generated_tokens"] and metrics["ttft_ms"] > 0
    request = urllib.request.Request(server["url"].removesuffix("/v1") + "/metrics", headers={"Authorization": "Bearer secret"})
    with urllib.request.urlopen(request, timeout=30) as page:
        counters = page.read().decode()
    assert 'omni_edge_responses_total{endpoint="chat",code="200"}' in counters
    assert "omni_edge_sessions_busy 0" in counters


def test_bad_requests_are_openai_errors_naming_the_param(server: dict[str, Any]) -> None:
    client, model = _client(server), server["model"]
    messages: Any = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.AuthenticationError):
        _client(server, "wrong").models.list()
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model=model, messages=messages, temperature=3)
    assert bad.value.param == "temperature"
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "x"},
                                                              {"role": "assistant", "content": "y"}])
    assert "the last turn is the user's" in bad.value.message
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="another-model", messages=messages)
    # Plain HTTP, as curl sends it: the wrong content type, an unknown path.
    for path, body, headers, status in (("/chat/completions", b"{}", {"Content-Type": "text/plain"}, 415),
                                        ("/nowhere", None, {}, 404)):
        request = urllib.request.Request(server["url"] + path, data=body, headers={"Authorization": "Bearer secret", **headers})
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(request, timeout=30)
        assert error.value.code == status and "error" in json.loads(error.value.read())


def test_a_busy_server_answers_429_and_a_dropped_stream_frees_its_session(server: dict[str, Any]) -> None:
    client, model = _client(server), server["model"]
    messages: Any = [{"role": "user", "content": QUESTION}]
    # The tiny model fills its 256-position context in well under a second; on a loaded host a
    # held stream can finish (and free its session) before the third request arrives, and the
    # third is then rightly served. Such an attempt proves nothing and is made again; a server
    # that never refuses fails all five.
    for _attempt in range(5):
        # Each create returns with the response's headers: its request holds a session by then.
        held = [client.chat.completions.create(model=model, messages=messages, max_tokens=400, temperature=0,
                                               stream=True, extra_body={"ignore_eos": True}) for _ in range(2)]
        try:
            client.chat.completions.create(model=model, messages=messages, max_tokens=2)
        except openai.RateLimitError as busy:
            assert "all 2 sessions are busy" in busy.message
            break
        for stream in held:
            stream.close()
        _served_once_free(client, model, messages)
    else:
        pytest.fail("in five attempts a held stream always finished before the third request")
    for stream in held:
        stream.close()  # the client goes away: its request is cancelled at the next token
    reply = _served_once_free(client, model, messages)
    assert reply.usage is not None and reply.usage.completion_tokens <= 2


def _served_once_free(client: openai.OpenAI, model: str, messages: Any) -> Any:
    """A two-token reply as soon as a session is free again (the dropped streams' are freed at
    their next token)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return client.chat.completions.create(model=model, messages=messages, max_tokens=2)
        except openai.RateLimitError:
            assert time.monotonic() < deadline, "the dropped streams' sessions never came back"
            time.sleep(0.05)


def test_connections_and_request_bodies_are_capped_and_in_the_ledger(tiny_artifact: Path) -> None:
    """Beyond --max-connections a connection is answered 429 at once, and a body the ledger has no
    memory for is refused 429 before it is read; both name their limit, and the server serves on."""
    plan = tiny_artifact / "plan.json"
    from omni_edge.harness.qualification.ledger import estimate_plan_budget

    sessions = estimate_plan_budget(plan, 1, wsl=False).to_dict()["pools"]["device_ram"]
    pools = json.dumps({"device_ram": sessions + (4 << 20)})  # the session, connections, small bodies
    with serving(plan, "--max-connections", "2", "--memory-pools", pools) as running:
        api, model = client(running), running["model"]
        messages: Any = [{"role": "user", "content": QUESTION}]
        held = [socket.create_connection(("127.0.0.1", _port(running))) for _ in range(2)]
        time.sleep(0.2)  # both accepted
        with pytest.raises(openai.RateLimitError) as over:
            api.chat.completions.create(model=model, messages=messages, max_tokens=2)
        assert over.value.code == "connections" and "--max-connections 2" in over.value.message
        held.pop().close()
        time.sleep(0.2)
        with pytest.raises(openai.RateLimitError) as big:  # 1 MiB: six times that is not free
            api.chat.completions.create(model=model, messages=[{"role": "user", "content": "a" * (1 << 20)}], max_tokens=2)
        assert big.value.code == "admission" and "server: request body" in big.value.message
        reply = api.chat.completions.create(model=model, messages=messages, max_tokens=2)
        assert reply.usage is not None and reply.usage.completion_tokens <= 2
        held.pop().close()  # its thread sees the close a moment later: until then a third is still refused
        metrics = _metrics(running, retry_s=10)
        assert metrics["omni_edge_connections_refused_total"] >= 1
        assert metrics['omni_edge_memory_reserved_bytes{holder="sessions"}'] == sessions
        assert metrics['omni_edge_memory_reserved_bytes{holder="server"}'] > 0  # this request's connection


def _port(server: dict[str, Any]) -> int:
    return int(server["url"].rsplit(":", 1)[1].split("/", 1)[0])


def _metrics(server: dict[str, Any], retry_s: float = 0.0) -> dict[str, float]:
    """GET /metrics, asked again while it is refused 429 (up to `retry_s`)."""
    request = urllib.request.Request(server["url"].removesuffix("/v1") + "/metrics",
                                     headers={"Authorization": f"Bearer {server['key']}"})
    deadline = time.monotonic() + retry_s
    while True:
        try:
            page = urllib.request.urlopen(request, timeout=30).read().decode()
            break
        except urllib.error.HTTPError as error:
            if error.code != 429 or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    rows = [line.rsplit(" ", 1) for line in page.splitlines() if line and not line.startswith("#")]
    return {name: float(value) for name, value in rows}
