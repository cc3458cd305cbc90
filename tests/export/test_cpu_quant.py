"""int8 / int4 weights on the CPU routes (ONNX Runtime `MatMulNBits`, ExecuTorch XNNPACK with
int8 dynamic activations).

The block layout is checked against ONNX Runtime's own kernel (a swapped nibble order or a wrong
scale would not survive the comparison); a checkpoint the project never made is exported at
int8 and int4 in both formats, validated against transformers through the native engine,
verified and run; and
a decode step's traffic between the controller and the backend is counted and does not grow
with the context."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from llm_reference import cli
from omni_edge.export.decoder.export import CPU_LIMITS
from omni_edge.export.targets.cpu_quant import dequantize_blocks, quantize_blocks, quantize_graph
from onnx import TensorProto, helper, numpy_helper


def _sqnr_db(reference: np.ndarray, got: np.ndarray) -> float:
    return float(10 * np.log10(np.sum(reference.astype(np.float64) ** 2) / np.sum((reference - got).astype(np.float64) ** 2)))


@pytest.mark.parametrize("bits", [4, 8])
def test_block_quantization_is_what_matmulnbits_multiplies(tmp_path: Path, bits: int) -> None:
    rng = np.random.default_rng(bits)
    k, n = 128, 48
    weight = rng.standard_normal((k, n)).astype(np.float32)
    x = rng.standard_normal((1, 3, k)).astype(np.float32)
    packed, scales = quantize_blocks(weight, bits, 32)
    assert packed.shape == (n, k // 32, 32 * bits // 8) and packed.dtype == np.uint8 and scales.shape == (n, k // 32)
    grid = dequantize_blocks(packed, scales, bits, 32)
    again = dequantize_blocks(*quantize_blocks(grid, bits, 32), bits, 32)
    np.testing.assert_array_equal(again, grid)  # weights on the grid survive a second pass exactly

    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, n])],
                              [numpy_helper.from_array(weight, "w")])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    assert quantize_graph(path, bits, 32) == 1
    assert [node.op_type for node in onnx.load(str(path)).graph.node] == ["MatMulNBits"]
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    # ONNX Runtime multiplies by exactly the dequantized grid (up to its int8 activations).
    assert _sqnr_db(x @ grid, got) > 40
    swapped = grid.reshape(k // 2, 2, n)[:, ::-1].reshape(k, n) if bits == 4 else grid[::-1]
    assert _sqnr_db(x @ swapped, got) < 10
    assert _sqnr_db(x @ weight, got) > (18 if bits == 4 else 38)


@pytest.fixture(scope="module", params=["int8", "int4"])
def quantized(request: pytest.FixtureRequest, unseen: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    precision = str(request.param)
    out = tmp_path_factory.mktemp("cpu-quant") / precision
    done = cli("export", "llm", "--checkpoint", str(unseen), "--out", str(out), "--precision", precision,
               "--format", "both", "--buckets", "128", "--prefill-chunk", "16")  # one bucket: the cache is the float route's
    assert done.returncode == 0, done.stderr[-3000:]
    return precision, out


def _checks(report: Path) -> dict[str, float]:
    return {c["name"]: c["observed"] for c in json.loads(report.read_text())["checks"]}


@pytest.mark.parametrize("fmt", ["onnx", "pte"])
def test_quantized_weights_qualify_on_an_unseen_checkpoint(quantized: tuple[str, Path], fmt: str) -> None:
    precision, out = quantized
    component = out / f"thinker-{fmt}-{precision}"
    done = cli("verify", str(component))
    assert done.returncode == 0 and "qualified" in done.stdout and "NOT" not in done.stdout, done.stdout
    numerical, task = _checks(component / "reports" / "numerical.json"), _checks(component / "reports" / "task.json")
    limits = CPU_LIMITS[precision]
    assert numerical["logit_sqnr_db"] >= limits["logit_sqnr_db"] and task["greedy_agreement_64"] >= limits["greedy_agreement_64"]
    if precision == "int8":
        assert task["greedy_agreement_64"] >= 0.9 and numerical["logit_sqnr_db"] >= 30
    elif fmt == "onnx":
        # 96 wide, each weight column holds three blocks of 32: measured 0.875 here (0.83-0.91 over
        # round-to-nearest, GPTQ, asymmetric blocks and blocks of 16); the bound leaves room for
        # another CPU's training of the checkpoint. (A 192-wide twin kept 0.90-0.97, but its
        # training alone cost CI 5 minutes.)
        assert task["greedy_agreement_64"] >= 0.80
    manifest = json.loads((component / "manifest.json").read_text())
    q = manifest["metadata"]["llm"]["quantization"]
    assert q["bits"] == {"int8": 8, "int4": 4}[precision]
    assert manifest["metadata"]["artifact"]["precision"] == f"{precision}-b32"
    done = cli("run", "--plan", str(out / f"plan.{fmt}-{precision}.json"), "--prompt", "def main", "--max-new-tokens", "8",
               "--json")
    assert done.returncode == 0 and json.loads(done.stdout.splitlines()[-1])["n_generated_tokens"] >= 1, done.stderr[-2000:]
    if fmt == "pte":  # XNNPACK: int8 dynamic activations; 4-bit weights in groups, 8-bit per output channel
        assert q["op"].startswith("torchao Int8DynamicActivationIntxWeight")
        assert q["block_size"] == (32 if precision == "int4" else "per output channel")
        return
    assert (q["op"], q["block_size"]) == ("com.microsoft.MatMulNBits", 32)
    # Every projection of the body and the LM head reads blocks; only the embedding gathers floats,
    # and the body attends in the fused kernel (no float MatMul left anywhere).
    for name in ("decode_s128.onnx", "lm_head.onnx"):
        ops = [node.op_type for node in onnx.load(str(component / name), load_external_data=False).graph.node]
        assert "MatMulNBits" in ops and "MatMul" not in ops, ops
        assert ("GroupQueryAttention" in ops) == name.startswith("decode"), ops
    index = json.loads((component / "weights.json").read_text())
    assert {t["dtype"] for t in index["tensors"]} >= {"uint8"}


def _done(plan: Path, prompt: list[int], n: int) -> dict:
    done = cli("run", "--plan", str(plan), "--prompt-ids", ",".join(map(str, prompt)), "--max-new-tokens", str(n),
               "--ignore-stop-tokens", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    event: dict = json.loads(done.stdout.splitlines()[-1])
    assert event["kind"] == "done"
    return event


@pytest.mark.parametrize("quantized", ["int8"], indirect=True)  # the traffic does not depend on the weights
def test_a_decode_step_moves_the_same_bytes_at_any_context_length(quantized: tuple[str, Path]) -> None:
    _, out = quantized
    plan = out / "plan.onnx-int8.json"
    short, long = _done(plan, [5, 6, 7], 4), _done(plan, list(range(10, 110)), 4)
    assert short["context_tokens"] < 10 < 100 < long["context_tokens"] <= 128  # both in the (only) 128 bucket
    assert short["bytes_per_decode_step"] == long["bytes_per_decode_step"]
    # The CPU EP reads the bound buffers in place and its fused attention rotates q and k at their
    # slots and writes the new keys/values into the bound cache itself; the controller writes the
    # token and the two int32 lengths, and copies the hidden state (96 floats).
    assert long["bytes_per_decode_step"] == {"backend": 0, "controller": 8 + 4 + 4 + 96 * 4}


def test_cpu_precisions_refuse_what_they_cannot_build(unseen: Path, tmp_path: Path) -> None:
    for flags, reason in ((["--precision", "w8a16"], "--target cpu takes"),
                          (["--precision", "int4", "--block-size", "24"], "power of two"),
                          (["--precision", "int8", "--target", "qnn-htp"], "int8")):
        done = cli("export", "llm", "--checkpoint", str(unseen), "--out", str(tmp_path / "x"), *flags)
        assert done.returncode == 2 and reason in done.stderr, (flags, done.stderr[-500:])
        assert not (tmp_path / "x" / "plan.json").exists()


def test_speech_talker_and_predictor_take_the_same_cpu_precisions(tts_checkpoint: Path, tmp_path: Path) -> None:
    """`export tts --precision int4`: the talker's and code predictor's projections read blocks, the
    embeddings and vocoder stay float32, the reports hold the teacher-forced agreements, and the
    native chain speaks it; ExecuTorch is refused by name before any work."""
    out = tmp_path / "speech"
    common = ["export", "tts", "--checkpoint", str(tts_checkpoint), "--out", str(out), "--buckets", "256",
              "--prefill-chunk", "16", "--validation-frames", "8", "--precision", "int4"]
    refused = cli(*common, "--format", "pte")
    assert refused.returncode == 2 and "ONNX Runtime only" in refused.stderr and not out.exists()
    done = cli(*common)
    assert done.returncode == 0, done.stderr[-3000:]
    component = out / "speech-onnx-int4"
    verified = cli("verify", str(component))
    assert verified.returncode == 0 and "qualified" in verified.stdout and "NOT" not in verified.stdout, verified.stdout
    task = _checks(component / "reports" / "task.json")
    assert task["forced_codebook0_agreement"] >= 0.5 and task["forced_predictor_agreement"] >= 0.5, task
    manifest = json.loads((component / "manifest.json").read_text())
    assert manifest["metadata"]["artifact"]["precision"] == "int4-b32"
    assert manifest["metadata"]["speech"]["quantization"]["bits"] == 4
    for name, blocks in (("talker_decode_s256.onnx", True), ("predictor_head.onnx", True),
                         ("talker_embed_n1.onnx", False), ("vocoder_w4.onnx", False)):
        path = component / name
        if not path.exists():
            continue
        ops = {node.op_type for node in onnx.load(str(path), load_external_data=False).graph.node}
        assert ("MatMulNBits" in ops) == blocks, (name, ops)
    wav = tmp_path / "a.wav"
    spoke = cli("speak", "--plan", str(out / "plan.onnx-int4.json"), "--text", "hello there", "--out", str(wav),
                "--max-frames", "12", "--json")
    assert spoke.returncode == 0 and json.loads(spoke.stdout.splitlines()[-1])["samples"] > 0, spoke.stderr[-2000:]
