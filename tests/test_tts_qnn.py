"""The speech stages on the NPU route: fp16 context binaries, every graph placed on the HTP
(the emulator here, with CPU fallback disabled), validated through the native chain."""

from __future__ import annotations

from pathlib import Path

from llm_reference import cli
from omni_edge.export.qwen3_tts import SAMPLES_PER_FRAME, StreamShape
from omni_edge.export.tts import TtsExportOptions
from omni_edge.export.tts_qnn import FP16_LIMITS, export_tts_qnn
from omni_edge.runtime import SpeechSession


def test_fp16_talker_runs_entirely_on_the_htp(tts_checkpoint: Path, tmp_path: Path) -> None:
    # Small vocoder windows (2 and 9 frames) and few frames: the x86 emulator runs HTP code slowly.
    opts = TtsExportOptions(prefill_chunk=16, buckets=(128,), validation_frames=8,
                            stream=StreamShape(first=1, chunk=4, left_context=4))
    [(component, got)] = export_tts_qnn(tts_checkpoint, tmp_path, opts, ("sm8650",))
    assert component.name == "speech-qnn-sm8650-fp16"
    assert got["frames"] == 8 and got["samples_match"] == 1.0
    assert got["frame_agreement"] >= FP16_LIMITS["frame_agreement"] and got["pcm_sqnr_db"] >= FP16_LIMITS["pcm_sqnr_db"]
    assert cli("verify", str(component)).returncode == 0  # both reports passed: qualified
    session = SpeechSession.open(tmp_path / "plan.json")  # refuses an unqualified artifact
    talker = [p for p in session.placements() if not p["graph"].startswith("vocoder")]
    vocoder = [p for p in session.placements() if p["graph"].startswith("vocoder")]
    assert {(p["device"], p["engine"], p["nodes_elsewhere"]) for p in talker} == {("npu", "QNNExecutionProvider", 0)}
    assert {(p["device"], p["engine"]) for p in vocoder} == {("cpu", "CPUExecutionProvider")}
    assert session.speak("Hi.", max_frames=2).pcm.shape[0] == 2 * SAMPLES_PER_FRAME


def test_quantized_speech_is_refused_clearly(tts_checkpoint: Path, tmp_path: Path) -> None:
    done = cli("export", "tts", "--checkpoint", str(tts_checkpoint), "--out", str(tmp_path), "--target", "qnn-htp",
               "--precision", "w8a16", "--soc", "sm8650")
    assert done.returncode == 2 and "fp16 only" in done.stderr and "Traceback" not in done.stderr
    old = cli("export", "tts", "--checkpoint", str(tts_checkpoint), "--out", str(tmp_path), "--target", "qnn-htp",
              "--soc", "qcs6490")
    assert old.returncode == 2 and "Traceback" not in old.stderr
