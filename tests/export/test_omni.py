"""The three-stage omni pipeline (thinker -> talker -> vocoder): one request yields text and
audio; the thinker's tokens equal transformers', the talker's codes equal the PyTorch dual-track
reference fed with transformers' hidden states, the audio is exact in length, cancel is clean."""

from __future__ import annotations

import json
import subprocess
import wave
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llm_reference import cli
from numeric import assert_codes, assert_greedy
from omni_edge.export.models.qwen3_tts.reference import SAMPLES_PER_FRAME, Qwen3Tts, stream_codes_from_hidden
from omni_edge.export.omni import thinker_reference, write_omni_plan
from omni_edge.runtime import OmniSession
from profile_checks import check_chrome_trace, check_speech_profile

PROMPT = "The stage controller"
from paths import RUN  # noqa: E402

TOKENS, FRAMES = 12, 24


@pytest.fixture(scope="module")
def session(omni_plan: Path) -> OmniSession:
    return OmniSession.open(omni_plan, threads=2)


def test_text_and_audio_of_one_request_equal_the_references(session: OmniSession, tiny_checkpoint: Path,
                                                           omni_speech_checkpoint: Path) -> None:
    result = session.run(PROMPT, max_new_tokens=TOKENS, ignore_stop_tokens=True, max_frames=FRAMES)
    tokens = [t for e in result.text_events if e["kind"] == "token" for t in e["token_ids"]]
    prompt = session.tokenize(PROMPT)
    assert len(tokens) == TOKENS
    assert_greedy(tokens, tiny_checkpoint, prompt, "thinker")
    # The talker's reference reads transformers' hidden states along the thinker's own tokens.
    _, hidden = thinker_reference(tiny_checkpoint, prompt, TOKENS, forced=tokens)
    model = Qwen3Tts.from_pretrained(omni_speech_checkpoint)
    assert len(session.codes()) == FRAMES
    assert_codes(session.codes(), lambda trace: list(stream_codes_from_hidden(model, hidden, FRAMES, trace=trace)),
                 FRAMES, model.ids.eos, "talker")
    assert result.pcm.shape[0] == FRAMES * SAMPLES_PER_FRAME == result.audio["samples"]
    kinds = [e["kind"] for e in result.text_events]
    assert kinds[-1] == "done" and result.audio["finish_reason"] == "length"
    pcm_events = [e for e in result.audio_events if e["kind"] == "pcm"]
    assert [e["first_sample"] for e in pcm_events] == list(np.cumsum([0] + [e["n_samples"] for e in pcm_events])[:-1])


def test_frame_t_needs_only_the_first_t_plus_1_tokens(session: OmniSession) -> None:
    # The streaming property of the dual track, without timing: a reply cut after 6 tokens gives
    # the same first 6 frames as a longer one (frame t reads text hidden state t, or the pad).
    session.run(PROMPT, max_new_tokens=6, ignore_stop_tokens=True, max_frames=FRAMES)
    short = session.codes()
    session.run(PROMPT, max_new_tokens=TOKENS, ignore_stop_tokens=True, max_frames=FRAMES)
    long = session.codes()
    assert short[:6] == long[:6] and short != long


def test_cancel_ends_both_streams_and_the_next_request_is_whole(session: OmniSession) -> None:
    seen: list[dict[str, Any]] = []

    def on_audio(event: dict[str, Any], pcm: Any) -> bool:
        seen.append(event)
        return event["kind"] != "pcm"  # cancel at the first audio chunk

    result = session.run(PROMPT, max_new_tokens=TOKENS, ignore_stop_tokens=True, max_frames=FRAMES, on_audio=on_audio)
    assert result.audio["finish_reason"] == "cancelled" and seen[-1]["kind"] == "cancelled"
    assert [e["kind"] for e in seen].count("pcm") == 1
    assert result.text_events[-1]["kind"] in ("cancelled", "done")
    again = session.run(PROMPT, max_new_tokens=TOKENS, ignore_stop_tokens=True, max_frames=FRAMES)
    assert again.pcm.shape[0] == FRAMES * SAMPLES_PER_FRAME and again.audio["finish_reason"] == "length"


def test_run_speak_cli_prints_text_and_writes_the_wav(omni_plan: Path, tmp_path: Path) -> None:
    out = tmp_path / "reply.wav"
    done = cli("run", "--plan", str(omni_plan), "--prompt", PROMPT, "--max-new-tokens", "8", "--ignore-stop-tokens",
               "--speak", str(out), "--max-frames", "10", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    streams = {(e["stream"], e["kind"]) for e in lines}
    assert ("text", "token") in streams and ("audio", "pcm") in streams and ("audio", "done") in streams
    with wave.open(str(out)) as w:
        assert w.getnframes() == 10 * SAMPLES_PER_FRAME


def test_the_native_cli_speaks_an_omni_plan_through_the_c_abi(omni_plan: Path, tmp_path: Path) -> None:
    out = tmp_path / "reply.wav"
    done = subprocess.run([str(RUN), "--plan", str(omni_plan), "--prompt", PROMPT, "--max-new-tokens", "8",
                           "--ignore-stop-tokens", "--speak", str(out), "--max-frames", "10", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    text = [e for e in lines if e["stream"] == "text"]
    audio = [e for e in lines if e["stream"] == "audio"]
    assert [e["kind"] for e in text] == ["token"] * 8 + ["done"]
    assert audio[-1]["kind"] == "done" and audio[-1]["samples"] == 10 * SAMPLES_PER_FRAME
    with wave.open(str(out)) as w:
        assert w.getnframes() == 10 * SAMPLES_PER_FRAME


def test_a_talker_that_does_not_read_the_thinker_is_refused(omni_plan: Path, tmp_path: Path) -> None:
    plan = json.loads(omni_plan.read_text())
    plan["stages"][1]["input_sources"] = []
    for stage in plan["stages"]:
        stage["artifact"] = str((omni_plan.parent / stage["artifact"]).resolve())
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    from omni_edge.contracts import ContractError

    # Both would read the request's text: the talker must read the thinker (input_sources).
    with pytest.raises(ContractError, match="both read the request's text"):
        OmniSession.open(path)


@pytest.fixture(scope="module")
def small_chunk_plan(tiny_artifact: Path, omni_speech_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The omni plan with 4-frame vocoder chunks and streams of at most 2 events: every edge is short."""
    from omni_edge.export.options import TtsExportOptions
    from omni_edge.export.registry import export_checkpoint
    from omni_edge.export.speech import StreamShape

    speech = tmp_path_factory.mktemp("omni-small-speech")
    export_checkpoint(omni_speech_checkpoint, speech, TtsExportOptions(prefill_chunk=16, buckets=(256,), validation_frames=8,
                                                                stream=StreamShape(first=1, chunk=4, left_context=4)))
    path = write_omni_plan(tiny_artifact / "plan.onnx.json", speech / "plan.json", tmp_path_factory.mktemp("omni-small"))
    plan = json.loads(path.read_text())
    plan["stream_limits"] = {"max_events": 2, "max_bytes": 1 << 20}
    path.write_text(json.dumps(plan))
    return path


def _rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096 / 2 ** 20


def test_a_slow_listener_holds_the_thinker_back_and_memory_bounded(small_chunk_plan: Path) -> None:
    """A consumer 4x slower than real time: the vocoder waits for its credit, the talker for the
    vocoder, the thinker for the talker and the caller (every edge, the hidden-state one
    included, is a credited stream), so the text never runs more than the streams' credit ahead
    of the audio the consumer has taken, and memory stays where a full-speed run leaves it.

    The bound holds only while the talker still takes hidden states: once it has made its last
    frame the thinker is free to finish. Downstream of the talker at most 15 frames wait (pcm
    edge 2 chunks of 4, the vocoder's chunk in hand 4, codes edge 2, the talker's frame 1), so
    only chunks taken with more than 15 frames still to make are checked."""
    import threading
    import time

    session = OmniSession.open(small_chunk_plan, threads=2)
    tokens, frames, in_flight, slowdown = 48, 32, 15, 4

    def peak_rss(run: Any) -> tuple[float, Any]:
        peak, stop = [_rss_mb()], threading.Event()

        def sample() -> None:
            while not stop.wait(0.02):
                peak.append(_rss_mb())

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            result = run()
        finally:
            stop.set()
            sampler.join()
        return max(peak), result

    normal_peak, _ = peak_rss(lambda: session.run(PROMPT, max_new_tokens=tokens, ignore_stop_tokens=True,
                                                  max_frames=frames))
    text_seen: list[int] = []
    lead: list[int] = []

    def on_text(event: dict[str, Any]) -> bool:
        text_seen.extend(event.get("token_ids", []))
        return True

    def on_audio(event: dict[str, Any], pcm: Any) -> bool:
        if event["kind"] == "pcm":
            if event["frames_final"] + in_flight < frames:  # the talker cannot have finished yet
                lead.append(len(text_seen) - event["frames_final"])  # tokens made beyond the audio taken
            time.sleep(slowdown * event["n_samples"] / 24000)
        return True

    slow_peak, result = peak_rss(lambda: session.run(PROMPT, max_new_tokens=tokens, ignore_stop_tokens=True,
                                                     max_frames=frames, on_text=on_text, on_audio=on_audio))
    assert result.audio["frames"] == frames and len(text_seen) == tokens
    # At most: the hidden-state edge (2) and the talker's frame in hand, the codes edge (2) and
    # the vocoder's unfinished chunk (4), the pcm edge (2 chunks of 4 frames), the thinker's
    # token in hand, and the first chunk's frame: about 20. At full speed the thinker makes all
    # 48 tokens within the first chunk's playback time (a lead of 43 at the second chunk).
    assert len(lead) >= 3 and max(lead) <= 20, lead
    assert slow_peak - normal_peak < 64, (normal_peak, slow_peak)
    print(f"peak RSS {normal_peak:.0f} MB at full speed, {slow_peak:.0f} MB {slowdown}x slower; "
          f"tokens ahead at each checked chunk {lead}")


def test_an_omni_plan_is_profiled_with_both_streams_and_the_handoff(omni_plan: Path, tmp_path: Path) -> None:
    out = tmp_path / "profile"
    done = cli("profile", "--device", "host", "--workdir", str(tmp_path / "device"), "--plan", str(omni_plan),
               "--runs", "4", "--warmup", "1", "--out", str(out))  # 20 (the protocol's n) is test_harness's, on text
    assert done.returncode == 0, done.stderr[-3000:]
    report = check_speech_profile(out, "omni", 4)
    metrics = report["groups"]["concurrency-1"]["metrics"]
    for name in ("ttft_ms", "decode_tok_s", "token_interval_ms", "handoff_ms"):
        assert metrics[name]["n"] >= 4 and metrics[name]["p50"] is not None, (name, metrics[name])
    # The first PCM needs the thinker's first hidden state: it never comes before the first token.
    assert metrics["handoff_ms"]["min"] > 0
    assert "token_intervals.png" in report["plots"]


def test_a_traced_omni_request_shows_every_stage_and_graph_in_a_perfetto_readable_trace(omni_plan: Path,
                                                                                       tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    run = [str(RUN), "--plan", str(omni_plan), "--prompt", PROMPT, "--max-new-tokens", "6",
           "--ignore-stop-tokens", "--speak", str(tmp_path / "reply.wav"), "--max-frames", "8", "--trace", str(trace),
           "--repeat", "2"]
    done = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    events = check_chrome_trace(trace)["traceEvents"]
    threads = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert {"caller", "stage 0 thinker", "stage 1 talker"} <= threads and len(threads) == 4, threads
    requests = [e for e in events if e["name"] == "request"]
    assert len(requests) == 1  # the trace holds the last request of the two
    graphs = [e for e in events if e.get("cat") == "graph"]
    assert {e["args"]["device"] for e in graphs} == {"cpu"} and {"embed_chunk", "lm_head"} <= {e["name"] for e in graphs}
    assert all(e["args"]["engine"] == "CPUExecutionProvider" and e["args"]["bytes_in"] == 0 for e in graphs
               if e["args"]["backend"] == "onnxruntime")
    waits = [e for e in events if e["name"].startswith("wait input from stage ")]
    assert waits and all(e["cat"] == "queue" for e in waits)
    # Every graph run and wait lies inside the one request.
    end = requests[0]["ts"] + requests[0]["dur"]
    assert all(requests[0]["ts"] <= e["ts"] and e["ts"] + e["dur"] <= end + 1 for e in graphs + waits)
    refused = subprocess.run([*run[:-4], "--trace", str(tmp_path / "absent" / "trace.json")], capture_output=True,
                             text=True, timeout=300)
    assert refused.returncode == 1 and "cannot write the trace" in refused.stderr


def test_the_native_cli_prints_its_usage_on_help() -> None:
    for flag in ("--help", "-h"):
        done = subprocess.run([str(RUN), flag], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0 and done.stdout.startswith("usage: omni-edge-run") and done.stderr == ""
        assert "--trace FILE" in done.stdout and "speak --plan PLAN" in done.stdout
