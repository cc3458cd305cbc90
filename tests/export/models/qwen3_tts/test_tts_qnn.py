"""The speech stages on the NPU route: fp16 and quantized (w8a16) context binaries, every talker
graph placed on the HTP (the emulator here, with CPU fallback disabled), validated through the
native chain, teacher-forced codes and per-graph SQNR."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from llm_reference import cli
from omni_edge.export.models.qwen3_tts.qnn import FP16_LIMITS, LIMITS, OMNI_GRAPH, capture_calibration, export_tts_qnn
from omni_edge.export.models.qwen3_tts.reference import SAMPLES_PER_FRAME
from omni_edge.export.models.qwen3_tts.runner import GraphRunner
from omni_edge.export.options import TtsExportOptions
from omni_edge.export.speech import StreamShape, Voice
from omni_edge.runtime import SpeechSession
from paths import DATA

# Small vocoder windows (2 and 9 frames: the fixed schedule's, the vocoder is not this file's
# subject) and few frames: the x86 emulator runs HTP code slowly.
SMALL = TtsExportOptions(prefill_chunk=16, buckets=(128,), validation_frames=8,
                         stream=StreamShape(first=1, chunk=4, left_context=4, adaptive=False))


def _on(opts: TtsExportOptions, soc: str, precision: str = "") -> TtsExportOptions:
    """The options for one SoC of the HTP (precision: the target's default, fp16)."""
    return dataclasses.replace(opts, target="qnn-htp", socs=(soc,), precision=precision)


def _graph_sqnr(got: dict[str, float]) -> dict[str, float]:
    return {k.removeprefix("graph_sqnr_db."): v for k, v in got.items() if k.startswith("graph_sqnr_db.")}


def test_fp16_talker_runs_entirely_on_the_htp(tts_checkpoint: Path, tmp_path: Path) -> None:
    [(component, got)] = export_tts_qnn(tts_checkpoint, tmp_path, _on(SMALL, "sm8650"))
    assert component.name == "speech-qnn-sm8650-fp16"
    assert got["frames"] == 8 and got["samples_match"] == 1.0
    assert got["pcm_sqnr_db"] >= FP16_LIMITS["pcm_sqnr_db"]
    assert got["forced_codebook0_agreement"] >= FP16_LIMITS["forced_codebook0_agreement"]
    assert got["forced_predictor_agreement"] >= FP16_LIMITS["forced_predictor_agreement"]
    assert min(_graph_sqnr(got).values()) >= FP16_LIMITS["graph_sqnr_db"]
    assert cli("verify", str(component)).returncode == 0  # both reports passed: qualified
    session = SpeechSession.open(tmp_path / "plan.json")  # refuses an unqualified artifact
    talker = [p for p in session.placements() if not p["graph"].startswith("vocoder")]
    vocoder = [p for p in session.placements() if p["graph"].startswith("vocoder")]
    assert {(p["device"], p["engine"], p["nodes_elsewhere"]) for p in talker} == {("npu", "QNNExecutionProvider", 0)}
    assert {(p["device"], p["engine"]) for p in vocoder} == {("cpu", "CPUExecutionProvider")}
    assert session.speak("Hi.", max_frames=2).pcm.shape[0] == 2 * SAMPLES_PER_FRAME


def test_w8a16_speech_is_calibrated_and_keeps_the_codes(tts_checkpoint: Path, tmp_path: Path) -> None:
    # qcs6490 (HTP v68): 8-bit weights with 16-bit activations run on every HTP generation.
    [(component, got)] = export_tts_qnn(tts_checkpoint, tmp_path, _on(SMALL, "qcs6490", "w8a16"))
    limits = LIMITS["w8a16"]
    sqnr = _graph_sqnr(got)
    metadata = json.loads((component / "manifest.json").read_text())["metadata"]
    # every NPU graph measured: all talker graphs but the omni one, which a quantized plan runs on the CPU
    assert set(sqnr) == {g for g in metadata["speech"]["graphs"] if not g.startswith("vocoder")} - {OMNI_GRAPH}
    assert min(sqnr.values()) >= limits["graph_sqnr_db"]
    assert got["forced_codebook0_agreement"] >= limits["forced_codebook0_agreement"]
    assert got["forced_predictor_agreement"] >= limits["forced_predictor_agreement"]
    assert got["frames"] == 8 and got["samples_match"] == 1.0 and got["pcm_sqnr_db"] >= limits["pcm_sqnr_db"]
    assert cli("verify", str(component)).returncode == 0
    artifact = metadata["artifact"]
    assert artifact["precision"] == "w8a16" and artifact["calibration_file"] == "calibration.txt"
    assert (component / "calibration.txt").is_file()
    session = SpeechSession.open(tmp_path / "plan.json")
    talker = [p for p in session.placements() if p["graph"] != "talker_embed_hidden" and not p["graph"].startswith("vocoder")]
    omni = [p for p in session.placements() if p["graph"] == "talker_embed_hidden"]
    assert {(p["device"], p["engine"], p["nodes_elsewhere"]) for p in talker} == {("npu", "QNNExecutionProvider", 0)}
    assert len(talker) == len(sqnr) == 8 and {(p["device"], p["engine"]) for p in omni} == {("cpu", "CPUExecutionProvider")}
    assert session.speak("Hi.", max_frames=2).pcm.shape[0] == 2 * SAMPLES_PER_FRAME


def test_calibration_records_every_graph_as_it_is_fed(tts_checkpoint: Path, tmp_path: Path) -> None:
    import onnx
    from omni_edge.export.models.qwen3_tts.onnx import export_graphs
    from omni_edge.export.models.qwen3_tts.reference import Qwen3Tts

    model = Qwen3Tts.from_pretrained(tts_checkpoint)
    opts = TtsExportOptions(prefill_chunk=16, buckets=(64, 128), stream=SMALL.stream)
    files = export_graphs(model, tmp_path, opts)
    samples = capture_calibration(GraphRunner(model, tmp_path, files, opts), frames=6, per_run=5)
    assert set(samples) == set(files)  # both buckets' bodies, the omni graph and both vocoder windows
    for name, file in files.items():
        inputs = onnx.load(str(tmp_path / file), load_external_data=False).graph.input
        shapes = [[d.dim_value for d in i.type.tensor_type.shape.dim] for i in inputs]
        for sample in samples[name]:
            assert [list(t.shape) for t in sample] == shapes, name
    # Bounded and spread: the predictor runs 16 times a frame, yet each of the 2 sentences of each
    # bucket keeps 5 of its runs, at different steps of the frame.
    assert len(samples["predictor_decode_s16"]) == 5 * 2 * 2
    positions = [int(s[1][0, 0]) for s in samples["predictor_decode_s16"]]
    assert len(set(positions)) > 3
    steps = {int(s[1][0, 0]) for s in samples["talker_decode_s128"]}
    assert len(steps) > 3  # the decode graph saw many positions of the cache


def test_speech_targets_are_refused_clearly(tts_checkpoint: Path, tmp_path: Path) -> None:
    small = cli("export", "tts", "--checkpoint", str(tts_checkpoint), "--out", str(tmp_path), "--target", "qnn-htp",
                "--precision", "w8a16", "--soc", "sm8650", "--buckets", "8", "--prefill-chunk", "16")
    assert small.returncode == 2 and "prefill chunk" in small.stderr and "Traceback" not in small.stderr
    for precision, soc, says in (("w4a16", "qcs6490", "cannot run on qcs6490"), ("fp16", "qcs6490", "cannot run"),
                                 ("int3", "sm8650", "unknown precision")):
        done = cli("export", "tts", "--checkpoint", str(tts_checkpoint), "--out", str(tmp_path), "--target", "qnn-htp",
                   "--precision", precision, "--soc", soc)
        assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_release_talker_runs_on_the_htp(tmp_path: Path) -> None:
    """The release's graphs (a 3072-id codebook 0 with its absent row, the projection into a
    narrower predictor) compile for the HTP and keep the codes in fp16."""
    release = DATA / "qwen3_tts_release"
    opts = dataclasses.replace(SMALL, voice=Voice("vivian", "english"))
    [(component, got)] = export_tts_qnn(release, tmp_path, _on(opts, "sm8650"))
    assert got["forced_codebook0_agreement"] >= FP16_LIMITS["forced_codebook0_agreement"]
    assert got["forced_predictor_agreement"] >= FP16_LIMITS["forced_predictor_agreement"]
    assert min(_graph_sqnr(got).values()) >= FP16_LIMITS["graph_sqnr_db"]
    assert cli("verify", str(component)).returncode == 0
    session = SpeechSession.open(tmp_path / "plan.json")
    talker = [p for p in session.placements() if not p["graph"].startswith("vocoder")]
    assert {(p["device"], p["engine"], p["nodes_elsewhere"]) for p in talker} == {("npu", "QNNExecutionProvider", 0)}
    assert session.speak("Hello.", max_frames=3).pcm.shape[0] == 3 * SAMPLES_PER_FRAME
