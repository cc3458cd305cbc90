"""/v1/realtime on an omni plan that hears and speaks (the Qwen2.5-Omni thinker, a dual-track
talker reading it, the vocoder, Silero VAD), with the clients people use: the `openai`
package's realtime client and plain websockets. Turns are espeak-ng speech found by the
server's VAD; barge-in cancels the response and cuts the reply back to what was played."""

from __future__ import annotations

import base64
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from omni_edge.harness.profiling.spoken import spoken
from realtime_client import Heard, append, is_type, open_realtime, read_until, send
from serving import serving

SAMPLES_PER_FRAME = 1920  # the tiny vocoder: 24 kHz at 12.5 frames a second


@pytest.fixture(scope="module")
def server(voice_plan: Path) -> Iterator[dict[str, Any]]:
    with serving(voice_plan, "--max-sessions", "2") as running:
        yield running


@pytest.fixture(scope="module")
def turns() -> dict[str, bytes]:
    return {"first": spoken([0.4, "What is the capital of France?", 0.9]).pcm16(),
            "second": spoken(["And what about Italy?", 0.9]).pcm16()}


def _response(ws: Any, heard: Heard | None = None) -> Heard:
    return read_until(ws, is_type("response.done"), heard)


def test_a_voice_conversation_through_the_openai_client(server: dict[str, Any], turns: dict[str, bytes]) -> None:
    """Two turns by voice: the server's VAD finds each, commits it and answers; events come in
    the protocol's order with one response.done per response, the audio deltas are 16-bit PCM
    whole frames long, and the second turn continues the first (its context is resident)."""
    import openai

    client = openai.OpenAI(base_url=server["url"], api_key=server["key"], max_retries=0)
    with client.realtime.connect(model=server["model"]) as conn:
        assert conn.recv().type == "session.created"
        conn.session.update(session={"type": "realtime", "max_output_tokens": 12})
        assert conn.recv().type == "session.updated"
        responses = []
        for turn in ("first", "second"):
            for at in range(0, len(turns[turn]), 4800):
                conn.input_audio_buffer.append(audio=base64.b64encode(turns[turn][at:at + 4800]).decode())
            types, audio = [], 0
            for event in conn:
                types.append(event.type)
                if event.type == "response.output_audio.delta":
                    audio += len(base64.b64decode(event.delta)) // 2
                if event.type == "response.done":
                    responses.append((event, audio))
                    break
            order = ["input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
                     "input_audio_buffer.committed", "response.created", "response.output_item.added",
                     "response.content_part.added", "response.output_audio.delta", "response.output_audio.done",
                     "response.output_audio_transcript.done", "response.content_part.done",
                     "response.output_item.done", "response.done"]
            assert [types.index(t) for t in order] == sorted(types.index(t) for t in order), types
            assert types.count("response.done") == 1 and types.count("response.created") == 1
    first, second = responses[0][0].response, responses[1][0].response
    assert first.status == "incomplete" and first.status_details.reason == "max_output_tokens"
    # A random talker goes on past the text (reading the pad) until its cache is full: whole frames.
    assert first.usage.output_tokens == 12 and responses[0][1] % SAMPLES_PER_FRAME == 0
    assert responses[0][1] >= 12 * SAMPLES_PER_FRAME
    # The second turn reads the first's context from the KV cache: its whole length, nothing re-fed.
    assert second.usage.input_token_details.cached_tokens == first.usage.total_tokens - 1  # the last reply token is fed next
    assert second.usage.input_tokens > first.usage.total_tokens


def _barge_in(server: dict[str, Any], turns: dict[str, bytes], played_ms: int) -> tuple[Heard, Heard]:
    """Turn one; once 600 ms of its audio have come, the client says it played `played_ms` and
    speaks turn two over the reply."""
    with open_realtime(server) as ws:
        read_until(ws, is_type("session.created"))
        send(ws, type="session.update", session={"max_output_tokens": 64})
        read_until(ws, is_type("session.updated"))
        append(ws, turns["first"])
        first = Heard()
        read_until(ws, lambda e: e["type"] == "response.output_audio.delta" and len(first.audio) >= 2 * 24 * 600, first)
        send(ws, type="playback.ack", played_ms=played_ms)
        append(ws, turns["second"])
        first = read_until(ws, is_type("response.done"), first)
        first = read_until(ws, lambda e: e["type"] in ("conversation.item.truncated", "error"), first)
        second = _response(ws)
    return first, second


def _plain(server: dict[str, Any], turns: dict[str, bytes], first_tokens: int) -> tuple[Heard, Heard]:
    """The conversation that only ever held the played part: turn one answered with exactly
    `first_tokens` tokens, then turn two."""
    with open_realtime(server) as ws:
        read_until(ws, is_type("session.created"))
        send(ws, type="session.update", session={"max_output_tokens": first_tokens})
        read_until(ws, is_type("session.updated"))
        append(ws, turns["first"])
        first = _response(ws)
        send(ws, type="session.update", session={"max_output_tokens": 64})
        read_until(ws, is_type("session.updated"))
        append(ws, turns["second"])
        return first, _response(ws)


def test_barge_in_cancels_at_once_and_the_reply_is_cut_to_what_was_played(server: dict[str, Any],
                                                                          turns: dict[str, bytes]) -> None:
    """Speech during the reply cancels it (no audio delta after speech_started; status cancelled,
    turn_detected); the client's playback.ack says 400 ms were played: five 80 ms frames, whose
    talker read five thinker tokens, so the thinker keeps those five. The conversation then goes
    on exactly as one that only ever held those five tokens: the next turn's context length
    (usage) and its reply are the same."""
    first, second = _barge_in(server, turns, played_ms=400)
    types = first.types()
    started = len(types) - 1 - types[::-1].index("input_audio_buffer.speech_started")  # turn two's
    assert started > types.index("response.output_audio.delta")
    assert "response.output_audio.delta" not in types[started:], types[started:]
    done = first.of("response.done")
    assert len(done) == 1 and done[0]["response"]["status"] == "cancelled"
    assert done[0]["response"]["status_details"]["reason"] == "turn_detected"
    truncated = first.of("conversation.item.truncated")
    assert len(truncated) == 1 and truncated[0]["audio_end_ms"] == 400
    assert truncated[0]["kept_tokens"] == 5 and truncated[0]["alignment"] == "frame"
    assert types.index("conversation.item.truncated") > types.index("response.done")
    timing = done[0]["timing"]
    assert timing["interrupt_to_done_ms"] is not None and timing["interrupt_to_last_audio_ms"] is not None
    assert len(second.of("response.done")) == 1 and second.of("response.done")[0]["response"]["status"] != "cancelled"

    plain_first, plain_second = _plain(server, turns, first_tokens=5)
    assert plain_first.of("response.output_audio_transcript.done")[0]["transcript"] == truncated[0]["transcript"]
    got, want = second.of("response.done")[0]["response"], plain_second.of("response.done")[0]["response"]
    assert got["usage"]["input_tokens"] == want["usage"]["input_tokens"]
    assert got["usage"]["input_token_details"] == want["usage"]["input_token_details"]
    assert (second.of("response.output_audio_transcript.done")[0]["transcript"] ==
            plain_second.of("response.output_audio_transcript.done")[0]["transcript"])


def test_response_cancel_without_speech_and_a_client_commit(server: dict[str, Any], turns: dict[str, bytes]) -> None:
    """With turn detection off the client commits and asks; response.cancel stops the reply
    (one response.done, cancelled by the client, nothing after it); a second cancel has nothing
    to cancel; conversation.item.truncate cuts the reply at a given point."""
    with open_realtime(server) as ws:
        read_until(ws, is_type("session.created"))
        send(ws, type="session.update", session={"audio": {"input": {"turn_detection": None}}})
        assert read_until(ws, is_type("session.updated")).events[-1]["session"]["audio"]["input"]["turn_detection"] is None
        append(ws, turns["first"])
        send(ws, type="input_audio_buffer.commit")
        send(ws, type="response.create")
        heard = read_until(ws, is_type("response.output_audio.delta"))
        send(ws, type="response.cancel")
        heard = read_until(ws, is_type("response.done"), heard)
        done = heard.of("response.done")[0]["response"]
        assert done["status"] == "cancelled" and done["status_details"]["reason"] == "client_cancelled"
        assert "input_audio_buffer.speech_started" not in heard.types()
        item = heard.of("response.output_item.done")[0]["item"]["id"]
        send(ws, type="response.cancel", event_id="evt-1")
        error = read_until(ws, is_type("error")).events[-1]["error"]
        assert error["code"] == "response_cancel_not_active" and error["event_id"] == "evt-1"
        send(ws, type="conversation.item.truncate", item_id=item, content_index=0, audio_end_ms=0)
        cut = read_until(ws, lambda e: e["type"] in ("conversation.item.truncated", "error")).events[-1]
        assert cut["type"] == "conversation.item.truncated" and cut["kept_tokens"] == 0 and cut["transcript"] == ""
        send(ws, type="conversation.item.truncate", item_id=item, content_index=0, audio_end_ms=10 ** 7)
        assert read_until(ws, is_type("error")).events[-1]["error"]["param"] == "audio_end_ms"


def test_bad_events_are_answered_with_errors_and_the_session_goes_on(server: dict[str, Any]) -> None:
    with open_realtime(server) as ws:
        read_until(ws, is_type("session.created"))
        ws.send("{not json")
        send(ws, type="conversation.nonsense", event_id="e2")
        send(ws, type="input_audio_buffer.append", audio="%%%")
        send(ws, type="session.update", session={"audio": {"output": {"voice": "alloy"}}})
        send(ws, type="session.update", session={"audio": {"input": {"turn_detection": {"type": "server_vad",
                                                                                           "threshhold": 0.6}}}})
        send(ws, type="response.create")
        errors = [read_until(ws, is_type("error")).events[-1]["error"] for _ in range(6)]
        assert [e["code"] for e in errors] == ["invalid_json", "unknown_event", "invalid_value", "invalid_value",
                                               "invalid_field", "empty_input"]
        assert errors[1]["event_id"] == "e2" and "threshhold" in errors[4]["message"]
        send(ws, type="session.update", session={"instructions": "Be brief."})
        assert read_until(ws, is_type("session.updated")).events[-1]["session"]["instructions"] == "Be brief."


def _wait_idle(server: dict[str, Any]) -> None:
    deadline = time.monotonic() + 30
    while _busy(server) != 0:
        assert time.monotonic() < deadline, "the sessions were not freed"
        time.sleep(0.1)


def _busy(server: dict[str, Any]) -> int:
    request = urllib.request.Request(server["url"].removesuffix("/v1") + "/metrics",
                                     headers={"Authorization": f"Bearer {server['key']}"})
    text = urllib.request.urlopen(request, timeout=10).read().decode()
    return int(float(next(line.split()[-1] for line in text.splitlines() if line.startswith("omni_edge_sessions_busy"))))


def test_sessions_are_held_per_connection_and_freed_when_a_client_leaves(server: dict[str, Any],
                                                                         turns: dict[str, bytes]) -> None:
    """Two conversations at once (--max-sessions 2); a third is refused at the upgrade (429); a
    client that drops mid-response frees its session."""
    from websockets.exceptions import InvalidStatus

    _wait_idle(server)  # the earlier tests' connections
    # Unbounded queues: a client that stops reading would otherwise not see the server's close.
    a, b = open_realtime(server, max_queue=None), open_realtime(server, max_queue=None)
    try:
        read_until(a, is_type("session.created"))
        read_until(b, is_type("session.created"))
        with pytest.raises(InvalidStatus) as refused:
            open_realtime(server)
        assert refused.value.response.status_code == 429
        append(a, turns["first"])
        read_until(a, is_type("response.output_audio.delta"))
    finally:
        a.close()  # mid-response
        b.close()
    _wait_idle(server)
    with open_realtime(server) as c:
        assert read_until(c, is_type("session.created")).events[-1]["session"]["model"] == server["model"]
