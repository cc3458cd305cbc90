"""Writes artifact directories: validation reports and the hashed manifest v2 over every file."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from omni_edge.contracts.manifest import (
    MANIFEST_NAME,
    ArtifactManifest,
    ArtifactMetadata,
    ReportCheck,
    ValidationRef,
    ValidationReport,
    sha256_file,
)
from omni_edge.files import write_text_atomic

# The checkpoint files a component carries for its runtime (tokenizer, chat template, config).
CHECKPOINT_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "config.json",
                    "generation_config.json")


def new_component(directory: Path, checkpoint: Path, extra: Iterable[Path] = (),
                  required: Iterable[str] = ("tokenizer.json", "config.json")) -> Path:
    """An empty component directory (a previous one is replaced) holding the checkpoint's
    runtime files that exist (the `required` ones must), plus `extra` files."""
    missing = [name for name in required if not (checkpoint / name).is_file()]
    if missing:
        raise ValueError(f"{checkpoint}: no {', '.join(missing)}")
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    for name in CHECKPOINT_FILES:
        if (checkpoint / name).is_file():
            shutil.copy2(checkpoint / name, directory / name)
    for path in extra:
        shutil.copy2(path, directory / path.name)
    return directory


def write_report(path: Path, report: ValidationReport) -> None:
    write_text_atomic(path, json.dumps(report.to_dict(), indent=2) + "\n")


def write_manifest(directory: Path, component: str, artifact: ArtifactMetadata,
                   extra_metadata: Mapping[str, Any] | None = None) -> ArtifactManifest:
    """Hash every file under `directory` (except the manifest) and write `manifest.json`."""
    files = {
        p.relative_to(directory).as_posix(): sha256_file(p)
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != MANIFEST_NAME
    }
    manifest = ArtifactManifest(component, files, artifact, dict(extra_metadata or {}))
    # Last, and whole or not at all: an export interrupted before this leaves a directory that
    # verify refuses (no manifest; new_component removed the previous one first).
    write_text_atomic(directory / MANIFEST_NAME, json.dumps(manifest.to_dict(), indent=2) + "\n")
    return manifest


def identity_report(kind: str, identity: Mapping[str, str], checks: tuple[ReportCheck, ...]) -> ValidationReport:
    """A `kind` report ("numerical" | "task") for the artifact `identity` names (checkpoint_id,
    checkpoint_revision, precision, shape_bucket, target_abi)."""
    return ValidationReport(kind, identity["checkpoint_id"], identity["checkpoint_revision"], identity["precision"],
                            identity["shape_bucket"], identity["target_abi"], checks)


def pending_task(identity: Mapping[str, str]) -> ValidationReport:
    """The task report of a component not yet checked: it does not pass (a session then runs the
    component only when asked to allow unqualified artifacts, as the export's own check does)."""
    return identity_report("task", identity, (ReportCheck("validation_run", 0.0, 1.0, ">="),))


def write_validated(directory: Path, component: str, identity: Mapping[str, str], numerical: ValidationReport,
                    task: ValidationReport, *, runtime: str, runtime_version: str, compiler_version: str,
                    extra_metadata: Mapping[str, Any] | None = None) -> ArtifactManifest:
    """A component's two reports (reports/numerical.json, reports/task.json) and its manifest
    referring to them, last."""
    from omni_edge import __version__

    write_report(directory / "reports" / "numerical.json", numerical)
    write_report(directory / "reports" / "task.json", task)
    return write_manifest(directory, component, ArtifactMetadata(
        **identity, runtime=runtime, runtime_version=runtime_version, adapter_version="1", exporter_version=__version__,
        compiler_version=compiler_version, state_layout_version=1,
        numerical_validation=ValidationRef("reports/numerical.json", numerical.passed),
        task_validation=ValidationRef("reports/task.json", task.passed)), extra_metadata=extra_metadata)
