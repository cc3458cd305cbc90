"""Regression tests of the adversarial sweep (issue 16): what a hostile fixture, artifact, signal
or careless flag once did, and what it does now."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llm_reference import CLI, cli
from omni_edge.contracts import ContractError
from omni_edge.harness.conformance import FixtureError, build_artifact, load_fixture
from omni_edge.runtime import implementations

CLI_NATIVE = CLI.parent / "omni-edge-run"


@pytest.mark.parametrize("case", [
    {"name": "w", "files": {"/tmp/omni-edge-escape.txt": "x"}},
    {"name": "w", "files": {"../../omni-edge-escape.txt": "x"}},
    {"name": "d", "after": [{"delete": "../victim.txt"}]},
    {"name": "d", "after": [{"delete": "/tmp/omni-edge-victim.txt"}]},
    {"name": "r", "reports": {"../escape.json": {}}},
    {"name": "s", "after": [{"symlink": "link"}, {"write": {"link": "through the link"}}]},
])
def test_a_fixture_cannot_touch_files_outside_its_case(tmp_path: Path, case: dict) -> None:
    victim, outside = tmp_path / "victim.txt", tmp_path / "outside.bin"
    victim.write_text("kept")
    with pytest.raises(FixtureError, match="case directory"):
        build_artifact(tmp_path / "artifact", case)
    assert victim.read_text() == "kept"
    assert not Path("/tmp/omni-edge-escape.txt").exists() and not (tmp_path.parent / "omni-edge-escape.txt").exists()
    assert not outside.exists() or outside.read_text() == "outside"


def test_the_conformance_cli_reports_a_hostile_fixture_and_writes_nothing(tmp_path: Path) -> None:
    fixture = tmp_path / "hostile.json"
    fixture.write_text(json.dumps({"contract_fixture_version": 2, "manifest_cases": [
        {"name": "w", "files": {str(tmp_path / "written.txt"): "x"}},
        {"name": "d", "after": [{"delete": str(tmp_path / "hostile.json")}]}]}))
    done = cli("conformance", str(fixture), "--impl", "both")
    assert done.returncode != 0 and "case directory" in done.stdout + done.stderr
    assert fixture.exists() and not (tmp_path / "written.txt").exists()


def test_deep_and_invalid_json_is_refused_alike(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(FixtureError, match="nesting deeper than 128"):
        load_fixture(deep)
    for impl in ("python", "native"):  # the native rule: a lone surrogate is not UTF-8
        with pytest.raises(ContractError) as err:
            implementations.get(impl).decode("buffer", {"object_id": "\ud800", "owner": "w", "generation": "g",
                                                        "dtype": "int8", "shape": [1], "nbytes": 1})
        assert err.value.code == "invalid_json", (impl, err.value)


def _copy(artifact: Path, tmp_path: Path) -> Path:
    import shutil

    out = tmp_path / "artifact"
    shutil.copytree(artifact, out)
    return out


def _rehash(component: Path, drop: str = "") -> None:
    """Re-hash the component's files into its manifest, leaving `drop` out of it."""
    from omni_edge.contracts.manifest import sha256_file

    manifest = json.loads((component / "manifest.json").read_text())
    manifest["files"] = {n: sha256_file(component / n) for n in manifest["files"] if n != drop and (component / n).exists()}
    (component / "manifest.json").write_text(json.dumps(manifest))


def test_only_files_the_manifest_hashes_are_loaded(tiny_artifact: Path, tmp_path: Path) -> None:
    artifact = _copy(tiny_artifact, tmp_path)
    component = artifact / "thinker-onnx"
    _rehash(component, drop="weights.bin")  # then anyone may change it unseen
    data = bytearray((component / "weights.bin").read_bytes())
    data[100] ^= 0xFF
    (component / "weights.bin").write_bytes(bytes(data))
    verify = cli("verify", str(component))
    assert verify.returncode != 0 and "not in the manifest: weights.bin" in verify.stdout, verify.stdout
    run = [str(CLI.parent / "omni-edge-run"), "--plan", str(artifact / "plan.onnx.json"), "--prompt", "hi",
           "--max-new-tokens", "2"]
    refused = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and "files not in its manifest (weights.bin)" in refused.stderr, refused.stderr
    forced = subprocess.run([*run, "--allow-unqualified"], capture_output=True, text=True, timeout=120)
    assert forced.returncode == 1 and "not hashed in its artifact's manifest" in forced.stderr, forced.stderr
    # A weights index that names a file outside the component is refused even when hashed.
    index = json.loads((component / "weights.json").read_text())
    index["file"] = "../thinker-pte/model.pte"
    (component / "weights.json").write_text(json.dumps(index))
    (component / "weights.bin").unlink()
    _rehash(component)
    outside = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert outside.returncode == 1 and "is not beside the index" in outside.stderr, outside.stderr


def test_verify_takes_what_export_wrote(tiny_artifact: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The export directory (every component and plan), a plan, a component; a changed byte fails
    the plans that name its component only; a plan naming a directory that is no component is refused."""
    from omni_edge.cli import main

    artifact = _copy(tiny_artifact, tmp_path)
    assert main(["verify", str(artifact)]) == 0
    out = capsys.readouterr().out
    assert out.count("re-checked: qualified (thinker-") == 4 and "NOT" not in out, out  # 2 components x 2 impls
    assert f"{artifact / 'plan.pte.json'}: every component qualified (thinker-pte)" in out
    assert main(["verify", str(artifact / "plan.onnx.json")]) == 0
    assert "thinker-pte" not in capsys.readouterr().out
    pte = artifact / "thinker-pte" / "model.pte"
    data = bytearray(pte.read_bytes())
    data[len(data) // 2] ^= 0x01
    pte.write_bytes(bytes(data))
    assert main(["verify", str(artifact)]) == 1
    out = capsys.readouterr().out
    assert "REFUSED hash_mismatch" in out and f"{artifact / 'plan.pte.json'}: NOT qualified: thinker-pte" in out
    assert f"{artifact / 'plan.onnx.json'}: every component qualified" in out, out
    # A plan names components where the controller finds them (an omni plan: beside other plans);
    # a directory without a manifest is not one.
    elsewhere = tmp_path / "omni" / "plan.json"
    elsewhere.parent.mkdir()
    elsewhere.write_text(json.dumps({"stages": [{"artifact": "../artifact/thinker-onnx"}]}))
    assert main(["verify", str(elsewhere)]) == 0
    assert f"{elsewhere}: every component qualified (thinker-onnx)" in capsys.readouterr().out
    escape = artifact / "plan.escape.json"
    escape.write_text(json.dumps({"stages": [{"artifact": "../" + tmp_path.name}]}))
    assert main(["verify", str(escape)]) == 1
    assert "is not a component (no manifest.json" in capsys.readouterr().out
    assert main(["verify", str(tmp_path / "none")]) == 1


def _run_both(python_args: list[str], native_args: list[str]) -> list[subprocess.CompletedProcess[str]]:
    return [subprocess.run([str(CLI), *python_args], capture_output=True, text=True, timeout=300),
            subprocess.run([str(CLI.parent / "omni-edge-run"), *native_args], capture_output=True, text=True, timeout=300)]


def test_a_tiny_temperature_is_greedy(tiny_artifact: Path) -> None:
    """1e-40 once overflowed logits / temperature and drew a special token every step."""
    import torch
    from omni_edge.export.models.qwen3_tts.reference import _pick
    from omni_edge.runtime.request import Sampling

    logits = torch.tensor([0.5, 3.0, 2.9, -2.0])
    assert _pick(logits, Sampling(temperature=1e-40), torch.Generator().manual_seed(0)) == 1
    plan = str(tiny_artifact / "plan.onnx.json")
    runs = [subprocess.run([str(CLI_NATIVE), "--plan", plan, "--prompt", "Hello", "--max-new-tokens", "12",
                            "--ignore-stop-tokens", "--json", "--temperature", t, "--seed", "5"],
                           capture_output=True, text=True, timeout=300) for t in ("0", "1e-40")]
    tokens = [[json.loads(line).get("token_ids") for line in r.stdout.splitlines()] for r in runs]
    assert runs[1].returncode == 0 and tokens[0] == tokens[1]


@pytest.mark.parametrize("flag, value", [("--top-k", "4294967297"), ("--temperature", "nan"), ("--seed", "-1"),
                                         ("--threads", "99999"), ("--max-new-tokens", "inf")])
def test_out_of_range_flags_name_the_flag(tiny_artifact: Path, flag: str, value: str) -> None:
    plan = str(tiny_artifact / "plan.onnx.json")
    for done in _run_both(["run", "--plan", plan, "--prompt", "hi", flag, value],
                          ["--plan", plan, "--prompt", "hi", flag, value]):
        assert done.returncode == 2 and flag in done.stderr, done.stderr


def test_more_threads_than_cores_are_capped(tiny_artifact: Path) -> None:
    plan = str(tiny_artifact / "plan.onnx.json")
    for done in _run_both(["run", "--plan", plan, "--prompt", "hi", "--max-new-tokens", "2", "--threads", "1024"],
                          ["--plan", plan, "--prompt", "hi", "--max-new-tokens", "2", "--threads", "1024"]):
        assert done.returncode == 0 and f"cores: using {os.cpu_count()}" in done.stderr, done.stderr


@pytest.mark.parametrize("content, why", [(b"ab\0cd", "NUL byte at offset 2"), (b"ab\xe7\x90", "not UTF-8"),
                                          (None, "is a directory"), (b"", "cannot read")])
def test_bad_prompt_files_are_usage_errors(tiny_artifact: Path, tmp_path: Path, content: bytes | None,
                                           why: str) -> None:
    path = tmp_path / "prompt.txt"
    if content is None:
        path.mkdir()
    elif why != "cannot read":
        path.write_bytes(content)
    plan = str(tiny_artifact / "plan.onnx.json")
    for done in _run_both(["run", "--plan", plan, "--prompt-file", str(path)],
                          ["--plan", plan, "--prompt-file", str(path)]):
        assert done.returncode == 2 and why in done.stderr and "Traceback" not in done.stderr, done.stderr


def _replan(plan: Path, tmp_path: Path, change: Any) -> Path:
    """A copy of `plan` beside its components (paths stay relative), changed by `change(json)`."""
    data = json.loads(plan.read_text())
    change(data)
    out = plan.parent / f"hardening-{tmp_path.name}.json"
    out.write_text(json.dumps(data))
    return out


def test_a_huge_sample_rate_is_refused_at_load(tts_artifact: Path, tmp_path: Path) -> None:
    def change(plan: dict[str, Any]) -> None:
        plan["stages"][1]["vocoder"]["sample_rate"] = 2 ** 40

    plan = _replan(tts_artifact, tmp_path, change)
    try:
        for done in _run_both(["speak", "--plan", str(plan), "--text", "hi", "--out", str(tmp_path / "a.wav")],
                              ["speak", "--plan", str(plan), "--text", "hi", "--out", str(tmp_path / "a.wav")]):
            assert done.returncode == 1 and "sample_rate: at most 384000 Hz" in done.stderr, done.stderr
    finally:
        plan.unlink()


def test_json_output_always_ends_with_a_terminal_event(tiny_artifact: Path, tmp_path: Path) -> None:
    """A stream limit smaller than one event once gave exit 1 and nothing on stdout."""
    def change(plan: dict[str, Any]) -> None:
        plan["stream_limits"] = {"max_events": 64, "max_bytes": 10}

    plan = _replan(tiny_artifact / "plan.onnx.json", tmp_path, change)
    try:
        for done in _run_both(["run", "--plan", str(plan), "--prompt", "hi", "--json"],
                              ["--plan", str(plan), "--prompt", "hi", "--json"]):
            last = json.loads(done.stdout.splitlines()[-1])
            assert done.returncode == 1 and last["kind"] == "error" and "max_bytes" in last["error"], done.stdout
        missing = _run_both(["run", "--plan", str(tmp_path / "none.json"), "--prompt", "hi", "--json"],
                            ["--plan", str(tmp_path / "none.json"), "--prompt", "hi", "--json"])
        for done in missing:
            assert done.returncode == 1 and json.loads(done.stdout.splitlines()[-1])["kind"] == "error", done.stdout
    finally:
        plan.unlink()


_path_parts = st.sampled_from(["a", "b.json", "..", ".", "", "/", "//", "\\\\", "\0", "~", "link", "x/../..", "é"])


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_path_parts, min_size=1, max_size=5), absolute=st.booleans())
def test_fixture_paths_stay_inside_their_case(tmp_path_factory: pytest.TempPathFactory, parts: list[str],
                                              absolute: bool) -> None:
    """Fuzzing case_path: any name either is refused or lies inside the case directory, symlinks
    followed."""
    from omni_edge.harness.conformance import case_path

    case = tmp_path_factory.mktemp("case")
    (case / "link").symlink_to(case.parent)  # a link out of the case
    name = ("/" if absolute else "") + "/".join(parts)
    try:
        path = case_path(case, name)
    except FixtureError:
        return
    assert path.resolve().is_relative_to(case.resolve()), name


def test_outputs_appear_whole_or_not_at_all(tmp_path: Path) -> None:
    from omni_edge.files import atomic_output, write_text_atomic

    target = tmp_path / "report.json"
    write_text_atomic(target, "good")
    with pytest.raises(RuntimeError), atomic_output(target) as part:
        part.write_text("half of a new rep")
        raise RuntimeError("killed mid-write")
    assert target.read_text() == "good" and [p.name for p in tmp_path.iterdir()] == ["report.json"]
    write_text_atomic(target, "better")
    assert target.read_text() == "better" and oct(target.stat().st_mode & 0o777) == "0o644"
