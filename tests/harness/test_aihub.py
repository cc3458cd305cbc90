"""Qualcomm AI Hub requests, built offline: what `omni-edge aihub` would submit for a QNN
component, the refusals before anything is sent, and the message when no API token exists.
(Submitting needs the AI Hub service and a token, neither of which exists here.)"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from llm_reference import cli
from omni_edge.harness.qualification import aihub


def test_profile_requests_cover_every_context_binary(qnn_artifact: Path) -> None:
    component = qnn_artifact / "thinker-qnn-sm8750-w8a16"
    requests = aihub.build_requests("profile", component, "Samsung Galaxy S25", iterations=7, stamp="T")
    assert [r.graph for r in requests] == sorted(["embed:chunk", "embed:step", "prefill:128", "prefill:256",
                                                  "decode:128", "decode:256", "lm_head:step"])
    for r in requests:
        assert r.kind == "profile" and r.device == "Samsung Galaxy S25"
        assert r.model.endswith("_qnn.bin") and Path(r.model).is_file() and Path(r.model).parent == component
        assert r.options == "--max_profiler_iterations 7"
        assert Path(r.evidence).is_relative_to(component / "evidence" / "aihub" / "T-profile-Samsung_Galaxy_S25")
        assert r.name.startswith("thinker-qnn-sm8750-w8a16:")


def test_compile_requests_upload_the_quantized_sources(qnn_artifact: Path, tmp_path: Path) -> None:
    component = qnn_artifact / "thinker-qnn-x-elite-w8a16"
    requests = aihub.build_requests("compile", component, "Snapdragon X Elite CRD", stamp="T")
    assert len(requests) == 7
    decode = next(r for r in requests if r.graph == "decode:256")
    assert decode.model == str(component / "qdq" / "decode_s256.onnx")
    assert decode.files == ("qdq/decode_s256.onnx", "qdq/decode_s256.onnx.data")
    assert "--target_runtime qnn_context_binary" in decode.options
    # The upload is an ONNX model directory: the graph with its weights beside it.
    upload = aihub._onnx_directory(Path(decode.model), tmp_path)
    assert upload.name == "decode_s256.onnx" and sorted(p.name for p in upload.iterdir()) == [
        "decode_s256.onnx", "decode_s256.onnx.data"]
    # The graph resolves its external weights from inside the upload directory alone
    # (ORT contrib ops such as SimplifiedLayerNormalization are expected: the QNN
    # converter maps them, so the plain ONNX checker is not the right judge).
    import onnx

    model = onnx.load(str(upload / "decode_s256.onnx"), load_external_data=True)
    assert sum(len(t.raw_data) for t in model.graph.initializer) > 0
    assert {n.op_type for n in model.graph.node} >= {"QuantizeLinear", "DequantizeLinear"}


def test_refusals_before_anything_is_sent(qnn_artifact: Path, tmp_path: Path) -> None:
    x_elite = qnn_artifact / "thinker-qnn-x-elite-w8a16"
    with pytest.raises(aihub.AihubError, match=r"x-elite .* Samsung Galaxy S25 is sm8750"):
        aihub.build_requests("profile", x_elite, "Samsung Galaxy S25")
    with pytest.raises(aihub.AihubError, match="unknown AI Hub device 'Pixel 9'"):
        aihub.build_requests("profile", x_elite, "Pixel 9")
    with pytest.raises(aihub.AihubError, match="--keep-qdq"):
        aihub.build_requests("compile", qnn_artifact / "thinker-qnn-sm8750-w8a16-shared", "Samsung Galaxy S25")
    changed = tmp_path / "changed"
    shutil.copytree(qnn_artifact / "thinker-qnn-sm8750-w8a16", changed)
    with (changed / "lm_head_ctx_qnn.bin").open("r+b") as f:
        f.write(b"\x00\x01")
    with pytest.raises(aihub.AihubError, match="hash"):
        aihub.build_requests("profile", changed, "Samsung Galaxy S25")


def test_without_a_token_the_cli_says_how_to_get_one(qnn_artifact: Path, tmp_path: Path) -> None:
    component = qnn_artifact / "thinker-qnn-sm8750-w8a16"
    env = {**os.environ, "QAIHUB_CLIENT_INI": str(tmp_path / "absent.ini")}
    import subprocess

    from llm_reference import CLI

    done = subprocess.run([str(CLI), "aihub", "profile", "--artifact", str(component), "--device", "Samsung Galaxy S25"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 2 and "no Qualcomm AI Hub API token" in done.stderr and "qai-hub configure" in done.stderr
    assert not (component / "evidence").exists()  # nothing was written


def test_dry_run_prints_the_requests(qnn_artifact: Path) -> None:
    done = cli("aihub", "profile", "--artifact", str(qnn_artifact / "thinker-qnn-sm8750-w8a16-shared"),
               "--device", "Samsung Galaxy S25", "--dry-run")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    # The weight-shared twin cannot run on the emulator: AI Hub is where it gets profiled.
    assert len(lines) == 7 and len({r["model"] for r in lines if r["graph"].startswith(("prefill", "decode"))}) == 1
