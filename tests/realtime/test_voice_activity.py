"""Voice activity detection (Silero VAD v6, the silero-vad package's graph) as a hashed plan
component run natively on ONNX Runtime: frame probabilities as the graph gives them in Python,
turns found on espeak-ng speech at the signal's own boundaries, none in silence or noise; bad
components and settings refused by name."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from omni_edge.harness.profiling.spoken import Utterance, spoken, white_noise
from paths import RUN


@pytest.fixture(scope="module")
def vad_plan(tiny_artifact: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny text plan (its stages by absolute path) with a voice_activity section."""
    from omni_edge.export.vad import attach, export_vad

    root = tmp_path_factory.mktemp("vad-plan")
    plan = json.loads((tiny_artifact / "plan.json").read_text())
    for stage in plan["stages"]:
        stage["artifact"] = str((tiny_artifact / stage["artifact"]).resolve())
    (root / "plan.json").write_text(json.dumps(plan))
    attach(root / "plan.json", export_vad(root))
    return root / "plan.json"


def _vad(plan: Path, wav: Path, *flags: str) -> tuple[int, list[dict[str, Any]], str]:
    done = subprocess.run([str(RUN), "vad", "--plan", str(plan), "--wav", str(wav), *flags], capture_output=True,
                          text=True, timeout=120)
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")], done.stderr


def test_the_native_detector_scores_frames_as_the_graph_does_in_python(vad_plan: Path, tmp_path: Path) -> None:
    """The stream is resampled natively (24 kHz -> 16 kHz in 20 ms appends) and scored frame by
    frame with the state carried; Python runs the same graph on scipy's resampling of the whole
    signal: the probabilities agree to float rounding."""
    from omni_edge.export.vad import FRAME, SileroFrames, probabilities
    from scipy.signal import resample_poly

    speech = spoken([0.4, "Turn left at the next corner.", 0.8])
    rc, lines, err = _vad(vad_plan, speech.write_wav(tmp_path / "s.wav"), "--frames")
    assert rc == 0, err
    native = np.array(lines[-1]["probabilities"], np.float32)
    sent = np.frombuffer(speech.pcm16(), "<i2").astype(np.float64) / 32768.0  # what the WAV holds
    x16 = resample_poly(sent, 2, 3).astype(np.float32)
    reference = probabilities(SileroFrames(vad_plan.parent / "vad-onnx" / "silero_vad.onnx"), x16)
    assert len(native) == len(x16) // FRAME or len(native) == len(reference) - 1  # the resampler's tail
    n = len(native)
    assert np.abs(native - reference[:n]).max() < 1e-4
    assert reference.max() > 0.9 and reference[:5].max() < 0.1  # speech scored as speech, silence not
    assert lines[-1]["engine"] == "CPUExecutionProvider" and lines[-1]["device"] == "cpu"


def test_turns_are_found_at_the_boundaries_of_real_speech(vad_plan: Path, tmp_path: Path) -> None:
    """Two espeak-ng sentences between silences: two turns, each start and end within 100 ms of
    the sentence's first and last audible sample (no prefix padding; the end is where the
    closing silence began), and audio_end_ms that silence's length later."""
    speech = spoken([1.2, "What is the capital of France?", 1.5, "And of Italy?", 1.0])
    rc, lines, err = _vad(vad_plan, speech.write_wav(tmp_path / "two.wav"), "--prefix-padding-ms", "0")
    assert rc == 0, err
    starts = [e for e in lines if e["kind"] == "speech_started"]
    stops = [e for e in lines if e["kind"] == "speech_stopped"]
    assert len(starts) == len(stops) == 2, lines
    for (begin, end), start, stop in zip(speech.spans_ms, starts, stops, strict=True):
        assert abs(start["audio_start_ms"] - begin) <= 100, (start, begin)
        assert abs(stop["speech_end_ms"] - end) <= 100, (stop, end)
        assert 500 <= stop["audio_end_ms"] - stop["speech_end_ms"] <= 540  # 500 ms of silence, in 32 ms frames
    padded = _vad(vad_plan, tmp_path / "two.wav")[1]
    assert [e["audio_start_ms"] for e in padded if e["kind"] == "speech_started"] == [
        max(0, s["audio_start_ms"] - 300) for s in starts]


@pytest.mark.parametrize("signal", ["silence", "white_noise"])
def test_silence_and_noise_start_no_turn(vad_plan: Path, tmp_path: Path, signal: str) -> None:
    audio = white_noise(4.0) if signal == "white_noise" else Utterance(np.zeros(4 * 24000, np.float32), 24000, [])
    rc, lines, err = _vad(vad_plan, audio.write_wav(tmp_path / "x.wav"))
    assert rc == 0, err
    assert [e["kind"] for e in lines] == ["done"] and lines[0]["turns"] == 0 and not lines[0]["speaking"]


def test_a_tampered_graph_a_missing_section_and_bad_settings_are_refused(vad_plan: Path, tmp_path: Path) -> None:
    wav = white_noise(0.5).write_wav(tmp_path / "n.wav")
    copy = tmp_path / "copy"
    shutil.copytree(vad_plan.parent, copy)
    graph = copy / "vad-onnx" / "silero_vad.onnx"
    graph.write_bytes(graph.read_bytes()[:-1] + b"\0")
    rc, lines, _ = _vad(copy / "plan.json", wav)
    assert rc == 1 and lines[0]["kind"] == "error" and "silero_vad.onnx" in lines[0]["message"], lines
    plan = json.loads(vad_plan.read_text())
    del plan["voice_activity"]
    (tmp_path / "plain.json").write_text(json.dumps(plan))
    rc, lines, _ = _vad(tmp_path / "plain.json", wav)
    assert rc == 1 and "no voice_activity" in lines[0]["message"]
    plan = json.loads(vad_plan.read_text())
    plan["voice_activity"]["graphs"]["vad"]["graphs"] = {"frame": "../../etc/passwd"}
    (tmp_path / "outside.json").write_text(json.dumps(plan))
    rc, lines, _ = _vad(tmp_path / "outside.json", wav)
    assert rc == 1 and lines[0]["kind"] == "error", lines
    rc, lines, _ = _vad(vad_plan, wav, "--threshold", "0.05")
    assert rc == 1 and lines[0]["reason"] == "invalid_field" and "threshold" in lines[0]["message"]
