"""Bad plans, artifacts, prompts and environments: a clear error naming the problem, exit
code 1, never a crash; and nothing is loaded from an artifact whose hashes do not match."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from paths import RUN


def _run(plan: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [str(RUN), "--plan", str(plan), *(args or ("--prompt", "hello", "--max-new-tokens", "4"))]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})


@pytest.fixture()
def artifact(tiny_artifact: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "artifact"
    shutil.copytree(tiny_artifact, copy)
    return copy


def _edit_plan(artifact: Path, edit: Callable[[dict], None]) -> Path:
    plan = json.loads((artifact / "plan.json").read_text())
    edit(plan)
    (artifact / "plan.json").write_text(json.dumps(plan))
    return artifact / "plan.json"


def _refused(result: subprocess.CompletedProcess[str], reason: str, *words: str) -> None:
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert f": {reason}:" in result.stderr, result.stderr
    for w in words:
        assert w in result.stderr, result.stderr


def test_the_unmodified_artifact_runs(artifact: Path) -> None:
    assert _run(artifact / "plan.json").returncode == 0


@pytest.mark.parametrize(("edit", "reason", "words"), [
    (lambda p: p.update(extra=1), "invalid_field", ["plan.extra: unknown field"]),
    (lambda p: p.update(plan_version=2), "invalid_plan", ["plan_version"]),
    (lambda p: p["stages"][0].update(stage_id="0"), "invalid_field", ["plan.stages[0].stage_id", "expected an integer"]),
    (lambda p: p["stages"][0].update(final_output=False), "invalid_plan", ["no final-output stage"]),
    (lambda p: p["stages"][0].update(input_sources=[0]), "invalid_plan", ["itself"]),
    (lambda p: p["stages"][0].update(input_sources=[7]), "invalid_plan", ["does not exist"]),
    (lambda p: p["stages"].append(dict(p["stages"][0])), "invalid_plan", ["used twice"]),
    (lambda p: p["stages"][0]["graphs"].pop("decode"), "invalid_plan", ["graphs.decode"]),
    (lambda p: p["stages"][0]["graphs"]["decode"]["graphs"].pop("256"), "invalid_plan", ["256 slots"]),
    (lambda p: p["stages"][0]["graphs"]["prefill"].update(device="tpu"), "invalid_plan", ["device"]),
    (lambda p: p["stages"][0]["llm"]["kv"].update(mode="paged"), "invalid_plan", ["kv.mode"]),
    (lambda p: p["stages"][0]["llm"]["kv"].update(buckets=[256, 128]), "invalid_plan", ["ascending"]),
    (lambda p: p["stages"][0]["llm"]["kv"].update(attention="flash"), "invalid_plan", ["kv.attention", "flash"]),
    (lambda p: p["stages"][0]["llm"]["kv"].update(overflow="ring"), "invalid_plan", ["kv.attention", "position order"]),
    (lambda p: p["stages"][0]["llm"]["kv"].update(attention="masked"), "graph_mismatch", ["prefill_s128", "seqlens_k"]),
    (lambda p: p["stages"][0]["llm"].update(mask_value=0.0), "invalid_plan", ["mask_value"]),
    (lambda p: p["stages"][0]["llm"].update(stop_tokens=["<|nope|>"]), "invalid_plan", ["<|nope|>"]),
    (lambda p: p["stages"][0]["llm"].update(prefill_chunk=8), "graph_mismatch", ["embed_chunk", "[1, 16]", "[1, 8]"]),
    (lambda p: p["stages"][0]["graphs"]["prefill"].update(backend="tensorrt"), "backend_unavailable", ["tensorrt"]),
    (lambda p: p["stages"][0]["graphs"]["prefill"]["graphs"].update({"128": "missing.onnx"}), "file_missing", ["missing.onnx"]),
])
def test_malformed_plans_are_refused(artifact: Path, edit: Callable[[dict], None], reason: str, words: list[str]) -> None:
    _refused(_run(_edit_plan(artifact, edit)), reason, *words)


def test_plan_that_is_not_json(artifact: Path) -> None:
    (artifact / "plan.json").write_text('{"plan_version": 1, "stages": [')
    _refused(_run(artifact / "plan.json"), "invalid_json")
    _refused(_run(artifact / "absent.json"), "file_missing")


@pytest.mark.parametrize("victim", ["thinker-onnx/weights.bin", "thinker-onnx/decode_s128.onnx", "thinker-onnx/tokenizer.json"])
def test_hash_mismatch_is_refused_before_loading(artifact: Path, victim: str) -> None:
    path = artifact / victim
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    _refused(_run(artifact / "plan.json"), "hash_mismatch", victim.split("/")[1])


def test_missing_artifact_file(artifact: Path) -> None:
    (artifact / "thinker-onnx" / "weights.bin").unlink()
    _refused(_run(artifact / "plan.json"), "file_missing", "weights.bin")


def test_unqualified_artifacts_need_an_explicit_flag(artifact: Path) -> None:
    component = artifact / "thinker-onnx"
    report = json.loads((component / "reports" / "task.json").read_text())
    report["checks"][0]["observed"] = 0.1
    (component / "reports" / "task.json").write_text(json.dumps(report))
    manifest = json.loads((component / "manifest.json").read_text())
    manifest["metadata"]["artifact"]["task_validation"]["passed"] = False
    from omni_edge.contracts.manifest import sha256_file
    manifest["files"]["reports/task.json"] = sha256_file(component / "reports" / "task.json")
    (component / "manifest.json").write_text(json.dumps(manifest))
    _refused(_run(artifact / "plan.json"), "not_qualified", "task: FAIL")
    assert _run(artifact / "plan.json", "--prompt", "hi", "--max-new-tokens", "2", "--allow-unqualified").returncode == 0


def test_bad_prompts(artifact: Path, tmp_path: Path) -> None:
    plan = artifact / "plan.json"
    _refused(_run(plan, "--prompt-ids", ",".join(["5"] * 300)), "context_overflow", "256")
    _refused(_run(plan, "--prompt-ids", "5,99999"), "invalid_prompt", "99999")
    # Invalid UTF-8 reaches the controller through argv (surrogateescape gives the raw bytes);
    # a prompt file with it is refused before loading (tests/runtime/test_hardening.py).
    _refused(_run(plan, "--prompt", "valid then \udcff\udcfe invalid"), "invalid_prompt", "UTF-8")
    _refused(_run(plan, "--prompt", ""), "invalid_prompt", "empty")
    usage = _run(plan, "--prompt", "x", "--max-new-tokens", "lots")
    assert usage.returncode == 2 and "is not a finite number" in usage.stderr


def test_unavailable_runtime_library(artifact: Path) -> None:
    _refused(_run(artifact / "plan.json", env={"OMNI_EDGE_ONNXRUNTIME_LIB": "/nonexistent/libonnxruntime.so"}),
             "backend_unavailable", "OMNI_EDGE_ONNXRUNTIME_LIB")


def test_a_consumer_that_raises_cancels_the_request_and_loses_nothing(tiny_artifact: Path) -> None:
    from omni_edge.runtime import Session

    session = Session.open(tiny_artifact / "plan.onnx.json")
    seen: list[dict] = []

    def broken(event: dict) -> bool:
        seen.append(event)
        if len(seen) == 3:
            raise BrokenPipeError("the reader went away")
        return True

    with pytest.raises(BrokenPipeError):
        session.run("hello", on_event=broken, max_new_tokens=20, ignore_stop_tokens=True)
    assert len(seen) == 3  # nothing was delivered after the exception
    session.reset()
    again: list[int] = []
    session.run("hello", on_event=lambda e: again.extend(e.get("token_ids", [])), max_new_tokens=20, ignore_stop_tokens=True)
    fresh: list[int] = []
    Session.open(tiny_artifact / "plan.onnx.json").run("hello", on_event=lambda e: fresh.extend(e.get("token_ids", [])),
                                                       max_new_tokens=20, ignore_stop_tokens=True)
    assert again == fresh and len(fresh) == 20


def test_a_closed_pipe_ends_the_cli_quietly(tiny_artifact: Path) -> None:
    cli = RUN.parent / "omni-edge"
    reader = subprocess.Popen([str(cli), "run", "--plan", str(tiny_artifact / "plan.onnx.json"), "--prompt", "hello",
                               "--max-new-tokens", "200", "--ignore-stop-tokens", "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert reader.stdout is not None and reader.stderr is not None
    reader.stdout.readline()
    reader.stdout.close()  # like `| head -1`
    code = reader.wait(timeout=120)
    assert code == 141, reader.stderr.read()
    assert "terminate" not in reader.stderr.read()


def test_export_of_a_path_that_is_not_a_checkpoint(tmp_path: Path) -> None:
    cli = RUN.parent / "omni-edge"
    result = subprocess.run([str(cli), "export", "llm", "--checkpoint", str(tmp_path / "no" / "such"), "--out",
                             str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "not a checkpoint directory (no config.json)" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()
