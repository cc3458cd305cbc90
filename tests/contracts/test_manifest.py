"""Artifacts written by omni_edge.artifacts, verified by both implementations."""

from __future__ import annotations

from pathlib import Path

import pytest
from omni_edge.artifacts import write_manifest, write_report
from omni_edge.cli import main
from omni_edge.contracts import ArtifactMetadata, ContractError, ReportCheck, ValidationRef, ValidationReport
from omni_edge.runtime import implementations

IDENTITY = dict(checkpoint_id="ckpt", checkpoint_revision="r1", precision="w8a16", shape_bucket="ctx512",
                target_abi="aarch64-android")


def _artifact(directory: Path, task_observed: float = 0.97) -> None:
    (directory / "graphs").mkdir(parents=True)
    (directory / "graphs" / "decode.bin").write_bytes(bytes(range(256)) * 64)
    (directory / "calibration.txt").write_text("the quick brown fox\n")
    numerical = ValidationReport("numerical", **IDENTITY, checks=(
        ReportCheck("logit_sqnr_db", 48.5, 30.0, ">="), ReportCheck("top1_agreement", 0.99, 0.95, ">=")))
    task = ValidationReport("task", **IDENTITY, checks=(ReportCheck("greedy_agreement_64", task_observed, 0.9, ">="),))
    write_report(directory / "reports" / "numerical.json", numerical)
    write_report(directory / "reports" / "task.json", task)
    write_manifest(directory, "llm.decode", ArtifactMetadata(
        **IDENTITY, runtime="onnxruntime-qnn", runtime_version="2.7.0", adapter_version="1", exporter_version="0.1.0",
        compiler_version="qairt", state_layout_version=1, calibration_file="calibration.txt",
        numerical_validation=ValidationRef("reports/numerical.json", numerical.passed),
        task_validation=ValidationRef("reports/task.json", task.passed)),
        extra_metadata={"qnn": {"soc": "sm8750", "htp_arch": "v79"}})


def test_written_artifact_verifies_and_qualifies(tmp_path: Path, impl: implementations.Implementation) -> None:
    _artifact(tmp_path)
    verified = impl.read_manifest(tmp_path)
    assert verified.qualified
    assert set(verified.manifest.files) == {"graphs/decode.bin", "calibration.txt", "reports/numerical.json", "reports/task.json"}
    assert verified.manifest.extra_metadata["qnn"]["htp_arch"] == "v79"
    assert verified.numerical.checks[0].observed == 48.5


def test_a_failing_report_never_qualifies(tmp_path: Path, impl: implementations.Implementation) -> None:
    _artifact(tmp_path, task_observed=0.5)
    verified = impl.read_manifest(tmp_path)
    assert not verified.qualified and verified.numerical.passed and not verified.task.passed


@pytest.mark.parametrize("name", ["graphs/decode.bin", "calibration.txt", "reports/numerical.json", "reports/task.json"])
def test_a_flipped_byte_in_any_file_is_caught(tmp_path: Path, impl: implementations.Implementation, name: str) -> None:
    _artifact(tmp_path)
    path = tmp_path / name
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x20
    path.write_bytes(bytes(data))
    with pytest.raises(ContractError) as info:
        impl.read_manifest(tmp_path)
    assert info.value.code == "hash_mismatch"
    assert name in info.value.message


def test_verify_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, failing = tmp_path / "good", tmp_path / "failing"
    _artifact(good)
    _artifact(failing, task_observed=0.1)
    assert main(["verify", str(good)]) == 0
    assert "qualified" in capsys.readouterr().out
    assert main(["verify", str(failing)]) == 1
    (good / "graphs" / "decode.bin").write_bytes(b"tampered")
    assert main(["verify", str(good)]) == 1
    assert "hash_mismatch" in capsys.readouterr().out
