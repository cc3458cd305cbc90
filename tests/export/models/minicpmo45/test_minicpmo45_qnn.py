"""`omni-edge export omni --target qnn-htp` on a MiniCPM-o 4.5 checkpoint (the vLLM-Omni fixture
with token2wav's files at the tiny preset): the encoders, the thinker (w8a16, calibrated on media
prompts too), the talker and token2wav's steady windows compiled for the X Elite's HTP and checked
on the HTP emulator, and the omni plan that runs them there, placements declared."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from omni_edge.cli import main
from paths import DATA

CHECKPOINT = DATA / "minicpmo45" / "checkpoint"
COMPONENTS = ("vision-qnn-x-elite-fp16", "audio-qnn-x-elite-fp16", "thinker-qnn-x-elite-w8a16", "talker-qnn-x-elite-fp16",
              "token2wav-qnn-x-elite-fp16")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_edge.export.models.minicpmo45.checkpoint import TOKEN2WAV
    from omni_edge.export.models.minicpmo45.token2wav_files import write_token2wav

    path = tmp_path_factory.mktemp("minicpmo45-qnn") / "checkpoint"
    shutil.copytree(CHECKPOINT, path)
    write_token2wav(path, *TOKEN2WAV["tiny"], seed=5)
    return path


@pytest.fixture(scope="module")
def exported(checkpoint: Path) -> tuple[Path, list[Path]]:
    from omni_edge.export.options import LlmExportOptions
    from omni_edge.export.registry import export_checkpoint

    out = checkpoint.parent / "art"
    opts = LlmExportOptions(target="qnn-htp", precision="w8a16", socs=("x-elite",), buckets=(512,), prefill_chunk=32,
                            threads=2)
    return out, export_checkpoint(checkpoint, out, opts)


def _checks(component: Path, report: str) -> dict[str, Any]:
    data = json.loads((component / "reports" / f"{report}.json").read_text())
    return {c["name"]: c["observed"] for c in data["checks"]}


def test_every_stage_compiles_for_the_htp_and_passes_its_checks(exported: tuple[Path, list[Path]]) -> None:
    out, plans = exported
    assert [p.name for p in plans] == ["plan.omni-qnn-x-elite-w8a16.json", "plan.talker-qnn-x-elite-fp16.json",
                                       "plan.qnn-x-elite-w8a16.json"]
    assert json.loads((out / "plan.json").read_text()) == json.loads(plans[0].read_text())
    for name in COMPONENTS:
        artifact = json.loads((out / name / "manifest.json").read_text())["metadata"]["artifact"]
        assert artifact["numerical_validation"]["passed"] and artifact["task_validation"]["passed"], name
        assert artifact["target_abi"] == "qnn-htp-v73" and artifact["runtime"] == "onnxruntime-qnn", name
    talker = _checks(out / "talker-qnn-x-elite-fp16", "task")
    assert talker["forced_code_agreement"] >= 0.9  # measured 1.0
    # Calibrated on text alone, the w8a16 thinker lost the request's first token; with the media
    # prompts it repeats the CPU plan's 16 ids.
    assert talker["omni_text_agreement"] == 1.0
    assert talker["omni_pcm_rms"] > 1e-3
    for kind in ("vision", "audio"):
        assert min(_checks(out / f"{kind}-qnn-x-elite-fp16", "numerical").values()) >= 35  # measured 44-56 dB
    token2wav = _checks(out / "token2wav-qnn-x-elite-fp16", "task")
    assert token2wav["steady_graph_runs"] == 55  # every whole window of the check's utterance: 5 x 11
    assert token2wav["steady_pcm_sqnr_db"] >= 20


def test_the_omni_plan_places_each_graph_where_it_was_compiled(exported: tuple[Path, list[Path]]) -> None:
    """The session's own placements: the encoders, the thinker, the talker's LM and token2wav's
    steady graphs on the NPU; the talker's two prefill-row graphs and token2wav's four dynamic
    graphs on the CPU, declared so in the plan."""
    from omni_edge.runtime import OmniSession

    out, plans = exported
    session = OmniSession.open(plans[0], threads=1)
    where = {str(p["graph"]): str(p["device"]) for p in session.placements()}
    assert sorted(g for g, d in where.items() if d == "cpu") == [
        "talker_condition", "talker_text_embed", "token2wav_encoder", "token2wav_encoder_last", "token2wav_estimator",
        "token2wav_hift"]
    assert {"image_encoder_32x32", "audio_encoder_3000", "decode_s512", "lm_head", "talker_decode_s512",
            "talker_lm_head", *(f"token2wav_{g}_steady_f{f}" for g in ("encoder", "estimator") for f in (100, 150, 200))} <= {
        g for g, d in where.items() if d == "npu"}
    assert len(where) == 25
    facts = json.loads((out / "talker-qnn-x-elite-fp16" / "manifest.json").read_text())["metadata"]["talker"]
    assert facts["row_graphs_on_cpu"] == ["condition", "text_embed"]


def test_an_soc_without_fp16_is_refused_before_any_work(checkpoint: Path, tmp_path: Path,
                                                          capfd: pytest.CaptureFixture[str]) -> None:
    code = main(["export", "omni", "--checkpoint", str(checkpoint), "--out", str(tmp_path / "out"), "--target", "qnn-htp",
                 "--soc", "qcs6490"])
    assert code == 2
    assert "fp16 cannot run on qcs6490" in capfd.readouterr().err
    assert not list((tmp_path / "out").glob("*-onnx"))


def test_token2wav_runs_its_steady_windows_on_the_htp_as_the_graph_chain_does(exported: tuple[Path, list[Path]]) -> None:
    """Every whole window (its caches at 100, 150, then 200 frames) runs the steady graphs on the
    HTP natively: the PCM is the Python graph chain's with the same compiled graphs at those
    windows, not the CPU-only chain's."""
    import numpy as np
    from omni_edge import _native
    from omni_edge.export.comparison import sqnr_db
    from omni_edge.export.models.minicpmo45.qnn import steady_sessions
    from omni_edge.export.models.minicpmo45.token2wav_export import GraphChain
    from omni_edge.runtime import OmniSession

    out, plans = exported
    session = OmniSession.open(plans[0], threads=1)
    got = session.run("Say something.", chat=True, max_new_tokens=16, ignore_stop_tokens=True, max_frames=110,
                      speech_sampling={"temperature": 0.0, "seed": 3})
    codes = [frame[0] for frame in session.codes()]
    assert len(codes) == 110  # four whole windows of 25 and a last one of 10
    cdir = out / "token2wav-qnn-x-elite-fp16"
    # The CPU graphs' sums as the session's: the process's ONNX Runtime pool (its first session sized it).
    threads = _native.onnxruntime_process_threads()
    chain = GraphChain(cdir, seed=3, threads=threads, steady=steady_sessions(cdir))
    expected = chain.utterance(codes)
    assert chain.steady_runs == 4 * 11  # per whole window: the encoder and ten Euler steps
    assert got.pcm.shape == expected.shape and sqnr_db(expected, got.pcm) > 100
    assert sqnr_db(GraphChain(cdir, seed=3, threads=threads).utterance(codes), got.pcm) < 60  # the CPU's graphs alone differ
    assert float(np.sqrt(np.mean(got.pcm ** 2))) > 1e-3


@pytest.mark.parametrize(("change", "said"), [
    ("drop_estimator", "the steady_encoder and steady_estimator groups need graphs for the same cache frames"),
    ("swap", "the steady graphs '200' must take 28 codes, 50 frames, t_features and caches of 200 frames"),
    ("frames", "steady graphs '999': the key is the frames their caches hold, from 100 to 200"),
])
def test_steady_graphs_that_do_not_fit_the_stage_are_refused_by_name(exported: tuple[Path, list[Path]], change: str,
                                                                     said: str) -> None:
    from omni_edge.runtime import OmniSession

    out, plans = exported
    plan = json.loads(plans[0].read_text())
    graphs = plan["stages"][-1]["graphs"]
    if change == "drop_estimator":
        del graphs["steady_estimator"]
    elif change == "swap":
        graphs["steady_encoder"]["graphs"]["200"] = graphs["steady_estimator"]["graphs"]["200"]
    else:
        for group in ("steady_encoder", "steady_estimator"):
            graphs[group]["graphs"]["999"] = graphs[group]["graphs"].pop("200")
    path = out / f"plan.broken-{change}.json"
    path.write_text(json.dumps(plan))
    with pytest.raises(Exception, match=said):
        OmniSession.open(path, threads=1)
