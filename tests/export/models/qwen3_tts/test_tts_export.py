"""Speech graphs: exported with static shapes, driven through ONNX Runtime exactly as the
controller will drive them, they give the PyTorch reference's codes and PCM."""

from __future__ import annotations

import json
from pathlib import Path

from llm_reference import cli


def _checks(report: Path) -> dict[str, float]:
    return {c["name"]: c["observed"] for c in json.loads(report.read_text())["checks"]}


def test_speech_graphs_equal_the_reference_and_verify(tts_checkpoint: Path, tmp_path: Path) -> None:
    done = cli("export", "tts", "--checkpoint", str(tts_checkpoint), "--out", str(tmp_path), "--buckets", "128",
               "--prefill-chunk", "16")
    assert done.returncode == 0, done.stderr[-3000:]
    component = tmp_path / "speech-onnx"
    task, numerical = _checks(component / "reports" / "task.json"), _checks(component / "reports" / "numerical.json")
    assert task["codes_agree_to_near_tie"] == 1.0 and task["codes_verified"] == 48 * 16 and task["samples_exact"] == 1.0
    assert numerical["pcm_sqnr_db"] > 80 and numerical["pcm_max_abs_diff"] < 1e-4
    speech = json.loads((component / "manifest.json").read_text())["metadata"]["speech"]
    # The adaptive schedule (the default) has a window graph for every size its chunks grow through,
    # each checked against PyTorch.
    assert speech["stream"] == {"first": 1, "chunk": 25, "left_context": 72, "window": 98,
                                "windows": [2, 4, 8, 16, 32, 64, 98],
                                "schedule": {"policy": "adaptive", "growth": 2.0, "margin_ms": 40.0}}
    assert all(numerical[f"graph_sqnr_db.vocoder_w{w}"] > 100 for w in speech["stream"]["windows"])
    assert speech["samples_per_frame"] == 1920 and speech["sample_rate"] == 24000 and speech["tail_samples"] > 0
    assert cli("verify", str(component)).returncode == 0
    (component / "vocoder_w98.onnx").write_bytes((component / "vocoder_w98.onnx").read_bytes() + b"\0")
    assert cli("verify", str(component)).returncode != 0


def test_bad_speech_exports_are_clear_errors(tiny_checkpoint: Path, tts_checkpoint: Path, tmp_path: Path) -> None:
    text_model = cli("export", "tts", "--checkpoint", str(tiny_checkpoint), "--out", str(tmp_path / "a"))
    assert text_model.returncode == 2 and "not a qwen3_tts checkpoint directory" in text_model.stderr
    zero = cli("export", "tts", "--checkpoint", str(tts_checkpoint), "--out", str(tmp_path / "b"), "--chunk", "0")
    assert zero.returncode == 2 and "at least 1" in zero.stderr
    small = cli("export", "tts", "--checkpoint", str(tts_checkpoint), "--out", str(tmp_path / "c"), "--buckets", "8")
    assert small.returncode == 2 and "prefill chunk" in small.stderr
    for r in (text_model, zero, small):
        assert "Traceback" not in r.stderr
