"""NPU route on the HTP backend of the onnxruntime-qnn wheel (the emulator on this host).

A checkpoint the project never made (its own shape, tokenizer, seed; trained briefly so that
its distributions are peaked) is exported as w8a16 context binaries for sm8750 and x-elite,
validated on the HTP against transformers, run through `omni-edge run` with every graph on the
NPU, and re-verified byte by byte. Refusals come before any work and name their reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from llm_reference import QNN_SOCS, causal_lm, cli
from numeric import assert_greedy
from omni_edge.contracts import ArtifactMetadata, ContractError, ValidationRef
from omni_edge.export.comparison import quantized_tie_gap
from omni_edge.export.decoder.qnn import QUANTIZED_LIMITS
from omni_edge.runtime import implementations
from onnx import TensorProto, helper, numpy_helper

SOCS = QNN_SOCS


def _checks(report: Path) -> dict[str, float]:
    return {c["name"]: c["observed"] for c in json.loads(report.read_text())["checks"]}


@pytest.mark.parametrize("soc", SOCS)
def test_w8a16_qualifies_on_the_htp(qnn_artifact: Path, soc: str) -> None:
    component = qnn_artifact / f"thinker-qnn-{soc}-w8a16"
    done = cli("verify", str(component))
    assert done.returncode == 0 and "qualified" in done.stdout and "NOT" not in done.stdout, done.stdout
    numerical = _checks(component / "reports" / "numerical.json")
    task = _checks(component / "reports" / "task.json")
    assert task["greedy_agreement_64"] >= 0.90 and numerical["top1_agreement"] >= 0.85
    assert {"graph_sqnr_db.decode:128", "graph_sqnr_db.decode:256", "graph_sqnr_db.prefill:128"} <= set(numerical)
    manifest = json.loads((component / "manifest.json").read_text())
    qnn = manifest["metadata"]["qnn"]
    assert qnn["htp_arch"] == {"sm8750": "v79", "x-elite": "v73"}[soc]
    assert qnn["versions"]["qnn_sdk"] and qnn["versions"]["onnxruntime_qnn"]
    kv_io = qnn["kv_cache_io"]  # the cache crosses as uint16 codes, one scale per layer for every graph
    assert kv_io["dtype"] == "uint16" and len(kv_io["layers"]) == 3
    assert all(0 < c["scale"] < 1 and 0 <= c["zero_point"] <= 65535 for layer in kv_io["layers"] for c in layer.values())
    plan = json.loads((qnn_artifact / f"plan.qnn-{soc}-w8a16.json").read_text())
    assert plan["stages"][0]["llm"]["kv"]["dtype"] == "uint16"
    assert all(g["qnn_graph"] and (component / g["context_binary"]).is_file() for g in qnn["graphs"].values())
    assert manifest["metadata"]["artifact"]["calibration_file"] == "calibration.txt"
    assert manifest["files"]["calibration.txt"]  # the calibration text is hashed with the rest


def _run_json(plan: Path, prompt: list[int], n: int, *flags: str) -> tuple[list[int], dict, list[dict]]:
    done = cli("run", "--plan", str(plan), "--prompt-ids", ",".join(map(str, prompt)), "--max-new-tokens", str(n),
                "--ignore-stop-tokens", "--json", "--info", *flags, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    events = [json.loads(line) for line in done.stdout.splitlines()]
    info, _ = json.JSONDecoder().raw_decode(done.stderr[done.stderr.index('{\n "placements"'):])
    return [t for e in events if e["kind"] == "token" for t in e["token_ids"]], events[-1], info["placements"]


def _check_w8a16_plan(plan: Path, unseen: Path, *flags: str) -> None:
    """The plan as shipped, against transformers: teacher-forced along transformers' greedy path
    (logit SQNR and top-1, measured here through the native engine: rule 2 of tests/numeric.py),
    then a free run of 64 tokens per greedy prompt through `omni-edge run` (rule 3), whose tie gap
    is the noise the w8a16 limit allows: every token is transformers' pick along the run's own
    path, up to that gap."""
    from omni_edge.export.decoder.validation import Engine, greedy_prompts, teacher_forced
    from tokenizers import Tokenizer

    limits = QUANTIZED_LIMITS["w8a16"]
    tokenizer = Tokenizer.from_file(str(unseen / "tokenizer.json"))
    prompts = [tokenizer.encode(p).ids for p in greedy_prompts()]
    forced = teacher_forced(causal_lm(unseen), Engine(plan, 2), prompts, 64)
    assert forced["logit_sqnr_db"] >= limits["logit_sqnr_db"], forced
    assert forced["top1_agreement"] >= limits["top1_agreement"], forced
    tie_gap = quantized_tie_gap(forced["logit_rms"], limits["logit_sqnr_db"])
    for i, prompt in enumerate(prompts):
        got, done, placements = _run_json(plan, prompt, 64, *flags)
        assert done["kind"] == "done" and len(got) == 64
        assert {p["graph"] for p in placements} == {"embed_chunk", "embed_step", "prefill_s128", "prefill_s256",
                                                    "decode_s128", "decode_s256", "lm_head"}
        assert all(p["device"] == "npu" and p["engine"] == "QNNExecutionProvider" and p["nodes_elsewhere"] == 0
                   for p in placements)
        assert_greedy(got, unseen, prompt, f"greedy prompt {i}", tie_gap=tie_gap)


# Not rerun on torch's baseline kernels (host_numerics): the checkpoint is retrained there and
# exported for the emulator again, ~8 minutes on an AVX2 host for what the main run already checks
# on this CPU.
# The x-elite plan is validated by its export (test_w8a16_qualifies_on_the_htp); the free run on
# the X Elite's v73 is the hybrid's (tests/export/models/qwen3_5): one free run per HTP version.
def test_run_on_the_htp_with_every_graph_on_the_npu(qnn_artifact: Path, unseen: Path) -> None:
    _check_w8a16_plan(qnn_artifact / "plan.qnn-sm8750-w8a16.json", unseen)


def test_a_decode_step_on_the_npu_moves_the_same_bytes_at_any_context_length(qnn_artifact: Path) -> None:
    """The KV cache crosses as uint16 codes; on the emulator the bound host buffers are QNN
    client buffers, copied every run (HTP shared memory needs a device), and --info says so."""
    plan = qnn_artifact / "plan.qnn-sm8750-w8a16.json"
    _, short, placements = _run_json(plan, [5, 6, 7], 4)
    _, long, _ = _run_json(plan, list(range(10, 110)), 4)
    assert short["context_tokens"] < 10 < 100 < long["context_tokens"] <= 128  # both in the 128 bucket
    assert short["bytes_per_decode_step"] == long["bytes_per_decode_step"]
    decode = next(p for p in placements if p["graph"] == "decode_s128")
    hidden, kv = 96 * 4, 3 * 2 * (2 * 32 * 128) * 2  # 3 layers, K and V of 2 heads x 32 x 128 slots, uint16
    assert decode["bytes_in_per_run"] == hidden + 8 + (128 + 1) * 4 + kv
    assert decode["bytes_out_per_run"] == hidden + 3 * 2 * (2 * 32) * 2
    assert "client buffers" in decode["buffers"]
    # The controller writes the token, its position, one mask entry, the new uint16 keys/values
    # (read and written once) and copies the hidden state.
    assert long["bytes_per_decode_step"]["controller"] == 8 + 8 + 4 + 2 * 3 * 2 * 32 * 2 * 2 + hidden


def test_a_plan_with_one_wrong_weight_scale_fails_that_check(qnn_artifact: Path, unseen: Path, tmp_path: Path) -> None:
    """The negative control of the test above: one MLP down-projection's weight scales 1.25x too
    large (recompiled from the kept QDQ graphs, in prefill and decode) fail it (measured: logit
    SQNR 21 dB, against 32 dB for the plan as exported)."""
    from omni_edge.export.targets import qnn_target

    artifact = tmp_path / "artifact"
    shutil.copytree(qnn_artifact, artifact, ignore=shutil.ignore_patterns("*-shared", "*x-elite*"))
    component = artifact / "thinker-qnn-sm8750-w8a16"
    soc, precision = qnn_target.check_target("sm8750", "w8a16")
    for graph in ("prefill_s128", "decode_s128"):
        model = onnx.load(str(component / "qdq" / f"{graph}.onnx"))
        weights = {t.name: t for t in model.graph.initializer}
        scale = next(n.input[1] for n in model.graph.node if n.op_type == "DequantizeLinear"
                     and n.input[0] in weights and list(weights[n.input[0]].dims) == [256, 96])
        weights[scale].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(weights[scale]) * 1.25, scale))
        source = tmp_path / f"{graph}.onnx"
        onnx.save(model, str(source), save_as_external_data=True, location=f"{graph}.onnx.data")
        for old in component.glob(f"{graph}_ctx*"):
            old.unlink()
        qnn_target.compile_context(source, component, soc, precision)
    _rewrite_manifest(component)
    with pytest.raises(AssertionError, match="logit_sqnr_db"):
        _check_w8a16_plan(artifact / "plan.qnn-sm8750-w8a16.json", unseen, "--allow-unqualified")


def test_verify_catches_a_flipped_byte_in_every_file(qnn_artifact: Path, tmp_path: Path) -> None:
    source = qnn_artifact / "thinker-qnn-sm8750-w8a16"
    files = sorted(p.relative_to(source) for p in source.rglob("*") if p.is_file())
    assert len(files) >= 15
    for impl in ("python", "native"):
        for rel in files:
            copy = tmp_path / f"{impl}-{rel.name}"
            shutil.copytree(source, copy)
            data = bytearray((copy / rel).read_bytes())
            # The manifest is the root of trust: its hashes are what a flip must not slip past
            # (free text in its metadata carries no hash of its own).
            where = len(data) // 2 if rel.name != "manifest.json" else data.index(b'"config.json": "') + 30
            data[where] ^= 0x01
            (copy / rel).write_bytes(bytes(data))
            with pytest.raises(ContractError):
                implementations.get(impl).read_manifest(copy)
            shutil.rmtree(copy)
    copy = tmp_path / "cli"
    shutil.copytree(source, copy)
    with (copy / "decode_s128_ctx_qnn.bin").open("r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0x80]))
    done = cli("verify", str(copy))
    assert done.returncode != 0 and "REFUSED" in done.stdout


def test_shared_weights_twin_stores_prefill_and_decode_weights_once(qnn_artifact: Path) -> None:
    from omni_edge.export.targets.qnn_target import context_binaries

    shared = qnn_artifact / "thinker-qnn-sm8750-w8a16-shared"
    single = qnn_artifact / "thinker-qnn-sm8750-w8a16"
    roles = [p.name for p in shared.glob("*_ctx.onnx") if p.name.startswith(("prefill", "decode"))]
    assert len(roles) == 4
    binaries = {b for r in roles for b in context_binaries(shared / r)}
    assert len(binaries) == 1  # one context holds all four graphs
    shared_bytes = (shared / binaries.pop()).stat().st_size
    single_bytes = sum((single / b).stat().st_size for r in roles for b in context_binaries(single / r))
    assert shared_bytes < 0.6 * single_bytes
    manifest = json.loads((shared / "manifest.json").read_text())
    assert "not_validated_because" in manifest["metadata"]["qnn"]["weight_sharing"]
    assert cli("verify", str(shared)).returncode != 0  # hashes hold, but it does not claim qualification
    plan = json.loads((qnn_artifact / "plan.qnn-sm8750-w8a16-shared.json").read_text())
    assert plan["stages"][0]["graphs"]["decode"]["options"] == {"ort.ep.share_ep_contexts": "1"}


def _unsupported_lm_head(path: Path, hidden: int, vocab: int) -> None:
    """logits = hidden @ W, plus 0 * a count from NonZero (an op the HTP cannot run)."""
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((hidden, vocab)).astype(np.float32), "W")
    consts = [numpy_helper.from_array(np.array([1, hidden], np.int64), "flat"),
              numpy_helper.from_array(np.array([1, 1, vocab], np.int64), "out_shape"),
              numpy_helper.from_array(np.array(0.0, np.float32), "zero")]
    nodes = [helper.make_node("Reshape", ["hidden", "flat"], ["h"]), helper.make_node("MatMul", ["h", "W"], ["m"]),
             helper.make_node("NonZero", ["m"], ["nz"]), helper.make_node("Shape", ["nz"], ["nz_shape"]),
             helper.make_node("ReduceSum", ["nz_shape"], ["count"], keepdims=0),
             helper.make_node("Cast", ["count"], ["count_f"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["count_f", "zero"], ["nothing"]), helper.make_node("Add", ["m", "nothing"], ["m2"]),
             helper.make_node("Reshape", ["m2", "out_shape"], ["logits"])]
    graph = helper.make_graph(nodes, "lm_head", [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [1, 1, hidden])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1, vocab])], [w, *consts])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), str(path))


def _rewrite_manifest(component: Path) -> None:
    """Re-hash a component whose files a test changed, keeping its metadata and reports."""
    from omni_edge.artifacts import write_manifest

    old = json.loads((component / "manifest.json").read_text())
    art = old["metadata"].pop("artifact")
    write_manifest(component, old["component"], ArtifactMetadata(
        **{k: art[k] for k in ("checkpoint_id", "checkpoint_revision", "precision", "runtime", "runtime_version",
                               "target_abi", "adapter_version", "exporter_version", "compiler_version", "shape_bucket",
                               "state_layout_version", "calibration_file")},
        numerical_validation=ValidationRef(**art["numerical_validation"]),
        task_validation=ValidationRef(**art["task_validation"])), extra_metadata=old["metadata"])


def test_a_graph_the_htp_cannot_run_is_refused_naming_the_op(qnn_artifact: Path, tmp_path: Path) -> None:
    artifact = tmp_path / "artifact"
    shutil.copytree(qnn_artifact, artifact, ignore=shutil.ignore_patterns("*-shared", "*x-elite*"))
    component = artifact / "thinker-qnn-sm8750-w8a16"
    _unsupported_lm_head(component / "lm_head_unsupported.onnx", 96, 1000)
    _rewrite_manifest(component)
    plan = json.loads((artifact / "plan.qnn-sm8750-w8a16.json").read_text())
    plan["stages"][0]["graphs"]["lm_head"]["graphs"]["step"] = "lm_head_unsupported.onnx"
    (artifact / "plan.bad.json").write_text(json.dumps(plan))
    done = cli("run", "--plan", str(artifact / "plan.bad.json"), "--prompt", "hello", "--max-new-tokens", "2", "--json")
    assert done.returncode != 0
    assert "placement_refused" in done.stderr and "NonZero" in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize(("args", "reason"), [
    (("--soc", "qcs6490", "--precision", "w4a16"), "HTP v68"),
    (("--soc", "qcs6490", "--precision", "fp16"), "HTP v68"),
    (("--soc", "qcs6490", "--share-weights"), "weight sharing"),
    (("--soc", "sm9999"), "unknown SoC"),
    (("--soc", "sm8750", "--kv", "ring"), "ring"),
])
def test_combinations_a_soc_cannot_run_are_refused_before_any_work(tiny_checkpoint: Path, tmp_path: Path,
                                                                   args: tuple[str, ...], reason: str) -> None:
    done = cli("export", "llm", "--checkpoint", str(tiny_checkpoint), "--out", str(tmp_path / "out"),
                "--target", "qnn-htp", *args, timeout=300)
    assert done.returncode == 2 and reason in done.stderr, done.stderr[-2000:]
    assert not (tmp_path / "out").exists()


def test_fp16_on_the_htp_qualifies(unseen: Path, tmp_path: Path) -> None:
    done = cli("export", "llm", "--checkpoint", str(unseen), "--out", str(tmp_path / "fp16"), "--target", "qnn-htp",
                "--precision", "fp16", "--soc", "sm8650", "--buckets", "128", "--prefill-chunk", "16")
    assert done.returncode == 0, done.stderr[-3000:]
    component = tmp_path / "fp16" / "thinker-qnn-sm8650-fp16"
    assert cli("verify", str(component)).returncode == 0
    assert _checks(component / "reports" / "numerical.json")["logit_sqnr_db"] >= 40.0


def test_w8a16_on_htp_v68_qualifies(unseen: Path, tmp_path: Path) -> None:
    """v68 (QCS6490) has no float units: every op of every graph must be quantized, even a
    reshape of the float mask input (a Gather there once sent the bodies to the refused CPU)."""
    done = cli("export", "llm", "--checkpoint", str(unseen), "--out", str(tmp_path / "v68"), "--target", "qnn-htp",
                "--precision", "w8a16", "--soc", "qcs6490", "--buckets", "128", "--prefill-chunk", "16")
    assert done.returncode == 0, done.stderr[-3000:]
    component = tmp_path / "v68" / "thinker-qnn-qcs6490-w8a16"
    assert json.loads((component / "manifest.json").read_text())["metadata"]["qnn"]["htp_arch"] == "v68"
    assert cli("verify", str(component)).returncode == 0
    assert _checks(component / "reports" / "numerical.json")["logit_sqnr_db"] >= 25.0


def test_a_graph_the_htp_cannot_compile_is_refused_naming_the_op(tmp_path: Path) -> None:
    from omni_edge.export.targets import qnn_target

    graph = tmp_path / "lm_head_unsupported.onnx"
    _unsupported_lm_head(graph, 96, 1000)
    soc, precision = qnn_target.check_target("sm8750", "fp16")
    with pytest.raises(ValueError, match=r"cannot run unnamed \(NonZero\), unnamed \(Shape\); CPU fallback is disabled"):
        qnn_target.compile_context(graph, tmp_path, soc, precision)
