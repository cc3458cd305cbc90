"""The native speech chain (talker stage -> vocoder stage on contract streams): codes equal the
PyTorch reference, streamed PCM equals the reference decode within the measured bound, the
stream is exact (no lost, duplicated or reordered samples), cancellation is clean."""

from __future__ import annotations

import itertools
import json
import random
import threading
import wave
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from llm_reference import cli
from numeric import assert_codes, assert_sqnr
from omni_edge.contracts import ContractError
from omni_edge.export.models.qwen3_tts.reference import SAMPLES_PER_FRAME, Qwen3Tts, decode_offline, decode_streaming, generate_codes
from omni_edge.export.speech import StreamShape
from omni_edge.runtime import SpeechSession, Utterance, playback_stats

TEXT = "Streaming speech, frame by frame."
FRAMES = 100  # 8 s of audio: past the 72-frame left context, so the bound is exercised
OFFLINE_SQNR_DB = 60.0  # left-context chunking vs one offline decode (measured 79 dB in the reference)
ROUNDING_SQNR_DB = 100.0  # ONNX Runtime vs PyTorch on the same frames: float rounding only (measured 126 dB)


@pytest.fixture(scope="module")
def model(tts_checkpoint: Path) -> Qwen3Tts:
    return Qwen3Tts.from_pretrained(tts_checkpoint)


@pytest.fixture(scope="module")
def session(tts_artifact: Path) -> SpeechSession:
    return SpeechSession.open(tts_artifact, threads=2)


@pytest.fixture(scope="module")
def spoken(session: SpeechSession) -> tuple[Utterance, list[list[int]]]:
    utterance = session.speak(TEXT, max_frames=FRAMES)
    return utterance, session.codes()


def test_native_codes_equal_the_pytorch_reference(model: Qwen3Tts, session: SpeechSession,
                                                  spoken: tuple[Utterance, list[list[int]]]) -> None:
    utterance, codes = spoken
    assert len(codes) == utterance.metrics["frames"]
    text = session.tokenize(TEXT)
    assert_codes(codes, lambda trace: generate_codes(model, text, FRAMES, trace=trace), FRAMES, model.ids.eos)
    assert utterance.metrics["finish_reason"] in ("length", "eos")


def test_streamed_pcm_is_exact_in_length_and_equals_the_reference(model: Qwen3Tts,
                                                                 spoken: tuple[Utterance, list[list[int]]]) -> None:
    utterance, codes = spoken
    pcm, frames = utterance.pcm, len(codes)
    assert pcm.shape[0] == frames * SAMPLES_PER_FRAME == utterance.metrics["samples"]
    # No lost, duplicated or reordered chunk: each pcm event starts where the previous ended.
    pcm_events = [e for e in utterance.events if e["kind"] == "pcm"]
    assert [e["first_sample"] for e in pcm_events] == list(np.cumsum([0] + [e["n_samples"] for e in pcm_events])[:-1])
    assert [e["seq"] for e in pcm_events] == sorted(e["seq"] for e in pcm_events)
    # The adaptive schedule's chunks: the first alone, each at most twice the last and at most
    # the largest; where it cut them depends on this host's timing, so the reference decodes
    # the chunks the stream reported.
    ends = _chunk_ends(utterance)
    sizes = [b - a for a, b in zip([0, *ends[:-1]], ends, strict=True)]
    done = utterance.events[-1]
    assert sizes[0] == 1 and all(0 < n <= min(25, 2 * m) for m, n in itertools.pairwise(sizes[:-1])), sizes
    assert done["chunk_schedule"] == "adaptive" and done["chunk_frames"] == [n for n in sizes if n > 0]
    assert done["prebuffer_ms"] == 0 and done["playback_start_ms"] == done["first_pcm_ms"]
    # The lead over time: the audio still queued as each chunk arrived (none before playback).
    leads = [e["lead_ms"] for e in pcm_events]
    assert leads[0] == -1 and all(lead >= 0 for lead in leads[1:]) and min(leads[1:]) == done["lead_min_ms"]
    assert done["kind"] == "done" and done["samples"] == pcm.shape[0]
    # The same chunking in PyTorch: equal to float rounding (measured 126 dB).
    codes_t = torch.tensor(codes)
    streamed_ref = torch.cat(decode_streaming(model, codes_t, ends=ends)).numpy()
    assert_sqnr(streamed_ref, pcm, ROUNDING_SQNR_DB, "streamed PCM vs PyTorch")
    # Against one offline decode: equal to float rounding while the left context holds the whole
    # history, within the measured bound after.
    offline = decode_offline(model, codes_t).numpy()
    whole_context = (StreamShape().left_context + 1) * SAMPLES_PER_FRAME - model.tail_samples
    assert_sqnr(offline[:whole_context], pcm[:whole_context], ROUNDING_SQNR_DB, "whole-context PCM vs offline")
    assert_sqnr(offline, pcm, OFFLINE_SQNR_DB, "PCM vs offline")


def test_speak_cli_writes_an_exact_wav_and_metrics(tts_artifact: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.wav"
    done = cli("speak", "--plan", str(tts_artifact), "--text", TEXT, "--out", str(out), "--max-frames", "30", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    last = lines[-1]
    assert last["kind"] == "done" and lines[0]["kind"] == "pcm"
    for key in ("first_pcm_ms", "rtf", "underruns", "underrun_ms", "samples", "sample_rate"):
        assert key in last
    assert last["samples"] == last["frames"] * SAMPLES_PER_FRAME and last["sample_rate"] == 24000
    assert 0 < last["first_pcm_ms"] <= last["total_ms"] and last["rtf"] > 0
    with wave.open(str(out)) as w:
        assert (w.getnframes(), w.getframerate(), w.getsampwidth(), w.getnchannels()) == (last["samples"], 24000, 2, 1)


def _speak_and_cancel(session: SpeechSession, rng: random.Random,
                      from_thread: bool) -> tuple[list[dict[str, Any]], int | None, Utterance]:
    """One utterance cancelled at a random point: by the consumer at its k-th pcm event, or by
    another thread at a random time. Returns the events seen, the event count when the consumer
    cancelled (None if it did not) and the utterance."""
    seen: list[dict[str, Any]] = []
    cancelled_at: list[int] = []
    stop_after = rng.randrange(0, 4)
    timer = threading.Timer(rng.uniform(0.0, 0.4), session.cancel) if from_thread else None
    if timer is not None:
        timer.start()

    def on_event(event: dict[str, Any], pcm: Any) -> bool:
        seen.append(event)
        if event["kind"] == "pcm" and not from_thread and len(seen) > stop_after:
            cancelled_at.append(len(seen))
            return False
        return True

    utterance = session.speak(TEXT, max_frames=60, on_event=on_event)
    if timer is not None:
        timer.join()
    return seen, (cancelled_at[0] if cancelled_at else None), utterance


def _chunk_ends(utterance: Utterance) -> list[int]:
    """The frame counts at which the stream cut its chunks (the adaptive schedule cuts them by
    this host's timing, so two runs of one request may chunk it differently)."""
    return [int(e["frames_final"]) for e in utterance.events if e["kind"] == "pcm"]


def test_cancel_at_a_random_point_of_20_requests(model: Qwen3Tts, session: SpeechSession,
                                                 spoken: tuple[Utterance, list[list[int]]]) -> None:
    rng = random.Random(7)
    for i in range(20):
        seen, cancelled_at, utterance = _speak_and_cancel(session, rng, from_thread=bool(i % 2))
        terminal = seen[-1]
        assert terminal["kind"] in ("cancelled", "done") and [e["kind"] for e in seen].count(terminal["kind"]) == 1
        if cancelled_at is not None:  # nothing but the terminal event after the cancel
            assert len(seen) == cancelled_at + 1
            # "done" only when the cancel came with the last chunk: the consumer has it all
            assert terminal["kind"] == "cancelled" or terminal["samples"] == terminal["frames"] * SAMPLES_PER_FRAME
        delivered = sum(e["n_samples"] for e in seen if e["kind"] == "pcm")
        assert terminal["samples"] == delivered == utterance.pcm.shape[0]
        if terminal["kind"] == "cancelled":
            assert terminal["finish_reason"] == "cancelled"
    # The next request on the same session is whole and identical to the first one.
    again = session.speak(TEXT, max_frames=FRAMES)
    first, codes = spoken
    assert session.codes() == codes
    if _chunk_ends(again) == _chunk_ends(first):
        assert np.array_equal(again.pcm, first.pcm)
    # Chunked elsewhere (as on a loaded host): the PyTorch decode of its own chunks, to rounding.
    streamed_ref = torch.cat(decode_streaming(model, torch.tensor(codes), ends=_chunk_ends(again))).numpy()
    assert_sqnr(streamed_ref, again.pcm, ROUNDING_SQNR_DB, "PCM after 20 cancelled requests vs PyTorch")


def test_bad_speech_input_is_a_clear_error_and_the_session_survives(session: SpeechSession, tts_artifact: Path,
                                                                   tmp_path: Path) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"text": ""}, "invalid_prompt"),
        ({"text_ids": [10 ** 7]}, "invalid_prompt"),
        ({"text": "hi", "max_frames": -1}, "invalid"),
        ({"text": "hi", "prebuffer_ms": -5.0}, "invalid_argument"),
        ({"text": "word " * 400}, "context_overflow"),
        ({"text": "hi", "sampling": {"temperature": -1.0}}, "invalid"),
    ]
    for kwargs, code in cases:
        with pytest.raises(ContractError) as err:
            session.speak(**kwargs)
        assert code in err.value.code
    assert session.speak("Still here.", max_frames=3).metrics["frames"] == 3

    def failing(event: dict[str, Any], pcm: Any) -> bool:
        raise RuntimeError("the consumer broke")

    with pytest.raises(RuntimeError, match="the consumer broke"):  # cancels, ends, then raises
        session.speak("Still here.", max_frames=30, on_event=failing)
    assert session.speak("Still here.", max_frames=3).metrics["frames"] == 3

    plan = json.loads(tts_artifact.read_text())
    artifact = str(tts_artifact.parent / plan["stages"][0]["artifact"])
    broken: list[tuple[str, Any]] = [
        ("windows", lambda p: p["stages"][1]["vocoder"].update(windows=[2, 50])),
        ("left_context", lambda p: p["stages"][1]["vocoder"].update(left_context=0, windows=[2, 26])),
        ("above 100000", lambda p: p["stages"][1]["vocoder"].update(left_context=2 ** 62)),
        ("codec_ids", lambda p: p["stages"][0]["talker"]["codec_ids"].update(eos=3)),
        ("predictor_head", lambda p: p["stages"][0]["graphs"].pop("predictor_head")),
        ("pcm_dtype", lambda p: p["stages"][1]["vocoder"].update(pcm_dtype="int8")),
        ("schedule.policy", lambda p: p["stages"][1]["vocoder"].update(schedule={"policy": "eager"})),
        ("schedule.growth", lambda p: p["stages"][1]["vocoder"]["schedule"].update(growth=0.5)),
        ("schedule.margin_ms", lambda p: p["stages"][1]["vocoder"]["schedule"].update(margin_ms=-1)),
        ("unknown field", lambda p: p["stages"][1]["vocoder"].update(schedule={"policy": "fixed", "growth": 2})),
        ("one model section", lambda p: p["stages"][1].update(llm={})),
        ("reads the codes of one talker stage", lambda p: p["stages"][1].update(input_sources=[])),
    ]
    for expected, mutate in broken:
        bad = json.loads(json.dumps(plan))
        for stage in bad["stages"]:
            stage["artifact"] = artifact
        mutate(bad)
        path = tmp_path / "plan.json"
        path.write_text(json.dumps(bad))
        with pytest.raises(ContractError) as err:
            SpeechSession.open(path)
        assert expected in err.value.message, err.value.message


def _plan_with_vocoder(tts_artifact: Path, out: Path, **vocoder: Any) -> Path:
    plan = json.loads(tts_artifact.read_text())
    plan["stages"][1]["vocoder"].update(vocoder)
    for stage in plan["stages"]:
        stage["artifact"] = str(tts_artifact.parent / stage["artifact"])
    out.write_text(json.dumps(plan))
    return out


def test_int16_pcm_events_match_the_float_stream(model: Qwen3Tts, tts_artifact: Path, tmp_path: Path,
                                                  spoken: tuple[Utterance, list[list[int]]]) -> None:
    path = _plan_with_vocoder(tts_artifact, tmp_path / "plan.json", pcm_dtype="int16")
    utterance = SpeechSession.open(path, threads=2).speak(TEXT, max_frames=FRAMES)
    # The PyTorch stream of the same codes cut where this run's schedule cut them.
    reference = torch.cat(decode_streaming(model, torch.tensor(spoken[1]), ends=_chunk_ends(utterance))).numpy()
    assert utterance.pcm.shape == reference.shape
    assert np.abs(utterance.pcm - np.clip(reference, -1, 1)).max() <= 1 / 32767 + 1e-5


def test_a_fixed_schedule_cuts_its_chunks_and_keeps_its_prebuffer(model: Qwen3Tts, tts_artifact: Path, tmp_path: Path,
                                                                  spoken: tuple[Utterance, list[list[int]]]) -> None:
    """A plan that declares the fixed schedule (as plans before the adaptive one did): 1, 25, ...
    frames whatever the timing, and a request naming no prebuffer gets the 200 ms it needs."""
    path = _plan_with_vocoder(tts_artifact, tmp_path / "plan.json", schedule={"policy": "fixed"})
    utterance = SpeechSession.open(path, threads=2).speak(TEXT, max_frames=30)
    done = utterance.metrics
    assert done["chunk_schedule"] == "fixed" and done["chunk_frames"] == [1, 25, 4] and done["prebuffer_ms"] == 200
    assert _chunk_ends(utterance) == [s for _, s, _ in StreamShape(adaptive=False).chunks(30)]
    reference = torch.cat(decode_streaming(model, torch.tensor(spoken[1][:30]), StreamShape(adaptive=False))).numpy()
    assert_sqnr(reference, utterance.pcm, ROUNDING_SQNR_DB, "fixed-schedule PCM vs PyTorch")


def test_the_executorch_speech_program_speaks_the_same_codes(tts_checkpoint: Path, tmp_path: Path,
                                                            spoken: tuple[Utterance, list[list[int]]]) -> None:
    from omni_edge.export.options import TtsExportOptions
    from omni_edge.export.registry import export_checkpoint
    from omni_edge.export.speech import StreamShape as Shape

    # Small vocoder windows (2 and 9 frames) keep the export short; the chain is the same.
    opts = TtsExportOptions(prefill_chunk=16, buckets=(256,), validation_frames=30, formats=("pte",),
                            stream=Shape(first=1, chunk=4, left_context=4, adaptive=False))
    [(component, got)] = export_checkpoint(tts_checkpoint, tmp_path, opts)
    assert component.name == "speech-pte" and (component / "model.pte").is_file()
    assert got["codes_agree_to_near_tie"] == 1.0 and got["pcm_sqnr_db"] > 80 and got["samples_match"] == 1.0, got
    session = SpeechSession.open(tmp_path / "plan.json", threads=2)
    assert {p["backend"] for p in session.placements()} == {"executorch"}
    utterance = session.speak(TEXT, max_frames=40)
    assert len(session.codes()) == 40 and utterance.pcm.shape[0] == 40 * SAMPLES_PER_FRAME
    model = Qwen3Tts.from_pretrained(tts_checkpoint)
    text = session.tokenize(TEXT)
    assert_codes(session.codes(), lambda trace: generate_codes(model, text, 40, trace=trace), 40, model.ids.eos,
                 "ExecuTorch codes")


def test_the_playback_clock_counts_underruns_after_playback_starts() -> None:
    """The session's own clock (what `speak` reports), over chunks of 200 ms of audio each."""
    stats = playback_stats([(0.0, 4800), (300.0, 4800), (1000.0, 4800)], 24_000, prebuffer_ms=200)
    # Plays from 0 ms until 200; silent 200..300 and 500..1000.
    assert stats["playback_start_ms"] == 0 and stats["first_pcm_ms"] == 0
    assert stats["underruns"] == 2 and stats["underrun_ms"] == 600 and stats["max_gap_ms"] == 700
    waiting = playback_stats([(0.0, 2400), (300.0, 2400)], 24_000, prebuffer_ms=250)  # starts at the end
    assert waiting["playback_start_ms"] == 300 and waiting["underruns"] == 0 and waiting["samples"] == 4800
    with pytest.raises(ValueError, match="sample_rate"):
        playback_stats([], 0, 0)
